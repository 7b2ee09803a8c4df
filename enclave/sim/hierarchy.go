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

	"github.com/clawea/attester/enclave/sim/internal/amdtemplate"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
)

// The simulated AMD key hierarchy uses go-sev-guest's fixed test keys
// (testing/data): ARK and ASK are RSA-4096, the VCEK is ECDSA P-384. The ARK
// and ASK certificates were signed once from internal/amdtemplate (by
// internal/rootsgen) and are pinned in simroots; the VCEK certificate is
// issued per Simulator for its CHIP_ID and TCB.

// simProduct is the simulated CPU: AMD Milan B1.
func simProductName() string { return kds.ProductName(abi.DefaultSevProduct()) }

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
	t := amdtemplate.VCEK(new(big.Int).Add(new(big.Int).SetBytes(chipID[:8]), big.NewInt(1)), exts)
	der, err := x509.CreateCertificate(rand.Reader, t, ask, vcek, askKey)
	if err != nil {
		return nil, fmt.Errorf("sim: issue vcek: %w", err)
	}
	return der, nil
}
