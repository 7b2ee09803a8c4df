package platform

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/testing/data"
)

// Critical CRL extensions that narrow what a CRL says (RFC 5280 5.2.4,
// 5.2.5, 5.3.3). Go's parser applies none of them.
var (
	oidDeltaCRLIndicator  = asn1.ObjectIdentifier{2, 5, 29, 27}
	oidIssuingDistPoint   = asn1.ObjectIdentifier{2, 5, 29, 28}
	oidCertificateIssuer  = asn1.ObjectIdentifier{2, 5, 29, 29}
	deltaBase, _          = asn1.Marshal(big.NewInt(1))
	onlyCACerts           = []byte{0x30, 0x03, 0x82, 0x01, 0xff} // IDP: onlyContainsCACerts
	otherIssuerGeneralNms = []byte{0x30, 0x06, 0x82, 0x04, 'a', '.', 'e', 'x'}
)

// TestCRLScopeAttack: a CRL signed by the right key whose critical
// extension narrows it (a delta CRL, an issuing distribution point, an
// indirect CRL entry) is not a complete list of the issuer's revocations:
// read as one, it let an attacker swap the full CRL that lists the chip's
// certificate for an ARK-signed delta CRL that does not, and get
// Revocation "checked". It must be ErrCannotCheck/revocation.
func TestCRLScopeAttack(t *testing.T) {
	rd := testRD(t, "sev")
	ev := simSEV(t, sim.Options{}, rd)
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	ark := simroots.SEVSNPRoots()[0].ARK
	crit := func(id asn1.ObjectIdentifier, v []byte) []pkix.Extension {
		return []pkix.Extension{{Id: id, Critical: true, Value: v}}
	}
	cases := map[string]*x509.RevocationList{
		"delta crl":          {ExtraExtensions: crit(oidDeltaCRLIndicator, deltaBase)},
		"distribution point": {ExtraExtensions: crit(oidIssuingDistPoint, onlyCACerts)},
		"indirect entry": {RevokedCertificateEntries: []x509.RevocationListEntry{{
			SerialNumber: p.Leaf.SerialNumber, RevocationTime: testNow.Add(-day),
			ExtraExtensions: crit(oidCertificateIssuer, otherIssuerGeneralNms)}}},
	}
	for name, tmpl := range cases {
		t.Run("sev-snp "+name, func(t *testing.T) {
			tmpl.Number, tmpl.ThisUpdate, tmpl.NextUpdate = big.NewInt(7), testNow.Add(-day), testNow.Add(day)
			der, err := x509.CreateRevocationList(rand.Reader, tmpl, ark, data.ARKPrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			opts := simOpts()
			opts.AllowUncheckedRevocation = false
			opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{der}}
			_, err = Verify(ev, rd, opts)
			wantErr(t, err, ErrCannotCheck, errUnsupported, checkRevocation)
		})
	}
	// TDX: the same rule before go-tdx-guest reads the PCK or root CA CRL.
	tdxRD := testRD(t, "tdx")
	tdxEv := simTDX(t, fakeqe.Options{}, tdxRD)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []bool{false, true} {
		c := simTDXCollateral(t, fakeqe.PCSOptions{})
		target := &c.TDXPCKCRL
		if root {
			target = &c.TDXRootCRL
		}
		orig, err := x509.ParseRevocationList(*target)
		if err != nil {
			t.Fatal(err)
		}
		issuer := &x509.Certificate{RawSubject: orig.RawIssuer, SubjectKeyId: []byte{1}, KeyUsage: x509.KeyUsageCRLSign,
			BasicConstraintsValid: true, IsCA: true}
		tmpl := &x509.RevocationList{Number: big.NewInt(7), ThisUpdate: orig.ThisUpdate, NextUpdate: orig.NextUpdate,
			ExtraExtensions: crit(oidDeltaCRLIndicator, deltaBase)}
		if *target, err = x509.CreateRevocationList(rand.Reader, tmpl, issuer, key); err != nil {
			t.Fatal(err)
		}
		_, err = Verify(tdxEv, tdxRD, Options{Now: fixedNow, AllowSimulated: true, Collateral: c})
		wantErr(t, err, ErrCannotCheck, errUnsupported, checkRevocation)
	}
}

// TestCRLTimeEdgeAttack: an AMD CRL is usable from thisUpdate to
// nextUpdate inclusive and at no other instant: a CRL one second past its
// nextUpdate, or one second before its thisUpdate, is EXPIRED, never
// silently skipped (which would leave a revoked chip "unchecked" under
// AllowUncheckedRevocation rather than refused).
func TestCRLTimeEdgeAttack(t *testing.T) {
	rd := testRD(t, "sev")
	ev := simSEV(t, sim.Options{}, rd)
	day := 24 * time.Hour
	for name, w := range map[string][2]time.Time{
		"at nextUpdate":   {testNow.Add(-day), testNow},
		"at thisUpdate":   {testNow, testNow.Add(day)},
		"past nextUpdate": {testNow.Add(-day), testNow.Add(-time.Second)},
		"before issue":    {testNow.Add(time.Second), testNow.Add(day)},
	} {
		t.Run(name, func(t *testing.T) {
			opts := simOpts() // AllowUncheckedRevocation: an unusable CRL must still refuse
			opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{testfixture.SimSEVCRL(t, w[0], w[1])}}
			res, err := Verify(ev, rd, opts)
			if w[0].After(testNow) || w[1].Before(testNow) {
				wantErr(t, err, ErrRejected, errCollateralExpired, checkRevocation)
				return
			}
			if err != nil || res.Revocation != StatusChecked {
				t.Fatalf("crl valid at the edge: %v", err)
			}
		})
	}
}
