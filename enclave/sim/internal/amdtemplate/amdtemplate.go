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
	// notBefore and notAfter bound every simulated AMD certificate.
	notBefore = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2050, time.January, 1, 0, 0, 0, 0, time.UTC)
	// oidDescription is the X.520 description attribute carrying
	// simroots.TestOnlyMarker.
	oidDescription = asn1.ObjectIdentifier{2, 5, 4, 13}
)

// name is a subject with the attributes go-sev-guest requires of AMD
// certificates plus the test-only marker.
func name(cn string) pkix.Name {
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

// Roots returns the ARK and ASK certificate templates: CAs that differ in
// serial, name and key usage (only the ARK signs CRLs).
func Roots() (ark, ask *x509.Certificate) {
	line := simroots.SEVSNPProductLine
	return rootTemplate(1, "ARK-"+line, x509.KeyUsageCertSign|x509.KeyUsageCRLSign),
		rootTemplate(2, "SEV-"+line, x509.KeyUsageCertSign)
}

// VCEK returns the template of a VCEK certificate with serial and the KDS
// extensions exts (the TCB, the chip id and the product name).
func VCEK(serial *big.Int, exts []pkix.Extension) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:       serial,
		Subject:            name("SEV-VCEK"),
		NotBefore:          notBefore,
		NotAfter:           notAfter,
		SignatureAlgorithm: x509.SHA384WithRSAPSS,
		ExtraExtensions:    exts,
	}
}

// rootTemplate is the template of one simulated AMD CA certificate.
func rootTemplate(serial int64, cn string, usage x509.KeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               name(cn),
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		SignatureAlgorithm:    x509.SHA384WithRSAPSS,
		KeyUsage:              usage,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}
