package tpm

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

func testReportData(t testing.TB, seed string) evidence.ReportData {
	t.Helper()
	nonce := sha256.Sum256([]byte("nonce/" + seed))
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(nonce, key, []byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func quote(t testing.TB, tp *TPM, rd evidence.ReportData) *evidence.Evidence {
	t.Helper()
	ev, err := tp.Quote(context.Background(), rd)
	if err != nil {
		t.Fatalf("Quote: %v", err)
	}
	return ev
}

// pinned verifies ev trusting exactly tp's AK.
func pinned(tp *TPM) tpmquote.VerifyOpts {
	ak, err := tpmquote.ParsePublic(tp.AKPublic())
	if err != nil {
		panic(err)
	}
	return tpmquote.VerifyOpts{TrustedAKNames: [][]byte{ak.Name()}, AllowSimulated: true}
}

func cloneEvidence(ev *evidence.Evidence) *evidence.Evidence {
	c := *ev
	c.Blob = slices.Clone(ev.Blob)
	c.Signature = slices.Clone(ev.Signature)
	c.CertChain = slices.Clone(ev.CertChain)
	c.Aux = make(map[string][]byte, len(ev.Aux))
	for k, v := range ev.Aux {
		c.Aux[k] = slices.Clone(v)
	}
	return &c
}

// extendPCR extends SHA-256 PCR pcr of tp with SHA-256(data).
func extendPCR(t testing.TB, tp *TPM, pcr int, data string) {
	t.Helper()
	unlock, err := tp.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	d := sha256.Sum256([]byte(data))
	_, err = tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: d[:]}}},
	}.Execute(tp.tp)
	if err != nil {
		t.Fatalf("PCRExtend: %v", err)
	}
}

func TestQuoteVerifies(t *testing.T) {
	tp := openSwtpm(t, Options{})
	rd := testReportData(t, "a")
	ev := quote(t, tp, rd)

	if ev.Platform != evidence.PlatformTPM || ev.Format != tpmquote.Format || !ev.Simulated {
		t.Fatalf("evidence header = %q %q simulated=%v", ev.Platform, ev.Format, ev.Simulated)
	}
	if !bytes.Equal(ev.Aux[tpmquote.AuxAKPublic], tp.AKPublic()) {
		t.Fatal("ak_public is not the AK's TPMT_PUBLIC")
	}
	v, err := tpmquote.Verify(ev, rd, pinned(tp))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !slices.Equal(v.PCRs.Indices(), defaultPCRs()) {
		t.Fatalf("quoted pcrs %v", v.PCRs.Indices())
	}
	qd := rd.QualifyingData()
	if !bytes.Equal(v.Attest.ExtraData, qd[:]) {
		t.Fatal("extraData is not the qualifying data")
	}
	lm, err := tp.LaunchMeasurement(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lm, v.Attest.PCRDigest) {
		t.Fatalf("LaunchMeasurement %x, quote pcrDigest %x", lm, v.Attest.PCRDigest)
	}
	if tp.Platform() != evidence.PlatformTPM {
		t.Fatal(tp.Platform())
	}

	// Simulated evidence needs AllowSimulated.
	strict := pinned(tp)
	strict.AllowSimulated = false
	if _, err := tpmquote.Verify(ev, rd, strict); !errors.Is(err, tpmquote.ErrSimulated) {
		t.Fatalf("strict Verify: %v, want ErrSimulated", err)
	}
	// The AK is deterministic: a second Open yields the same AK.
	tp.Close()
	tp2 := openSwtpm(t, Options{})
	if !bytes.Equal(tp2.AKPublic(), ev.Aux[tpmquote.AuxAKPublic]) {
		t.Fatal("AK changed across Open")
	}
}

func TestQuotePCRSelection(t *testing.T) {
	tp := openSwtpm(t, Options{PCRs: []int{23, 0, 16, 10, 1, 2, 3, 4, 5, 6, 7, 8}})
	rd := testReportData(t, "sel")
	ev := quote(t, tp, rd)
	v, err := tpmquote.Verify(ev, rd, pinned(tp))
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 16, 23}
	if !slices.Equal(v.PCRs.Indices(), want) {
		t.Fatalf("pcrs %v, want %v", v.PCRs.Indices(), want)
	}
}

