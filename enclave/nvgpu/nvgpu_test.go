package nvgpu

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/nvspdm"
)

func testRD(t *testing.T) evidence.ReportData {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(sha256.Sum256([]byte("nvgpu")), pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func TestSimulatedQuote(t *testing.T) {
	g, err := NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	rd := testRD(t)
	ev, err := g.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Platform != evidence.PlatformNVIDIAGPU || !ev.Simulated || ev.Format != nvspdm.Format || len(ev.CertChain) != 2 {
		t.Fatalf("evidence %+v", ev)
	}
	rep, err := nvspdm.Parse(ev.Blob)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Nonce != rd.GPUNonce() {
		t.Fatal("report nonce is not rd.GPUNonce()")
	}
	if _, err := g.Quote(context.Background(), evidence.ReportData{}); !errors.Is(err, evidence.ErrZeroReportData) {
		t.Fatalf("zero report data: %v", err)
	}
}

// TestCCOffRefused: a GPU whose confidential-computing mode is off yields
// no GPU and no evidence.
func TestCCOffRefused(t *testing.T) {
	d, err := newFakeDevice(false, "")
	if err != nil {
		t.Fatal(err)
	}
	if g, err := newGPU(d, false); !errors.Is(err, errCCOff) || g != nil {
		t.Fatalf("New = %v, %v", g, err)
	}
	// Switched off after opening: Quote refuses too.
	d.cc = true
	g, err := newGPU(d, false)
	if err != nil {
		t.Fatal(err)
	}
	d.cc = false
	if ev, err := g.Quote(context.Background(), testRD(t)); !errors.Is(err, errCCOff) || ev != nil {
		t.Fatalf("Quote = %v, %v", ev, err)
	}
}

type badDevice struct {
	report, chain []byte
}

func (b badDevice) ccEnabled() (bool, error)                { return true, nil }
func (b badDevice) attest([32]byte) ([]byte, []byte, error) { return b.report, b.chain, nil }

// TestQuoteChecksDevice: a report for another nonce, or a chain that is
// not PEM certificates, is refused.
func TestQuoteChecksDevice(t *testing.T) {
	f, err := newFakeDevice(true, "")
	if err != nil {
		t.Fatal(err)
	}
	rd := testRD(t)
	other, chain, err := f.attest([32]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	report, _, err := f.attest(rd.GPUNonce())
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]badDevice{
		"other nonce":  {other, chain},
		"garbage":      {[]byte("x"), chain},
		"no chain":     {report, nil},
		"key in chain": {report, []byte("-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n")},
	} {
		g, err := newGPU(d, false)
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := g.Quote(context.Background(), rd); err == nil || ev != nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	if _, err := pemChain(append(chain, "trailing"...)); err == nil {
		t.Fatal("trailing bytes after the chain accepted")
	}
	if got, err := pemChain(append(chain, 0, 0, '\n')); err != nil || len(got) != 2 {
		t.Fatalf("NUL padding: %v", err)
	}
}

// FuzzPEMChain: whatever pemChain accepts is a non-empty list of
// certificate blocks that re-encode to a chain it reads the same.
func FuzzPEMChain(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		chain, err := pemChain(b)
		if err != nil {
			return
		}
		if len(chain) == 0 {
			t.Fatal("empty chain accepted")
		}
		var again []byte
		for _, der := range chain {
			again = append(again, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
		if got, err := pemChain(again); err != nil || len(got) != len(chain) {
			t.Fatalf("re-encoded chain: %v", err)
		}
	})
}
