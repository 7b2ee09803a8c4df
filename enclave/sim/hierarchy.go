package sim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"time"

	"github.com/clawea/attester/wire/simroots"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-sev-guest/testing/data"
)

// The simulated AMD key hierarchy uses go-sev-guest's fixed test keys
// (testing/data): ARK and ASK are RSA-4096, the VCEK is ECDSA P-384. The ARK
// and ASK certificates are generated once (TestSimRootsMatchHierarchy -update) and pinned
// in simroots; the VCEK certificate is issued per Simulator for its CHIP_ID
// and TCB.

var (
	certNotBefore = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	certNotAfter  = time.Date(2050, time.January, 1, 0, 0, 0, 0, time.UTC)
	// oidDescription is the X.520 description attribute carrying
	// simroots.TestOnlyMarker.
	oidDescription = asn1.ObjectIdentifier{2, 5, 4, 13}
)

// simProduct is the simulated CPU: AMD Milan B1.
func simProductName() string { return kds.ProductName(abi.DefaultSevProduct()) }

// amdName is a subject with the attributes go-sev-guest requires of AMD
// certificates plus the test-only marker.
func amdName(cn string) pkix.Name {
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

// rootTemplates returns the ARK and ASK certificate templates.
func rootTemplates() (ark, ask *x509.Certificate) {
	line := simroots.SEVSNPProductLine
	ark = &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               amdName("ARK-" + line),
		NotBefore:             certNotBefore,
		NotAfter:              certNotAfter,
		SignatureAlgorithm:    x509.SHA384WithRSAPSS,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	ask = &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               amdName("SEV-" + line),
		NotBefore:             certNotBefore,
		NotAfter:              certNotAfter,
		SignatureAlgorithm:    x509.SHA384WithRSAPSS,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return ark, ask
}

// generateRoots signs fresh ARK and ASK certificates (DER). RSA-PSS is
// randomized, so the output differs per call: it is run once and the result
// is pinned in simroots.
func generateRoots() (arkDER, askDER []byte, err error) {
	arkT, askT := rootTemplates()
	arkDER, err = x509.CreateCertificate(rand.Reader, arkT, arkT, data.ARKPrivateKey.Public(), data.ARKPrivateKey)
	if err != nil {
		return nil, nil, err
	}
	ark, err := x509.ParseCertificate(arkDER)
	if err != nil {
		return nil, nil, err
	}
	askDER, err = x509.CreateCertificate(rand.Reader, askT, ark, data.ASKPrivateKey.Public(), data.ARKPrivateKey)
	if err != nil {
		return nil, nil, err
	}
	return arkDER, askDER, nil
}

// kdsExtensions are the AMD KDS VCEK extensions (AMD 57230) for the given TCB
// and hardware id.
func kdsExtensions(tcb kds.TCBParts, hwid []byte, productName string) ([]pkix.Extension, error) {
	var exts []pkix.Extension
	add := func(id asn1.ObjectIdentifier, v any, params string) error {
		b, err := asn1.MarshalWithParams(v, params)
		if err != nil {
			return err
		}
		exts = append(exts, pkix.Extension{Id: id, Value: b})
		return nil
	}
	steps := []struct {
		id     asn1.ObjectIdentifier
		v      any
		params string
	}{
		{kds.OidStructVersion, 0, ""},
		{kds.OidProductName1, productName, "ia5"},
		{kds.OidBlSpl, int(tcb.BlSpl), ""},
		{kds.OidTeeSpl, int(tcb.TeeSpl), ""},
		{kds.OidSnpSpl, int(tcb.SnpSpl), ""},
		{kds.OidSpl4, int(tcb.Spl4), ""},
		{kds.OidSpl5, int(tcb.Spl5), ""},
		{kds.OidSpl6, int(tcb.Spl6), ""},
		{kds.OidSpl7, int(tcb.Spl7), ""},
		{kds.OidUcodeSpl, int(tcb.UcodeSpl), ""},
		{kds.OidHwid, hwid, ""},
	}
	for _, s := range steps {
		if err := add(s.id, s.v, s.params); err != nil {
			return nil, err
		}
	}
	return exts, nil
}

// issueVCEK certifies vcek for chipID at tcb under the pinned simulated ASK.
func issueVCEK(ask *x509.Certificate, askKey *rsa.PrivateKey, vcek crypto.PublicKey, chipID []byte, tcb kds.TCBVersion) ([]byte, error) {
	exts, err := kdsExtensions(kds.DecomposeTCBVersion(tcb), chipID, simProductName())
	if err != nil {
		return nil, fmt.Errorf("sim: vcek extensions: %w", err)
	}
	if _, ok := vcek.(*ecdsa.PublicKey); !ok {
		return nil, fmt.Errorf("sim: vcek key is not ecdsa")
	}
	t := &x509.Certificate{
		SerialNumber:       new(big.Int).Add(new(big.Int).SetBytes(chipID[:8]), big.NewInt(1)),
		Subject:            amdName("SEV-VCEK"),
		NotBefore:          certNotBefore,
		NotAfter:           certNotAfter,
		SignatureAlgorithm: x509.SHA384WithRSAPSS,
		ExtraExtensions:    exts,
	}
	der, err := x509.CreateCertificate(rand.Reader, t, ask, vcek, askKey)
	if err != nil {
		return nil, fmt.Errorf("sim: issue vcek: %w", err)
	}
	return der, nil
}
