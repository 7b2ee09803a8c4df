package poh_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/poh/internal/vectorgen"
)

const bundlesDir = "testdata/bundles"

type indexRow struct {
	file, code, clawverify string
	valid                  bool
}

func readIndex(t *testing.T) []indexRow {
	t.Helper()
	var rows []indexRow
	for _, cols := range testfile.TSV(t, filepath.Join(bundlesDir, "INDEX.tsv"), 5) {
		rows = append(rows, indexRow{file: cols[0], valid: cols[1] == "true", code: cols[2], clawverify: cols[3]})
	}
	return rows
}

// TestBundleVectors runs every vector in testdata/bundles and expects exactly
// the listed verdict and reason code.
func TestBundleVectors(t *testing.T) {
	rows := readIndex(t)
	if len(rows) < 40 {
		t.Fatalf("only %d vectors", len(rows))
	}
	codes := map[string]bool{}
	for _, r := range rows {
		codes[r.code] = true
		t.Run(r.file, func(t *testing.T) {
			raw := testfile.Read(t, filepath.Join(bundlesDir, r.file))
			b, err := poh.VerifyProofBundle(raw, poh.BundleOptions{})
			if r.valid {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !errors.Is(err, poh.Code(r.code)) {
				t.Fatalf("want %s, got %v", r.code, err)
			}
			pe, ok := errors.AsType[*poh.Error](err)
			if !ok || pe.Code != poh.Code(r.code) {
				t.Fatalf("error %v is not a *poh.Error with code %s", err, r.code)
			}
			if b != nil {
				t.Fatal("result returned with an error")
			}
		})
	}
	// Every new reason code has at least one failing vector.
	for _, c := range []poh.Code{poh.RateLimitWindowInvalid, poh.RateLimitExceeded, poh.RateLimitClaimInconsistent,
		poh.CoSignatureInvalid, poh.DisclosureTypeMismatch, poh.DisclosureRootMismatch, poh.ReceiptBindingMismatch,
		poh.ProofBundleAgentMismatch, poh.ExpiredTTL} {
		if !codes[string(c)] {
			t.Errorf("no vector for %s", c)
		}
	}
}

// TestBundleVectorsCurrent: the files are exactly what the generator
// produces, so nobody edits a vector by hand (run `go generate ./schema/poh`).
func TestBundleVectorsCurrent(t *testing.T) {
	vs, err := vectorgen.Build()
	if err != nil {
		t.Fatal(err)
	}
	idx := testfile.Read(t, filepath.Join(bundlesDir, "INDEX.tsv"))
	if !bytes.Equal(idx, vectorgen.Index(vs)) {
		t.Error("INDEX.tsv is stale: run go generate ./schema/poh")
	}
	files, _ := filepath.Glob(filepath.Join(bundlesDir, "*.json"))
	if len(files) != len(vs) {
		t.Errorf("%d vector files, generator makes %d", len(files), len(vs))
	}
	for _, v := range vs {
		got, err := os.ReadFile(filepath.Join(bundlesDir, v.Name))
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		if !bytes.Equal(got, append(v.Data, '\n')) {
			t.Errorf("%s is stale: run go generate ./schema/poh", v.Name)
		}
	}
}

// TestCoSignedBundleResult checks what a valid co-signed bundle returns.
func TestCoSignedBundleResult(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(bundlesDir, "valid_v2_cosigned_envelope.json"))
	b, err := poh.VerifyProofBundle(raw, poh.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.RateLimitClaims) != 1 || len(b.ToolReceipts) != 1 {
		t.Fatalf("claims %d, tool receipts %d", len(b.RateLimitClaims), len(b.ToolReceipts))
	}
	tr := b.ToolReceipts[0]
	want := []poh.CoSigner{
		{SignerDID: vectorgen.SignerDID("co-signer-proxy"), Role: "proxy"},
		{SignerDID: vectorgen.SignerDID("co-signer-auditor"), Role: "auditor"},
	}
	if tr.Form != poh.ToolReceiptEnvelopeV2 || tr.ReceiptID != "tr_001" || tr.SignerDID != vectorgen.SignerDID("tool-dispatcher") ||
		len(tr.CoSigners) != 2 || tr.CoSigners[0] != want[0] || tr.CoSigners[1] != want[1] {
		t.Fatalf("tool receipt %+v", tr)
	}
}

// FuzzBundleVectors mutates the bundle vectors: whatever the bytes, the
// verifier never panics, never returns a result together with an error, and
// reports every failure as a *poh.Error.
func FuzzBundleVectors(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(bundlesDir, "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed vectors: %v", err)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := poh.VerifyProofBundle(data, poh.BundleOptions{})
		if (b == nil) == (err == nil) {
			t.Fatalf("result %v with error %v", b, err)
		}
		if _, ok := errors.AsType[*poh.Error](err); err != nil && !ok {
			t.Fatalf("error %T is not *poh.Error: %v", err, err)
		}
	})
}
