package tdx

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"os"
	"testing"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/validate"
	"github.com/google/go-tdx-guest/verify"
)

func reportData(t testing.TB, nonce byte) evidence.ReportData {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData([32]byte{0: nonce}, pub, []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func newSimulated(t testing.TB, opts fakeqe.Options) *Simulated {
	t.Helper()
	s, err := NewSimulated(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verifyEvidence runs go-tdx-guest's verifier (offline, pinned simulation
// root) and a policy (REPORT_DATA, MRTD, debug off) over ev.Blob.
func verifyEvidence(t testing.TB, ev *evidence.Evidence, rd evidence.ReportData, mrtd []byte) error {
	t.Helper()
	pool, err := tdxsimroots.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	q, err := abi.QuoteToProto(ev.Blob)
	if err != nil {
		t.Fatalf("go-tdx-guest cannot parse the blob: %v", err)
	}
	if err := verify.TdxQuote(q, &verify.Options{TrustedRoots: pool, Now: tdxtest.TimeSet(tdxtest.At)}); err != nil {
		return err
	}
	want := rd.Bytes()
	return validate.TdxQuote(q, &validate.Options{TdQuoteBodyOptions: validate.TdQuoteBodyOptions{
		ReportData:   want[:],
		MrTd:         mrtd,
		TdAttributes: make([]byte, abi.TdAttributesSize),
	}})
}

func TestSimulatedEvidence(t *testing.T) {
	ctx := context.Background()
	s := newSimulated(t, fakeqe.Options{})
	rd := reportData(t, 1)
	ev, err := s.Quote(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Platform != evidence.PlatformTDX || ev.Format != format || !ev.Simulated {
		t.Fatalf("evidence header %q %q simulated=%v", ev.Platform, ev.Format, ev.Simulated)
	}
	if s.Platform() != evidence.PlatformTDX {
		t.Error("Platform")
	}
	if len(ev.CertChain) != 3 || !tdxsimroots.IsRoot(ev.CertChain[2]) {
		t.Fatal("cert chain does not end in the pinned simulation root")
	}
	leaf, err := x509.ParseCertificate(ev.CertChain[0])
	if err != nil || leaf.Subject.CommonName != "Intel SGX PCK Certificate" {
		t.Fatalf("leaf: %v", err)
	}
	mrtd, err := s.LaunchMeasurement(ctx)
	if err != nil || len(mrtd) != 48 {
		t.Fatalf("LaunchMeasurement: %d bytes, %v", len(mrtd), err)
	}
	if err := verifyEvidence(t, ev, rd, mrtd); err != nil {
		t.Fatalf("simulated evidence rejected: %v", err)
	}
	if err := verifyEvidence(t, ev, reportData(t, 2), mrtd); err == nil {
		t.Fatal("evidence accepted for other report data")
	}
}

func TestSimulatedDebugTD(t *testing.T) {
	td := fakeqe.DefaultTD()
	td.TDAttributes[0] = 1 // TUD.DEBUG
	s := newSimulated(t, fakeqe.Options{TD: &td})
	ev, err := s.Quote(context.Background(), reportData(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyEvidence(t, ev, reportData(t, 1), td.MRTD[:]); err == nil {
		t.Fatal("debug TD passed a debug-off policy")
	}
}

func TestQuoteRefusesZeroReportData(t *testing.T) {
	s := newSimulated(t, fakeqe.Options{})
	if _, err := s.Quote(context.Background(), evidence.ReportData{}); !errors.Is(err, evidence.ErrZeroReportData) {
		t.Fatalf("got %v, want ErrZeroReportData", err)
	}
}

func TestQuoteHonoursContext(t *testing.T) {
	s := newSimulated(t, fakeqe.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Quote(ctx, reportData(t, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := s.LaunchMeasurement(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// quoterFunc adapts a function to rawQuoter.
type quoterFunc func([64]byte) ([]byte, error)

func (f quoterFunc) GetRawQuote(rd [64]byte) ([]byte, error) { return f(rd) }

// testDevice is a Device on a substitute source: the real Device code path
// (locking, evidence, probing) fed by the fake QE.
func testDevice(src rawQuoter) *Device {
	return &Device{src: src, transport: "test"}
}

func TestDevicePathWithFakeQE(t *testing.T) {
	ctx := context.Background()
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Devices may return bytes after the quote; the backend drops them.
	padded := quoterFunc(func(rd [64]byte) ([]byte, error) {
		b, err := qe.GetRawQuote(rd)
		return append(b, "device buffer tail"...), err
	})
	d := testDevice(padded)
	rd := reportData(t, 3)
	ev, err := d.Quote(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Simulated {
		t.Error("device evidence marked simulated")
	}
	if _, err := tdxquote.Parse(ev.Blob); err != nil {
		t.Fatalf("blob is not exactly one quote: %v", err)
	}
	td := qe.TD()
	if err := verifyEvidence(t, ev, rd, td.MRTD[:]); err != nil {
		t.Fatal(err)
	}
	m, err := d.LaunchMeasurement(ctx)
	if err != nil || !bytes.Equal(m, td.MRTD[:]) {
		t.Fatalf("LaunchMeasurement: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Quote(ctx, rd); !errors.Is(err, errQuoteFailed) || !errors.Is(err, errClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestDeviceRejectsBadQuotes(t *testing.T) {
	ctx := context.Background()
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("ioctl failed")
	// edited is the fake QE's quote with edit applied to its parsed form.
	edited := func(edit func(*tdxquote.Quote)) quoterFunc {
		return func(rd [64]byte) ([]byte, error) {
			raw, err := qe.GetRawQuote(rd)
			if err != nil {
				return nil, err
			}
			q, err := tdxquote.Parse(raw)
			if err != nil {
				return nil, err
			}
			edit(q)
			return q.Marshal()
		}
	}
	cases := []struct {
		name string
		src  quoterFunc
		want []error
	}{
		{"device error", func([64]byte) ([]byte, error) { return nil, boom }, []error{errQuoteFailed, boom}},
		{"garbage", func([64]byte) ([]byte, error) { return []byte("not a quote"), nil }, []error{errBadQuote, tdxquote.ErrMalformed}},
		{"oversized", func([64]byte) ([]byte, error) { return make([]byte, 64<<10+1), nil }, []error{errBadQuote, tdxquote.ErrTooLarge}}, // over the 64 KiB limit
		{"other report data", func(rd [64]byte) ([]byte, error) {
			rd[63] ^= 1
			return qe.GetRawQuote(rd)
		}, []error{errReportDataMismatch}},
		{"truncated", func(rd [64]byte) ([]byte, error) {
			b, err := qe.GetRawQuote(rd)
			return b[:len(b)-1], err
		}, []error{errBadQuote, tdxquote.ErrMalformed}},
		{"broken pck chain", edited(func(q *tdxquote.Quote) {
			q.PCKChain = q.PCKChain[:len(q.PCKChain)/2]
		}), []error{errBadQuote, tdxquote.ErrMalformed}},
		{"dcap version 5", edited(func(q *tdxquote.Quote) {
			q.Header.Version, q.BodyType = 5, 2 // TD 1.0 body
		}), []error{errBadQuote, tdxquote.ErrUnsupported}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := testDevice(c.src).Quote(ctx, reportData(t, 4))
			if ev != nil {
				t.Fatal("evidence returned with an error")
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Fatalf("got %v, want %v", err, w)
				}
			}
		})
	}
}

// On a machine without a TDX guest, Open fails with ErrNotAvailable.
func TestOpenNotAvailable(t *testing.T) {
	for _, p := range []string{"/dev/tdx_guest", "/sys/kernel/config/tsm/report"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: this machine may be a TDX guest", p)
		}
	}
	d, err := Open()
	if !errors.Is(err, enclave.ErrNotAvailable) || d != nil {
		t.Fatalf("Open = %v, %v; want ErrNotAvailable", d, err)
	}
}

func BenchmarkSimulatedQuoteAndVerify(b *testing.B) {
	s := newSimulated(b, fakeqe.Options{})
	pool, err := tdxsimroots.CertPool()
	if err != nil {
		b.Fatal(err)
	}
	rd := reportData(b, 9)
	ctx := context.Background()
	for b.Loop() {
		ev, err := s.Quote(ctx, rd)
		if err != nil {
			b.Fatal(err)
		}
		if err := verify.RawTdxQuote(ev.Blob, &verify.Options{TrustedRoots: pool, Now: tdxtest.TimeSet(tdxtest.At)}); err != nil {
			b.Fatal(err)
		}
	}
}
