package tdxquote_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/google/go-tdx-guest/abi"
	pb "github.com/google/go-tdx-guest/proto/tdx"
)

func fakeQuote(t testing.TB) []byte {
	t.Helper()
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := qe.GetRawQuote([64]byte{0: 0xaa, 63: 0x55})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// fakeParsed is fakeQuote's quote and its parse.
func fakeParsed(t testing.TB) (*tdxquote.Quote, []byte) {
	t.Helper()
	raw := fakeQuote(t)
	q, err := tdxquote.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return q, raw
}

// checkAgainstLibrary asserts that go-tdx-guest's parser reads the same
// fields from b as Parse, and re-encodes b identically.
func checkAgainstLibrary(t testing.TB, b []byte, q *tdxquote.Quote) {
	t.Helper()
	if q.Header.Version != tdxquote.Version {
		return // go-tdx-guest reads version 4 only
	}
	anyq, err := abi.QuoteToProto(b)
	if err != nil {
		t.Fatalf("abi.QuoteToProto rejects what Parse accepted: %v", err)
	}
	pq, ok := anyq.(*pb.QuoteV4)
	if !ok {
		t.Fatalf("abi.QuoteToProto returned %T", anyq)
	}
	back, err := abi.QuoteToAbiBytes(pq)
	if err != nil || !bytes.Equal(back, b) {
		t.Fatalf("abi round trip differs: %v", err)
	}
	body := pq.GetTdQuoteBody()
	qr := pq.GetSignedData().GetCertificationData().GetQeReportCertificationData()
	for _, c := range []struct {
		name      string
		got, want []byte
	}{
		{"mrtd", q.Body.MRTD[:], body.GetMrTd()},
		{"report data", q.Body.ReportData[:], body.GetReportData()},
		{"tee tcb svn", q.Body.TeeTcbSvn[:], body.GetTeeTcbSvn()},
		{"td attributes", q.Body.TDAttributes[:], body.GetTdAttributes()},
		{"rtmr3", q.Body.RTMR[3][:], body.GetRtmrs()[3]},
		{"signature", q.Signature[:], pq.GetSignedData().GetSignature()},
		{"attestation key", q.AttestationKey[:], pq.GetSignedData().GetEcdsaAttestationKey()},
		{"qe report data", q.QEReport.ReportData[:], qr.GetQeReport().GetReportData()},
		{"qe auth data", q.QEAuthData, qr.GetQeAuthData().GetData()},
		{"pck chain", q.PCKChain, qr.GetPckCertificateChainData().GetPckCertChain()},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: Parse and go-tdx-guest disagree", c.name)
		}
	}
}

func TestParseFakeRoundTrip(t *testing.T) {
	q, raw := fakeParsed(t)
	back, err := q.Marshal()
	if err != nil || !bytes.Equal(back, raw) {
		t.Fatalf("Marshal(Parse(b)) != b: %v", err)
	}
	if q.Body.ReportData != ([64]byte{0: 0xaa, 63: 0x55}) {
		t.Error("report data not where expected")
	}
	if !bytes.HasPrefix(q.Header.UserData[:], []byte("TEST ONLY FAKE QE")) {
		t.Error("fake quote lacks the in-band marker")
	}
	checkAgainstLibrary(t, raw, q)
	der, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil || len(der) != 3 {
		t.Fatalf("ParsePCKChain: %d certs, %v", len(der), err)
	}
	if !bytes.Equal(tdxquote.EncodePCKChain(der), q.PCKChain) {
		t.Error("pck chain does not round-trip")
	}
}