// softwareAK returns a TPMT_PUBLIC with AK attributes for a key that is not
// the TPM's.
func softwareAK(t testing.TB) []byte {
	t.Helper()
	return testcert.SoftwareAK(t, tpmquote.Public{
		Type:       tpmquote.AlgECC,
		Attributes: tpmquote.AKRequiredAttributes | tpmquote.AttrUserWithAuth,
	})
}

func TestQuoteRejected(t *testing.T) {
	tp := openSwtpm(t, Options{})
	rd := testReportData(t, "b")
	ev := quote(t, tp, rd)
	opts := pinned(tp)

	flip := func(b []byte, i int) { b[i] ^= 0x01 }
	cases := []struct {
		name   string
		mutate func(e *evidence.Evidence)
		rd     *evidence.ReportData
		opts   *tpmquote.VerifyOpts
		want   error
	}{
		{name: "wrong qualifying data", rd: ptr(testReportData(t, "other")), want: tpmquote.ErrQualifyingData},
		{name: "zero report data", rd: &evidence.ReportData{}, want: evidence.ErrZeroReportData},
		{name: "attest first byte", mutate: func(e *evidence.Evidence) { flip(e.Blob, 0) }, want: tpmquote.ErrBadSignature},
		{name: "attest extraData byte", mutate: func(e *evidence.Evidence) { flip(e.Blob, 6+2+34+2) }, want: tpmquote.ErrBadSignature},
		{name: "attest last byte", mutate: func(e *evidence.Evidence) { flip(e.Blob, len(e.Blob)-1) }, want: tpmquote.ErrBadSignature},
		{name: "attest truncated", mutate: func(e *evidence.Evidence) { e.Blob = e.Blob[:len(e.Blob)-1] }, want: tpmquote.ErrBadSignature},
		{name: "signature r byte", mutate: func(e *evidence.Evidence) { flip(e.Signature, 6) }, want: tpmquote.ErrBadSignature},
		{name: "signature s byte", mutate: func(e *evidence.Evidence) { flip(e.Signature, len(e.Signature)-1) }, want: tpmquote.ErrBadSignature},
		{name: "signature truncated", mutate: func(e *evidence.Evidence) { e.Signature = e.Signature[:len(e.Signature)-1] }, want: tpmquote.ErrMalformed},
		{name: "wrong ak trusted", mutate: func(e *evidence.Evidence) { e.Aux[tpmquote.AuxAKPublic] = softwareAK(t) }, want: tpmquote.ErrUntrustedAK},
		{name: "wrong ak untrusted mode", mutate: func(e *evidence.Evidence) { e.Aux[tpmquote.AuxAKPublic] = softwareAK(t) },
			opts: &tpmquote.VerifyOpts{AllowUntrustedAK: true, AllowSimulated: true}, want: tpmquote.ErrBadSignature},
		{name: "pcr value byte", mutate: func(e *evidence.Evidence) { flip(e.Aux[tpmquote.AuxPCRValues], 4) }, want: tpmquote.ErrPCRMismatch},
		{name: "pcr values other selection", mutate: func(e *evidence.Evidence) {
			v, _ := tpmquote.ParsePCRValues(e.Aux[tpmquote.AuxPCRValues])
			e.Aux[tpmquote.AuxPCRValues] = v[1:].Marshal()
		}, want: tpmquote.ErrPCRMismatch},
		{name: "pcr values missing", mutate: func(e *evidence.Evidence) { delete(e.Aux, tpmquote.AuxPCRValues) }, want: tpmquote.ErrMissingAuxField},
		{name: "ak missing", mutate: func(e *evidence.Evidence) { delete(e.Aux, tpmquote.AuxAKPublic) }, want: tpmquote.ErrMissingAuxField},
		{name: "wrong format", mutate: func(e *evidence.Evidence) { e.Format = "tpm2/quote-v2" }, want: tpmquote.ErrUnsupported},
		{name: "wrong platform", mutate: func(e *evidence.Evidence) { e.Platform = evidence.PlatformTDX }, want: tpmquote.ErrUnsupported},
		{name: "no trust option", opts: &tpmquote.VerifyOpts{AllowSimulated: true}, want: tpmquote.ErrOptions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := cloneEvidence(ev)
			if c.mutate != nil {
				c.mutate(e)
			}
			r := rd
			if c.rd != nil {
				r = *c.rd
			}
			o := opts
			if c.opts != nil {
				o = *c.opts
			}
			v, err := tpmquote.Verify(e, r, o)
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if v != nil {
				t.Fatal("Verify returned data with an error")
			}
		})
	}
	// The untouched evidence still verifies (the cases really mutated copies).
	if _, err := tpmquote.Verify(ev, rd, opts); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEKCertificate(t *testing.T) {
	tp := openSwtpm(t, Options{})
	ev := quote(t, tp, testReportData(t, "ek"))
	if len(ev.CertChain) != 1 {
		t.Fatalf("cert chain has %d certificates, want the EK certificate", len(ev.CertChain))
	}
	cert, err := x509.ParseCertificate(ev.CertChain[0])
	if err != nil {
		t.Fatalf("EK certificate does not parse: %v", err)
	}
	certKey, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		t.Fatalf("EK certificate key is %T, want RSA (NV 0x01c00002)", cert.PublicKey)
	}
	// The certificate is for this TPM's EK: recreate the RSA EK from the
	// standard template and compare moduli.
	unlock, err := tp.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.RSAEKTemplate),
	}.Execute(tp.tp)
	if err == nil {
		tp.flush(rsp.ObjectHandle)
	}
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		t.Fatal(err)
	}
	n, err := pub.Unique.RSA()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(certKey.N.Bytes(), n.Buffer) {
		t.Fatal("EK certificate is not for this TPM's EK")
	}
	if !bytes.Equal(tp.EKCertificate(), ev.CertChain[0]) {
		t.Fatal("EKCertificate differs from the evidence")
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, Options{Device: filepath.Join(t.TempDir(), "tpmrm0")})
	if !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("missing device: %v", err)
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := Open(ctx, Options{Address: addr}); !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("closed port: %v", err)
	}
	for _, o := range []Options{
		{Device: "/dev/tpmrm0", Address: "127.0.0.1:1"},
		{Address: "127.0.0.1:1", PCRs: []int{24}},
		{Address: "127.0.0.1:1", PCRs: []int{-1}},
		{Address: "127.0.0.1:1", PCRs: []int{3, 3}},
	} {
		if _, err := Open(ctx, o); !errors.Is(err, errOptions) {
			t.Errorf("Open(%+v) = %v, want ErrOptions", o, err)
		}
	}
}

