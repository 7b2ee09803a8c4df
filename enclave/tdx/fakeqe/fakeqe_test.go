package fakeqe_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/pcs"
	"github.com/google/go-tdx-guest/validate"
	"github.com/google/go-tdx-guest/verify"
)

func pinnedPool(t testing.TB) *x509.CertPool {
	t.Helper()
	p, err := tdxsimroots.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// verifyRaw runs go-tdx-guest's real verifier, offline (no collateral, no
// CRLs), with pool as the trusted roots (nil: the embedded Intel root). It
// fails the test if the library cannot even parse raw, so that every
// rejection seen by callers comes from verification.
func verifyRaw(t testing.TB, raw []byte, pool *x509.CertPool) error {
	t.Helper()
	return verify.TdxQuote(libQuote(t, raw), &verify.Options{TrustedRoots: pool, Now: tdxtest.TimeSet(tdxtest.At)})
}

// libQuote is go-tdx-guest's parse of raw; a quote it cannot parse fails t.
func libQuote(t testing.TB, raw []byte) any {
	t.Helper()
	q, err := abi.QuoteToProto(raw)
	if err != nil {
		t.Fatalf("go-tdx-guest cannot parse the quote: %v", err)
	}
	return q
}

// policy checks REPORT_DATA, MRTD, the QE vendor and TD_ATTRIBUTES == 0
// (DEBUG off).
func policy(rd [64]byte, td tdxquote.Body) *validate.Options {
	return &validate.Options{
		HeaderOptions: validate.HeaderOptions{QeVendorID: fakeqe.IntelQEVendorID[:]},
		TdQuoteBodyOptions: validate.TdQuoteBodyOptions{
			ReportData:   rd[:],
			MrTd:         td.MRTD[:],
			TdAttributes: make([]byte, abi.TdAttributesSize),
		},
	}
}

func validateRaw(t testing.TB, raw []byte, opts *validate.Options) error {
	t.Helper()
	return validate.TdxQuote(libQuote(t, raw), opts)
}

func freshReportData(t testing.TB) [64]byte {
	t.Helper()
	var rd [64]byte
	if _, err := rand.Read(rd[:]); err != nil {
		t.Fatal(err)
	}
	return rd
}

func newQE(t testing.TB, opts fakeqe.Options) *fakeqe.QE {
	t.Helper()
	qe, err := fakeqe.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return qe
}

func rawQuote(t testing.TB, qe *fakeqe.QE, rd [64]byte) []byte {
	t.Helper()
	raw, err := qe.GetRawQuote(rd)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestPinnedRoot(t *testing.T) {
	root, err := tdxsimroots.Root()
	if err != nil {
		t.Fatal(err)
	}
	k, err := fakeqe.SeedKey(fakeqe.PinnedSeed, "root-ca")
	if err != nil {
		t.Fatal(err)
	}
	if !k.PublicKey.Equal(root.PublicKey) {
		t.Fatal("pinned root key is not the seed-derived key")
	}
	if err := root.CheckSignatureFrom(root); err != nil {
		t.Fatalf("pinned root is not self-signed: %v", err)
	}
	sum := sha256.Sum256(root.Raw)
	if hex.EncodeToString(sum[:]) != tdxsimroots.RootSHA256 || !tdxsimroots.IsRoot(root.Raw) {
		t.Fatal("pin mismatch")
	}
	h, err := fakeqe.PinnedHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	chain := h.ChainDER()
	if !bytes.Equal(chain[2], root.Raw) {
		t.Fatal("pinned hierarchy does not end in the pinned root")
	}
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(c.Subject.OrganizationalUnit, tdxsimroots.Marker) {
			t.Errorf("certificate %d subject %q lacks %q", i, c.Subject, tdxsimroots.Marker)
		}
	}
	if _, err := fakeqe.NewHierarchy(fakeqe.PinnedSeed); err == nil {
		t.Error("NewHierarchy accepted the pinned seed")
	}
}

// The PCK leaf carries the SGX extensions go-tdx-guest reads.
func TestPCKExtensions(t *testing.T) {
	h, err := fakeqe.PinnedHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(h.ChainDER()[0])
	if err != nil {
		t.Fatal(err)
	}
	ext, err := pcs.PckCertificateExtensions(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if ext.FMSPC != hex.EncodeToString(fakeqe.FMSPC[:]) || ext.PCEID != hex.EncodeToString(fakeqe.PCEID[:]) {
		t.Errorf("fmspc %q pceid %q", ext.FMSPC, ext.PCEID)
	}
	if len(ext.PPID) != 32 || ext.TCB.PCESvn != 13 || len(ext.TCB.CPUSvn) != 16 || len(ext.TCB.CPUSvnComponents) != 16 {
		t.Errorf("unexpected extensions %+v", ext)
	}
	if !bytes.Equal(ext.TCB.CPUSvn, ext.TCB.CPUSvnComponents) {
		t.Error("cpusvn and its components disagree")
	}
}

// Fresh report data, real signatures, real verifier, test root: accepted;
// and the policy check (REPORT_DATA, MRTD, debug off) passes.
func TestVerifyAcceptsFreshQuotes(t *testing.T) {
	qe := newQE(t, fakeqe.Options{})
	pool := pinnedPool(t)
	for i := 0; i < 3; i++ {
		rd := freshReportData(t)
		raw := rawQuote(t, qe, rd)
		if err := verifyRaw(t, raw, pool); err != nil {
			t.Fatalf("verify.TdxQuote rejected a fresh fake quote: %v", err)
		}
		if err := validateRaw(t, raw, policy(rd, qe.TD())); err != nil {
			t.Fatalf("validate.TdxQuote: %v", err)
		}
	}
}

func TestVerifyRejectsIntelRoot(t *testing.T) {
	qe := newQE(t, fakeqe.Options{})
	raw := rawQuote(t, qe, freshReportData(t))
	if err := verifyRaw(t, raw, nil); err == nil {
		t.Fatal("the embedded Intel root accepted a fake quote")
	}
}

func TestValidateRejects(t *testing.T) {
	qe := newQE(t, fakeqe.Options{})
	rd := freshReportData(t)
	raw := rawQuote(t, qe, rd)

	other := rd
	other[0] ^= 1
	if err := validateRaw(t, raw, policy(other, qe.TD())); err == nil {
		t.Error("wrong report data accepted")
	}
	td := qe.TD()
	td.MRTD[47] ^= 1
	if err := validateRaw(t, raw, policy(rd, td)); err == nil {
		t.Error("wrong MRTD accepted")
	}

	debugTD := fakeqe.DefaultTD()
	debugTD.TDAttributes[0] |= 1 // TUD.DEBUG
	dqe := newQE(t, fakeqe.Options{TD: &debugTD})
	draw := rawQuote(t, dqe, rd)
	if err := verifyRaw(t, draw, pinnedPool(t)); err != nil {
		t.Fatalf("debug quote must still verify cryptographically: %v", err)
	}
	if err := validateRaw(t, draw, policy(rd, debugTD)); err == nil {
		t.Error("debug TD accepted by a debug-off policy")
	}
}

// reencode parses raw, applies f and re-encodes without re-signing.
func reencode(t testing.TB, raw []byte, f func(q *tdxquote.Quote)) []byte {
	t.Helper()
	q, err := tdxquote.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	f(q)
	b, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyRejectsTampering(t *testing.T) {
	qe := newQE(t, fakeqe.Options{})
	pool := pinnedPool(t)
	raw := rawQuote(t, qe, freshReportData(t))
	if err := verifyRaw(t, raw, pool); err != nil {
		t.Fatal(err)
	}
	attacker, err := fakeqe.SeedKey("attacker", "attestation-key")
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		raw  []byte
		// want is the go-tdx-guest sentinel where the library returns one
		// unwrapped; nil where it flattens its error with %v.
		want error
	}{
		{"body report data byte", reencode(t, raw, func(q *tdxquote.Quote) { q.Body.ReportData[5] ^= 1 }), verify.ErrHashVerificationFail},
		{"body mrtd byte", reencode(t, raw, func(q *tdxquote.Quote) { q.Body.MRTD[0] ^= 0x80 }), verify.ErrHashVerificationFail},
		{"body debug bit", reencode(t, raw, func(q *tdxquote.Quote) { q.Body.TDAttributes[0] ^= 1 }), verify.ErrHashVerificationFail},
		{"header user data", reencode(t, raw, func(q *tdxquote.Quote) { q.Header.UserData[0] ^= 1 }), verify.ErrHashVerificationFail},
		{"quote signature", reencode(t, raw, func(q *tdxquote.Quote) { q.Signature[40] ^= 1 }), verify.ErrHashVerificationFail},
		{"qe report isvsvn", reencode(t, raw, func(q *tdxquote.Quote) { q.QEReport.ISVSVN++ }), nil},
		{"qe report data", reencode(t, raw, func(q *tdxquote.Quote) { q.QEReport.ReportData[0] ^= 1 }), nil},
		{"qe report signature", reencode(t, raw, func(q *tdxquote.Quote) { q.QEReportSignature[3] ^= 1 }), nil},
		{"qe auth data", reencode(t, raw, func(q *tdxquote.Quote) { q.QEAuthData[0] ^= 1 }), nil},
		{"attestation key swapped and body re-signed", reencode(t, raw, func(q *tdxquote.Quote) {
			pub, err := attacker.PublicKey.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			copy(q.AttestationKey[:], pub[1:])
			q.Signature = signRaw(t, attacker, q.SignedBytes())
		}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := verifyRaw(t, c.raw, pool)
			if err == nil {
				t.Fatal("tampered quote accepted")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func signRaw(t testing.TB, k *ecdsa.PrivateKey, msg []byte) [64]byte {
	t.Helper()
	d := sha256.Sum256(msg)
	r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
	if err != nil {
		t.Fatal(err)
	}
	var out [64]byte
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

// A quote whose PCK chains to another (equally TEST ONLY) root is rejected
// with the pinned pool, accepted with its own root (so the rejection is the
// root's doing), and a quote carrying another hierarchy's chain is rejected
// under either root.
func TestVerifyRejectsOtherRoot(t *testing.T) {
	oh, err := fakeqe.NewHierarchy("other")
	if err != nil {
		t.Fatal(err)
	}
	oqe := newQE(t, fakeqe.Options{Hierarchy: oh})
	raw := rawQuote(t, oqe, freshReportData(t))
	if err := verifyRaw(t, raw, pinnedPool(t)); err == nil {
		t.Fatal("pck from another root accepted by the pinned pool")
	}
	if err := verifyRaw(t, raw, poolOf(oh.Root())); err != nil {
		t.Fatalf("control: own root rejected: %v", err)
	}

	pqe := newQE(t, fakeqe.Options{})
	mixed := reencode(t, rawQuote(t, pqe, freshReportData(t)), func(q *tdxquote.Quote) {
		q.PCKChain = tdxquote.EncodePCKChain(oh.ChainDER())
	})
	for name, pool := range map[string]*x509.CertPool{"pinned": pinnedPool(t), "other": poolOf(oh.Root())} {
		if err := verifyRaw(t, mixed, pool); err == nil {
			t.Errorf("quote with a foreign pck chain accepted under the %s root", name)
		}
	}
}

func TestVerifyRejectsExpiredChain(t *testing.T) {
	qe := newQE(t, fakeqe.Options{})
	q := libQuote(t, rawQuote(t, qe, freshReportData(t)))
	late := time.Date(2080, time.January, 1, 0, 0, 0, 0, time.UTC)
	if err := verify.TdxQuote(q, &verify.Options{TrustedRoots: pinnedPool(t), Now: tdxtest.TimeSet(late)}); err == nil {
		t.Fatal("expired chain accepted")
	}
}