// The real quotes shipped in go-tdx-guest's module carry bytes after the
// quote; Length finds the quote's end and Parse accepts exactly that.
func TestParseRealSamples(t *testing.T) {
	for _, name := range []string{tdxtest.SampleSPR, tdxtest.SampleCOS} {
		t.Run(name, func(t *testing.T) {
			raw := tdxtest.Read(t, name)
			n, err := tdxquote.Length(raw)
			if err != nil {
				t.Fatal(err)
			}
			if n == len(raw) {
				t.Fatal("sample expected to carry trailing bytes")
			}
			if _, err := tdxquote.Parse(raw); !errors.Is(err, tdxquote.ErrMalformed) {
				t.Fatalf("Parse with trailing bytes: %v, want ErrMalformed", err)
			}
			q, err := tdxquote.Parse(raw[:n])
			if err != nil {
				t.Fatal(err)
			}
			back, err := q.Marshal()
			if err != nil || !bytes.Equal(back, raw[:n]) {
				t.Fatalf("round trip: %v", err)
			}
			checkAgainstLibrary(t, raw[:n], q)
			der, err := tdxquote.ParsePCKChain(q.PCKChain)
			if err != nil || len(der) != 3 {
				t.Fatalf("ParsePCKChain: %v", err)
			}
		})
	}
}

// mutate returns a copy of b with f applied.
func mutate(b []byte, f func([]byte) []byte) []byte {
	return f(append([]byte(nil), b...))
}

func TestParseRejects(t *testing.T) {
	q, raw := fakeParsed(t)
	authLenOff := tdxquote.MinSize - 8
	chainTypeOff := authLenOff + 2 + len(q.QEAuthData)
	put16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint16(b[off:], v); return b }
	}
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	}
	signedLen := uint32(len(raw) - tdxquote.SignedSize - 4)
	certLenOff := tdxquote.SignedSize + 4 + 128 + 2
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, tdxquote.ErrMalformed},
		{"header only", raw[:tdxquote.HeaderSize], tdxquote.ErrMalformed},
		{"one short", raw[:len(raw)-1], tdxquote.ErrMalformed},
		{"trailing byte", append(append([]byte(nil), raw...), 0), tdxquote.ErrMalformed},
		{"too large", make([]byte, tdxquote.MaxSize+1), tdxquote.ErrTooLarge},
		{"version 3", mutate(raw, put16(0, 3)), tdxquote.ErrUnsupported},
		{"version 6", mutate(raw, put16(0, 6)), tdxquote.ErrUnsupported},
		{"key type 3", mutate(raw, put16(2, 3)), tdxquote.ErrUnsupported},
		{"sgx tee type", mutate(raw, put32(4, 0)), tdxquote.ErrUnsupported},
		{"signed length +1", mutate(raw, put32(tdxquote.SignedSize, signedLen+1)), tdxquote.ErrMalformed},
		{"signed length -1", mutate(raw, put32(tdxquote.SignedSize, signedLen-1)), tdxquote.ErrMalformed},
		{"signed length max", mutate(raw, put32(tdxquote.SignedSize, 0xffffffff)), tdxquote.ErrMalformed},
		{"cert type 5", mutate(raw, put16(certLenOff-2, 5)), tdxquote.ErrUnsupported},
		{"cert length +1", mutate(raw, put32(certLenOff, uint32(len(raw)-certLenOff-4+1))), tdxquote.ErrMalformed},
		{"auth length huge", mutate(raw, put16(authLenOff, 0xffff)), tdxquote.ErrMalformed},
		{"auth length +1", mutate(raw, put16(authLenOff, uint16(len(q.QEAuthData)+1))), tdxquote.ErrUnsupported},
		{"chain type 1", mutate(raw, put16(chainTypeOff, 1)), tdxquote.ErrUnsupported},
		{"chain length -1", mutate(raw, put32(chainTypeOff+2, uint32(len(q.PCKChain)-1))), tdxquote.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := tdxquote.Parse(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("Parse: %v, want %v", err, c.want)
			}
			if got != nil {
				t.Fatal("Parse returned a quote with an error")
			}
		})
	}
}