func TestQuoteErrors(t *testing.T) {
	tp := openSwtpm(t, Options{})
	if _, err := tp.Quote(context.Background(), evidence.ReportData{}); !errors.Is(err, evidence.ErrZeroReportData) {
		t.Fatalf("zero report data: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tp.Quote(ctx, testReportData(t, "c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	tp.Close()
	if _, err := tp.Quote(context.Background(), testReportData(t, "c")); !errors.Is(err, errClosed) {
		t.Fatalf("closed: %v", err)
	}
}

func TestTrimDER(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte{0x30, 0x02, 0xaa, 0xbb, 0, 0, 0}, []byte{0x30, 0x02, 0xaa, 0xbb}},
		{[]byte{0x30, 0x81, 0x01, 0xaa, 0xff}, []byte{0x30, 0x81, 0x01, 0xaa}},
		{[]byte{0x30, 0x05, 0xaa}, []byte{0x30, 0x05, 0xaa}},
		{[]byte{0x31, 0x00}, []byte{0x31, 0x00}},
		{[]byte{0x30, 0x80}, []byte{0x30, 0x80}},
		{nil, nil},
	}
	for _, c := range cases {
		if got := trimDER(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("trimDER(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

func BenchmarkQuote(b *testing.B) {
	tp := openSwtpm(b, Options{})
	rd := testReportData(b, "bench")
	ctx := context.Background()
	for b.Loop() {
		if _, err := tp.Quote(ctx, rd); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	tp := openSwtpm(b, Options{})
	rd := testReportData(b, "bench")
	ev := quote(b, tp, rd)
	opts := pinned(tp)
	for b.Loop() {
		if _, err := tpmquote.Verify(ev, rd, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckquoteInterop verifies a quote with tpm2_checkquote (tpm2-tools),
// an independent implementation, from files written in its formats: the AK
// as a PKIX PEM public key, the TPMS_ATTEST message, the TPMT_SIGNATURE, the
// PCR values in tpm2_quote's "-o" layout (tpm2ToolsPCRFile) and the
// qualifying data as hex. (The values-only layout with -l is not used:
// tpm2-tools 5.4 mishandles it for 8 or more PCRs.)
func TestCheckquoteInterop(t *testing.T) {
	checkquote := requireTool(t, "tpm2_checkquote")
	tp := openSwtpm(t, Options{PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7, 16}})
	rd := testReportData(t, "interop")
	ev := quote(t, tp, rd)
	v, err := tpmquote.Verify(ev, rd, pinned(tp))
	if err != nil {
		t.Fatal(err)
	}
	key, err := v.AKPublic.CryptoPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// tpm2_checkquote runs in dir and reads these files by name.
	dir := t.TempDir()
	testfile.Write(t, dir, "ak.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	testfile.Write(t, dir, "quote.msg", ev.Blob)
	testfile.Write(t, dir, "quote.sig", ev.Signature)
	testfile.Write(t, dir, "quote.pcrs", tpm2ToolsPCRFile(v.PCRs))
	run := func(qualifying []byte) error {
		cmd := exec.Command(checkquote, "-u", "ak.pem", "-m", "quote.msg", "-s", "quote.sig",
			"-f", "quote.pcrs", "-g", "sha256",
			"-q", hex.EncodeToString(qualifying))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	qd := rd.QualifyingData()
	if err := run(qd[:]); err != nil {
		t.Fatalf("tpm2_checkquote rejected our quote: %v", err)
	}
	// It really checks: other qualifying data and other PCR values fail.
	other := testReportData(t, "other").QualifyingData()
	if err := run(other[:]); err == nil {
		t.Fatal("tpm2_checkquote accepted other qualifying data")
	}
	for i := range v.PCRs {
		other := slices.Clone(v.PCRs)
		other[i].Value[0] ^= 1
		testfile.Write(t, dir, "quote.pcrs", tpm2ToolsPCRFile(other))
		if err := run(qd[:]); err == nil {
			t.Fatalf("tpm2_checkquote accepted another value of pcr %d", other[i].Index)
		}
	}
}

// tpm2ToolsPCRFile encodes SHA-256 PCR values as tpm2-tools writes them with
// tpm2_quote -o (C structs, little-endian, x86-64 layout):
// TPML_PCR_SELECTION (u32 count, 16 × {u16 hash, u8 sizeofSelect,
// u8 pcrSelect[4], pad}), u32 number of TPML_DIGESTs, then each TPML_DIGEST
// (u32 count, 8 × {u16 size, u8 buffer[64]}) holding up to 8 values.
func tpm2ToolsPCRFile(vals tpmquote.PCRValues) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 1)
	sel := make([]byte, 16*8)
	binary.LittleEndian.PutUint16(sel[0:], uint16(tpm2.TPMAlgSHA256))
	sel[2] = 3
	for _, p := range vals {
		sel[3+p.Index/8] |= 1 << (p.Index % 8)
	}
	b = append(b, sel...)
	chunks := slices.Collect(slices.Chunk(vals, 8))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(chunks)))
	for _, c := range chunks {
		digests := make([]byte, 8*66)
		for i, p := range c {
			binary.LittleEndian.PutUint16(digests[i*66:], 32)
			copy(digests[i*66+2:], p.Value[:])
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(c)))
		b = append(b, digests...)
	}
	return b
}
