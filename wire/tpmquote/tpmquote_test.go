package tpmquote

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/evidence"
)

// fixture loads testdata/swtpm_quote.json, a real swtpm quote (written by
// enclave/tpm/internal/fixturegen).
func fixture(t testing.TB) (*evidence.Evidence, evidence.ReportData, []byte) {
	t.Helper()
	fx := testfixture.LoadTPMQuote(t)
	return fx.Evidence, fx.ReportData, fx.AKName
}

func testRD(t testing.TB, s string) evidence.ReportData {
	t.Helper()
	rd, err := evidence.NewReportData(sha256.Sum256([]byte(s)), make(ed25519.PublicKey, ed25519.PublicKeySize), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// softKey is a software "TPM" key: it builds and signs TPMS_ATTEST so the real
// verifier runs on both signature schemes and on shapes a TPM would not emit.
type softKey struct {
	signer crypto.Signer
	pub    *Public
}

func newSoftKey(t testing.TB, typ uint16, attrs uint32) *softKey {
	t.Helper()
	switch typ {
	case AlgECC:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		pt, _ := k.PublicKey.Bytes()
		return &softKey{k, &Public{Type: AlgECC, Attributes: attrs, X: pt[1:33], Y: pt[33:]}}
	default:
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return &softKey{k, &Public{Type: algRSA, Attributes: attrs, KeyBits: 2048, N: k.N.Bytes()}}
	}
}

func (k *softKey) sign(t testing.TB, msg []byte) []byte {
	t.Helper()
	d := sha256.Sum256(msg)
	switch s := k.signer.(type) {
	case *ecdsa.PrivateKey:
		r, ss, err := ecdsa.Sign(rand.Reader, s, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return (&signature{Alg: algECDSA, R: r.FillBytes(make([]byte, 32)), S: ss.FillBytes(make([]byte, 32))}).marshal()
	default:
		sig, err := rsa.SignPKCS1v15(rand.Reader, k.signer.(*rsa.PrivateKey), crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return (&signature{Alg: algRSASSA, Sig: sig}).marshal()
	}
}

func testPCRs() PCRValues {
	v := PCRValues{{Index: 0}, {Index: 7}, {Index: 23}}
	for i := range v {
		v[i].Value = sha256.Sum256([]byte{byte(v[i].Index)})
	}
	return v
}

// evidence builds evidence signed by k over rd with the given PCRs, after
// letting edit change the attest.
func (k *softKey) evidence(t testing.TB, rd evidence.ReportData, pcrs PCRValues, edit func(*Attest)) *evidence.Evidence {
	t.Helper()
	qd := rd.QualifyingData()
	d := pcrs.Digest()
	a := &Attest{
		QualifiedSigner: primaryQualifiedName(handleEndorsement, k.pub.Name()),
		ExtraData:       qd[:],
		Clock:           1234,
		ResetCount:      1,
		Safe:            true,
		FirmwareVersion: 42,
		PCRs:            pcrs.Indices(),
		PCRDigest:       d[:],
	}
	if edit != nil {
		edit(a)
	}
	blob := a.marshal()
	return &evidence.Evidence{
		Platform:  evidence.PlatformTPM,
		Format:    Format,
		Blob:      blob,
		Signature: k.sign(t, blob),
		Aux: map[string][]byte{
			AuxAKPublic:  k.pub.Marshal(),
			AuxPCRValues: pcrs.Marshal(),
		},
	}
}

var anyAK = VerifyOpts{AllowUntrustedAK: true}

func TestVerifyFixture(t *testing.T) {
	ev, rd, name := fixture(t)
	v, err := Verify(ev, rd, VerifyOpts{TrustedAKNames: [][]byte{name}, AllowSimulated: true})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !bytes.Equal(v.AKName, name) || !v.Simulated || len(v.PCRs) != 9 {
		t.Fatalf("verified = %+v", v)
	}
	if _, err := Verify(ev, rd, VerifyOpts{TrustedAKNames: [][]byte{name}}); !errors.Is(err, ErrSimulated) {
		t.Fatalf("without AllowSimulated: %v", err)
	}
	other := slices.Clone(name)
	other[5] ^= 1
	if _, err := Verify(ev, rd, VerifyOpts{TrustedAKNames: [][]byte{other}, AllowSimulated: true}); !errors.Is(err, ErrUntrustedAK) {
		t.Fatalf("other pinned AK: %v", err)
	} else if !strings.Contains(err.Error(), hex.EncodeToString(name)) {
		t.Errorf("refusal %q does not name the AK seen", err)
	}
	if _, err := Verify(ev, testRD(t, "x"), VerifyOpts{TrustedAKNames: [][]byte{name}, AllowSimulated: true}); !errors.Is(err, ErrQualifyingData) {
		t.Fatalf("other report data: %v", err)
	}
	// Every single-bit flip anywhere in the signed blob is caught.
	for i := range ev.Blob {
		e := *ev
		e.Blob = slices.Clone(ev.Blob)
		e.Blob[i] ^= 0x80
		if _, err := Verify(&e, rd, VerifyOpts{TrustedAKNames: [][]byte{name}, AllowSimulated: true}); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("flip in blob byte %d: %v", i, err)
		}
	}
}

func TestVerifySoftwareKeys(t *testing.T) {
	rd := testRD(t, "rd")
	for _, typ := range []uint16{AlgECC, algRSA} {
		k := newSoftKey(t, typ, AKRequiredAttributes|AttrUserWithAuth)
		ev := k.evidence(t, rd, testPCRs(), nil)
		v, err := Verify(ev, rd, anyAK)
		if err != nil {
			t.Fatalf("type 0x%04x: %v", typ, err)
		}
		if !slices.Equal(v.PCRs.Indices(), []int{0, 7, 23}) || v.Attest.FirmwareVersion != 42 {
			t.Fatalf("verified = %+v", v)
		}
		if _, err := Verify(ev, rd, VerifyOpts{TrustedAKNames: [][]byte{k.pub.Name()}}); err != nil {
			t.Fatalf("pinned: %v", err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	rd := testRD(t, "rd")
	ecc := newSoftKey(t, AlgECC, AKRequiredAttributes)
	rsaKey := newSoftKey(t, algRSA, AKRequiredAttributes)
	good := ecc.evidence(t, rd, testPCRs(), nil)
	cases := []struct {
		name string
		ev   func() *evidence.Evidence
		rd   evidence.ReportData
		opts VerifyOpts
		want error
	}{
		{name: "nil evidence", ev: func() *evidence.Evidence { return nil }, want: ErrMalformed},
		{name: "contradictory options", ev: func() *evidence.Evidence { return good },
			opts: VerifyOpts{AllowUntrustedAK: true, TrustedAKNames: [][]byte{{1}}}, want: ErrOptions},
		{name: "no trust options", ev: func() *evidence.Evidence { return good }, opts: VerifyOpts{}, want: ErrOptions},
		{name: "not restricted", ev: func() *evidence.Evidence {
			k := newSoftKey(t, AlgECC, AKRequiredAttributes&^attrRestricted)
			return k.evidence(t, rd, testPCRs(), nil)
		}, want: ErrAKAttributes},
		{name: "decrypt key", ev: func() *evidence.Evidence {
			k := newSoftKey(t, AlgECC, AKRequiredAttributes|attrDecrypt)
			return k.evidence(t, rd, testPCRs(), nil)
		}, want: ErrAKAttributes},
		{name: "not fixedTPM", ev: func() *evidence.Evidence {
			k := newSoftKey(t, AlgECC, AKRequiredAttributes&^attrFixedTPM)
			return k.evidence(t, rd, testPCRs(), nil)
		}, want: ErrAKAttributes},
		{name: "signer is a child key", ev: func() *evidence.Evidence {
			return ecc.evidence(t, rd, testPCRs(), func(a *Attest) {
				a.QualifiedSigner = primaryQualifiedName(0x40000001, ecc.pub.Name())
			})
		}, want: ErrSignerMismatch},
		{name: "rsa signature with ecc key", ev: func() *evidence.Evidence {
			e := rsaKey.evidence(t, rd, testPCRs(), nil)
			e.Aux[AuxAKPublic] = ecc.pub.Marshal()
			return e
		}, want: ErrBadSignature},
		{name: "extra data empty", ev: func() *evidence.Evidence {
			return ecc.evidence(t, rd, testPCRs(), func(a *Attest) { a.ExtraData = nil })
		}, want: ErrQualifyingData},
		{name: "extra data is raw report data half", ev: func() *evidence.Evidence {
			return ecc.evidence(t, rd, testPCRs(), func(a *Attest) { b := rd.Bytes(); a.ExtraData = b[:32] })
		}, want: ErrQualifyingData},
		{name: "pcr digest of other values", ev: func() *evidence.Evidence {
			return ecc.evidence(t, rd, testPCRs(), func(a *Attest) { a.PCRDigest = make([]byte, 32) })
		}, want: ErrPCRMismatch},
		{name: "pcr selection wider than values", ev: func() *evidence.Evidence {
			return ecc.evidence(t, rd, testPCRs(), func(a *Attest) { a.PCRs = []int{0, 7, 22, 23} })
		}, want: ErrPCRMismatch},
		{name: "blob too large", ev: func() *evidence.Evidence {
			e := *good
			e.Blob = make([]byte, maxAttestSize+1)
			return &e
		}, want: errTooLarge},
		{name: "too many certificates", ev: func() *evidence.Evidence {
			e := *good
			e.CertChain = make([][]byte, maxCertChain+1)
			return &e
		}, want: errTooLarge},
		{name: "certificate too large", ev: func() *evidence.Evidence {
			e := *good
			e.CertChain = [][]byte{make([]byte, MaxCertSize+1)}
			return &e
		}, want: errTooLarge},
		{name: "event log too large", ev: func() *evidence.Evidence {
			e := *good
			e.Aux = map[string][]byte{AuxAKPublic: good.Aux[AuxAKPublic], AuxPCRValues: good.Aux[AuxPCRValues], AuxEventLog: make([]byte, MaxEventLogSize+1)}
			return &e
		}, want: errTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rd
			if !c.rd.IsZero() {
				r = c.rd
			}
			opts := c.opts
			if c.name != "no trust options" && !opts.AllowUntrustedAK && opts.TrustedAKNames == nil {
				opts = anyAK
			}
			v, err := Verify(c.ev(), r, opts)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if v != nil {
				t.Fatal("data returned with an error")
			}
		})
	}
	if _, err := Verify(good, rd, anyAK); err != nil {
		t.Fatalf("good evidence: %v", err)
	}
}

func TestParseAttestStrict(t *testing.T) {
	ev, _, _ := fixture(t)
	good := ev.Blob
	// Offsets in the fixture: magic 0, type 4, signer size 6 (34 bytes),
	// extraData size 42 (32 bytes), clock 76, reset 84, restart 88, safe 92,
	// firmware 93, selection count 101, hash 105, sizeofSelect 107.
	mut := mutator(good)
	checkStrict(t, good, ParseAttest, (*Attest).marshal, map[string]strictCase{
		"trailing byte":  {append(slices.Clone(good), 0), ErrMalformed},
		"truncated":      {good[:len(good)-1], ErrMalformed},
		"empty":          {nil, ErrMalformed},
		"bad magic":      {mut(0, 0), ErrMalformed},
		"certify type":   {mut(5, 0x17), ErrUnsupported},
		"safe is 2":      {mut(92, 2), ErrMalformed},
		"two banks":      {mut(104, 2), ErrUnsupported},
		"sha1 bank":      {mut(106, 0x04), ErrUnsupported},
		"select size 4":  {mut(107, 4), ErrUnsupported},
		"empty select":   {func() []byte { b := slices.Clone(good); b[108], b[109], b[110] = 0, 0, 0; return b }(), ErrUnsupported},
		"signer too big": {mut(6, 0xff), ErrMalformed},
		"too large":      {make([]byte, maxAttestSize+1), errTooLarge},
	})
}

// strictCase is an input a strict parser refuses with want.
type strictCase struct {
	b    []byte
	want error
}

// checkStrict: parse accepts good, which encodes back to itself, and
// refuses each case with its error. It returns good parsed.
func checkStrict[T any](t *testing.T, good []byte, parse func([]byte) (T, error), encode func(T) []byte, cases map[string]strictCase) T {
	t.Helper()
	v, ok := fuzzcheck.RoundTrip(t, good, parse, total(encode))
	if !ok {
		t.Fatal("the fixture is refused")
	}
	for name, c := range cases {
		if _, err := parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	return v
}

// mutator returns a function that copies good with byte i set to v.
func mutator(good []byte) func(i int, v byte) []byte {
	return func(i int, v byte) []byte { b := slices.Clone(good); b[i] = v; return b }
}

func TestParsePublicStrict(t *testing.T) {
	ev, _, _ := fixture(t)
	good := ev.Aux[AuxAKPublic]
	// Offsets: type 0, nameAlg 2, attributes 4, authPolicy size 8 (empty),
	// symmetric 10, scheme 12, scheme hash 14, curve 16, kdf 18, x 20.
	mut := mutator(good)
	checkStrict(t, good, ParsePublic, (*Public).Marshal, map[string]strictCase{
		"sha1 name alg":   {mut(3, 0x04), ErrUnsupported},
		"symmetric aes":   {mut(11, 0x06), ErrUnsupported},
		"ecdaa scheme":    {mut(13, 0x1a), ErrUnsupported},
		"sha384 scheme":   {mut(15, 0x0c), ErrUnsupported},
		"p384 curve":      {mut(17, 0x04), ErrUnsupported},
		"kdf set":         {mut(19, 0x07), ErrUnsupported},
		"keyedhash type":  {mut(1, 0x08), ErrUnsupported},
		"short x":         {mut(21, 31), ErrMalformed},
		"trailing":        {append(slices.Clone(good), 0), ErrMalformed},
		"truncated":       {good[:len(good)-1], ErrMalformed},
		"too large":       {make([]byte, MaxPublicSize+1), errTooLarge},
		"rsa exponent 3":  {(&Public{Type: algRSA, KeyBits: 2048, Exponent: 3, N: append([]byte{0x80}, make([]byte, 255)...)}).Marshal(), ErrUnsupported},
		"rsa 1024":        {(&Public{Type: algRSA, KeyBits: 1024, N: append([]byte{0x80}, make([]byte, 127)...)}).Marshal(), ErrUnsupported},
		"rsa short n":     {(&Public{Type: algRSA, KeyBits: 2048, N: append([]byte{0x80}, make([]byte, 254)...)}).Marshal(), ErrMalformed},
		"rsa n top clear": {(&Public{Type: algRSA, KeyBits: 2048, N: make([]byte, 256)}).Marshal(), ErrMalformed},
	})
	// A point off the curve parses but is not a key.
	off := slices.Clone(good)
	off[len(off)-1] ^= 1
	p, err := ParsePublic(off)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CryptoPublicKey(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("off-curve point: %v", err)
	}
}

func TestParseSignatureStrict(t *testing.T) {
	ev, _, _ := fixture(t)
	good := ev.Signature
	checkStrict(t, good, parseSignature, (*signature).marshal, nil)
	for name, b := range map[string][]byte{
		"trailing":  append(slices.Clone(good), 0),
		"truncated": good[:len(good)-1],
		"empty r":   {0, 0x18, 0, 0x0b, 0, 0, 0, 1, 1},
		"rsapss":    {0, 0x16, 0, 0x0b, 0, 1, 1},
		"sha1":      {0, 0x18, 0, 0x04, 0, 1, 1, 0, 1, 1},
	} {
		if _, err := parseSignature(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParsePCRValuesStrict(t *testing.T) {
	good := testPCRs().Marshal()
	v, err := ParsePCRValues(good)
	if err != nil || !bytes.Equal(v.Marshal(), good) {
		t.Fatalf("round trip: %v", err)
	}
	rec := func(idx ...int) []byte {
		b := []byte{0, 0x0b, byte(len(idx))}
		for _, i := range idx {
			b = append(b, byte(i))
			b = append(b, make([]byte, 32)...)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"empty list":   {0, 0x0b, 0},
		"descending":   rec(7, 0),
		"duplicate":    rec(3, 3),
		"index 24":     rec(24),
		"sha1":         append([]byte{0, 0x04}, rec(0)[2:]...),
		"trailing":     append(rec(0), 0),
		"truncated":    rec(0)[:20],
		"count excess": append([]byte{0, 0x0b, 2}, rec(0)[3:]...),
	} {
		if _, err := ParsePCRValues(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkVerifyFixture(b *testing.B) {
	ev, rd, name := fixture(b)
	opts := VerifyOpts{TrustedAKNames: [][]byte{name}, AllowSimulated: true}
	for b.Loop() {
		if _, err := Verify(ev, rd, opts); err != nil {
			b.Fatal(err)
		}
	}
}