func TestLength(t *testing.T) {
	raw := fakeQuote(t)
	n, err := tdxquote.Length(append(append([]byte(nil), raw...), "junk"...))
	if err != nil || n != len(raw) {
		t.Fatalf("Length = %d, %v; want %d", n, err, len(raw))
	}
	if _, err := tdxquote.Length(raw[:len(raw)-1]); !errors.Is(err, tdxquote.ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := tdxquote.Length(raw[:10]); !errors.Is(err, tdxquote.ErrMalformed) {
		t.Fatalf("short: %v", err)
	}
	if _, err := tdxquote.Length(make([]byte, tdxquote.MaxSize+1)); !errors.Is(err, tdxquote.ErrTooLarge) {
		t.Fatalf("large: %v", err)
	}
}

func TestParsePCKChainRejects(t *testing.T) {
	q, _ := fakeParsed(t)
	der, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tdxquote.ParsePCKChain(append(append([]byte(nil), q.PCKChain...), 0)); err != nil {
		t.Errorf("one trailing NUL must be accepted: %v", err)
	}
	two := tdxquote.EncodePCKChain(der[:2])
	four := tdxquote.EncodePCKChain(append(der, der[0]))
	notCert := bytes.Replace(q.PCKChain, []byte("BEGIN CERTIFICATE"), []byte("BEGIN PRIVATE KEY"), 1)
	notCert = bytes.Replace(notCert, []byte("END CERTIFICATE"), []byte("END PRIVATE KEY"), 1)
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, tdxquote.ErrMalformed},
		{"two certs", two, tdxquote.ErrMalformed},
		{"four certs", four, tdxquote.ErrMalformed},
		{"leading junk", append([]byte("x"), q.PCKChain...), tdxquote.ErrMalformed},
		{"trailing junk", append(append([]byte(nil), q.PCKChain...), "x"...), tdxquote.ErrMalformed},
		{"two NULs", append(append([]byte(nil), q.PCKChain...), 0, 0), tdxquote.ErrMalformed},
		{"crlf", bytes.ReplaceAll(q.PCKChain, []byte("\n"), []byte("\r\n")), tdxquote.ErrMalformed},
		{"not a certificate", notCert, tdxquote.ErrMalformed},
		{"bad der", tdxquote.EncodePCKChain([][]byte{der[0][:100], der[1], der[2]}), tdxquote.ErrMalformed},
		{"too large", make([]byte, tdxquote.MaxPCKChainSize+1), tdxquote.ErrTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := tdxquote.ParsePCKChain(c.in)
			if !errors.Is(err, c.want) || got != nil {
				t.Fatalf("ParsePCKChain: %v, want %v", err, c.want)
			}
		})
	}
}

func TestDebug(t *testing.T) {
	var b tdxquote.Body
	if b.Debug() {
		t.Error("zero attributes report debug")
	}
	b.TDAttributes[0] = tdxquote.TDAttributesDebug
	if !b.Debug() {
		t.Error("debug bit not reported")
	}
}

// v5Quote re-encodes the fake quote as version 5 with the given body type;
// a TD 1.5 body gets non-zero TD 1.5 fields. Its signatures are not valid.
func v5Quote(t testing.TB, bodyType uint16) (*tdxquote.Quote, []byte) {
	t.Helper()
	q, _ := fakeParsed(t)
	q.Header.Version = 5
	q.BodyType = bodyType
	if bodyType == 3 {
		q.Body.TeeTcbSvn2[0] = 7
		q.Body.MRServiceTD[47] = 0x5a
	}
	raw, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return q, raw
}

func TestParseV5RoundTrip(t *testing.T) {
	for _, c := range []struct {
		bodyType  uint16
		wantSize  int
		signedLen int
	}{{2, 0x248, 0x30 + 6 + 0x248}, {3, 0x288, 0x30 + 6 + 0x288}} {
		want, raw := v5Quote(t, c.bodyType)
		q, err := tdxquote.Parse(raw)
		if err != nil {
			t.Fatalf("body type %d: %v", c.bodyType, err)
		}
		if q.BodyType != c.bodyType || q.Body != want.Body {
			t.Errorf("body type %d: fields differ after a round trip", c.bodyType)
		}
		if got := int(binary.LittleEndian.Uint32(raw[0x32:])); got != c.wantSize {
			t.Errorf("body type %d: body size %d, want %d", c.bodyType, got, c.wantSize)
		}
		if len(q.SignedBytes()) != c.signedLen {
			t.Errorf("body type %d: %d signed bytes, want %d", c.bodyType, len(q.SignedBytes()), c.signedLen)
		}
		back, err := q.Marshal()
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("body type %d: Marshal(Parse(b)) != b: %v", c.bodyType, err)
		}
		if n, err := tdxquote.Length(append(bytes.Clone(raw), "junk"...)); err != nil || n != len(raw) {
			t.Fatalf("body type %d: Length = %d, %v", c.bodyType, n, err)
		}
	}
}

