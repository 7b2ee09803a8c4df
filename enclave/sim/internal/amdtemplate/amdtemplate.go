// Package amdtemplate holds the certificate templates of the simulated AMD
// key hierarchy: the simulator issues VCEK certificates from them, the
// pinned ARK and ASK in wire/simroots were signed from them (rootsgen),
// and enclave/sim's tests check that the pinned roots still match them.
package amdtemplate

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"time"

	"github.com/clawea/attester/wire/simroots"
)

var (
	// NotBefore and NotAfter bound every simulated AMD certificate.
	NotBefore = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	NotAfter  = time.Date(2050, time.January, 1, 0, 0, 0, 0, time.UTC)
	// oidDescription is the X.520 description attribute carrying
	// simroots.TestOnlyMarker.
	oidDescription = asn1.ObjectIdentifier{2, 5, 4, 13}
)

// Name is a subject with the attributes go-sev-guest requires of AMD
// certificates plus the test-only marker.
func Name(cn string) pkix.Name {
	return pkix.Name{
		Country:            []string{"US"},
		Locality:           []string{"Santa Clara"},
		Province:           []string{"CA"},
		Organization:       []string{"Advanced Micro Devices"},
		OrganizationalUnit: []string{"Engineering"},
		CommonName:         cn,
		ExtraNames:         []pkix.AttributeTypeAndValue{{Type: oidDescription, Value: simroots.TestOnlyMarker}},
	}
}

// Roots returns the ARK and ASK certificate templates.
func Roots() (ark, ask *x509.Certificate) {
	line := simroots.SEVSNPProductLine
	ark = &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               Name("ARK-" + line),
		NotBefore:             NotBefore,
		NotAfter:              NotAfter,
		SignatureAlgorithm:    x509.SHA384WithRSAPSS,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	ask = &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               Name("SEV-" + line),
		NotBefore:             NotBefore,
		NotAfter:              NotAfter,
		SignatureAlgorithm:    x509.SHA384WithRSAPSS,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return ark, ask
}