func TestParseV5Rejects(t *testing.T) {
	_, raw := v5Quote(t, 3)
	put16 := func(off int, v uint16) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint16(b[off:], v); return b }
	}
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	}
	for _, c := range []struct {
		name, msg string
		in        []byte
		want      error
	}{
		{"sgx body", "version 5 body type 1 (sgx enclave report)", mutate(raw, put16(0x30, 1)), tdxquote.ErrUnsupported},
		{"body type 0", "version 5 body type 0", mutate(raw, put16(0x30, 0)), tdxquote.ErrUnsupported},
		{"body type 4", "version 5 body type 4", mutate(raw, put16(0x30, 4)), tdxquote.ErrUnsupported},
		{"td 1.5 body declared td 1.0", "version 5 body type 2 declares 648 bytes, want 584", mutate(raw, put16(0x30, 2)), tdxquote.ErrMalformed},
		{"body size +1", "version 5 body type 3 declares 649 bytes, want 648", mutate(raw, put32(0x32, 0x289)), tdxquote.ErrMalformed},
		{"one short", "", raw[:len(raw)-1], tdxquote.ErrMalformed},
		{"header and descriptor only", "", raw[:0x36], tdxquote.ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := tdxquote.Parse(c.in)
			if !errors.Is(err, c.want) || got != nil {
				t.Fatalf("Parse: %v, want %v", err, c.want)
			}
			if c.msg != "" && !strings.HasSuffix(err.Error(), ": "+c.msg) {
				t.Errorf("error %q does not name %q", err, c.msg)
			}
		})
	}
}

// ParseEvidence reads what Format evidence carries: version 4 only.
func TestParseEvidence(t *testing.T) {
	raw := fakeQuote(t)
	if q, err := tdxquote.ParseEvidence(raw); err != nil || q.Header.Version != tdxquote.Version {
		t.Fatalf("version 4: %v", err)
	}
	for _, bodyType := range []uint16{2, 3} {
		_, v5 := v5Quote(t, bodyType)
		if q, err := tdxquote.ParseEvidence(v5); !errors.Is(err, tdxquote.ErrUnsupported) || q != nil {
			t.Errorf("version 5 body type %d: %v", bodyType, err)
		}
	}
	if _, err := tdxquote.ParseEvidence(raw[:len(raw)-1]); !errors.Is(err, tdxquote.ErrMalformed) {
		t.Errorf("truncated: %v", err)
	}
}

func TestMarshalRefusesInconsistentQuotes(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*tdxquote.Quote)
		want error
	}{
		{"version 4 with a body type", func(q *tdxquote.Quote) { q.BodyType = 3 }, tdxquote.ErrUnsupported},
		{"version 5 without a body type", func(q *tdxquote.Quote) { q.Header.Version = 5 }, tdxquote.ErrUnsupported},
		{"version 5 sgx body", func(q *tdxquote.Quote) { q.Header.Version, q.BodyType = 5, 1 }, tdxquote.ErrUnsupported},
		{"td 1.5 field in a td 1.0 body", func(q *tdxquote.Quote) { q.Body.MRServiceTD[0] = 1 }, tdxquote.ErrMalformed},
	} {
		q, _ := fakeParsed(t)
		c.edit(q)
		if b, err := q.Marshal(); !errors.Is(err, c.want) || b != nil {
			t.Errorf("%s: Marshal: %v, want %v", c.name, err, c.want)
		}
	}
}
