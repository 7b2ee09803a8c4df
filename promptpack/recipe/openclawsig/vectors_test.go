package openclawsig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
)

// conformanceDir is the shared conformance folder, beside the checkout.
var conformanceDir = filepath.Join("..", "..", "..", "..", "shared", "conformance", "openclaw-sig")

// requireConformance skips the test when the shared folder is absent,
// except under CI=true where that is a failure.
func requireConformance(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(conformanceDir, "vectors", "INDEX.tsv")); err != nil {
		citest.SkipOrFail(tb, "conformance data not available: %v", err)
	}
}

// trustedFromSigs builds a trusted list from the harness's own sigs, as a
// pack author pins the hashes of the release they built from.
func trustedFromSigs(tb testing.TB, h *Harness) map[string]string {
	tb.Helper()
	trusted := map[string]string{}
	for _, name := range h.TemplateNames() {
		s, ok := h.Sig(name)
		if !ok {
			tb.Fatalf("template %s has no sig", name)
		}
		trusted[name] = s.Hash
	}
	return trusted
}

func loadCheckedHarness(tb testing.TB) *Harness {
	tb.Helper()
	requireConformance(tb)
	h, err := LoadHarnessDir(conformanceDir)
	if err != nil {
		tb.Fatalf("LoadHarnessDir: %v", err)
	}
	if err := h.checkTemplates(trustedFromSigs(tb, h)); err != nil {
		tb.Fatalf("checkTemplates: %v", err)
	}
	return h
}

// vectorParams reads and parses the params of the vector name.
func vectorParams(tb testing.TB, name string) *Params {
	tb.Helper()
	b := testfile.Read(tb, filepath.Join(conformanceDir, "vectors", name+".params.json"))
	p, err := ParseParams(b)
	if err != nil {
		tb.Fatalf("ParseParams %s: %v", name, err)
	}
	return p
}

type vector struct {
	name   string
	sha256 string
	bytes  int
}

func readIndex(tb testing.TB) []vector {
	tb.Helper()
	var out []vector
	for _, cols := range testfile.TSV(tb, filepath.Join(conformanceDir, "vectors", "INDEX.tsv"), 3) {
		n, err := strconv.Atoi(cols[2])
		if err != nil {
			tb.Fatalf("INDEX.tsv %s: %v", cols[0], err)
		}
		out = append(out, vector{cols[0], cols[1], n})
	}
	return out
}

func TestVectors(t *testing.T) {
	h := loadCheckedHarness(t)
	vectors := readIndex(t)
	// Every params file in the folder must be listed in the index.
	files, err := filepath.Glob(filepath.Join(conformanceDir, "vectors", "*.params.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(vectors) || len(vectors) == 0 {
		t.Fatalf("%d params files, %d index rows", len(files), len(vectors))
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			p := vectorParams(t, v.name)
			want := testfile.Read(t, filepath.Join(conformanceDir, "vectors", v.name+".expected.txt"))
			res, err := renderChecked(h, p)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !bytes.Equal(res.Prompt, want) {
				t.Errorf("prompt differs from expected.txt at byte %d\n got: %q\nwant: %q",
					firstDiff(res.Prompt, want), excerpt(res.Prompt, firstDiff(res.Prompt, want)),
					excerpt(want, firstDiff(res.Prompt, want)))
			}
			sum := sha256.Sum256(res.Prompt)
			if got := hex.EncodeToString(sum[:]); got != v.sha256 {
				t.Errorf("sha256 = %s, INDEX.tsv %s", got, v.sha256)
			}
			if len(res.Prompt) != v.bytes {
				t.Errorf("bytes = %d, INDEX.tsv %d", len(res.Prompt), v.bytes)
			}
			// Determinism: a second render gives the same bytes.
			again, err := renderChecked(h, p)
			if err != nil || !bytes.Equal(again.Prompt, res.Prompt) {
				t.Error("second Render differs")
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func excerpt(b []byte, at int) []byte {
	lo, hi := max(0, at-40), min(len(b), at+40)
	return b[lo:hi]
}

// TestResultFields checks the report data of the full vector.
func TestResultFields(t *testing.T) {
	h := loadCheckedHarness(t)
	p := vectorParams(t, "full")
	res, err := renderChecked(h, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != modeFull {
		t.Errorf("Mode = %q", res.Mode)
	}
	wantTools := []string{"Read", "write", "edit", "exec", "process", "web_fetch", "message", "gateway",
		"alpha_tool", "memory_get", "memory_search", "sessions_spawn", "zeta_tool"}
	if strings.Join(res.ToolNames, ",") != strings.Join(wantTools, ",") {
		t.Errorf("ToolNames = %q, want %q", res.ToolNames, wantTools)
	}
	if len(res.ContextFiles) != 3 || res.ContextFiles[1].Path != "SOUL.md" ||
		string(res.ContextFiles[1].Content) != "Be kind." || res.ContextFiles[1].Chars != 8 ||
		res.ContextFiles[2].Chars != 0 {
		t.Errorf("ContextFiles = %+v", res.ContextFiles)
	}
	if res.PromptChars <= 0 || res.PromptChars > len(res.Prompt) {
		t.Errorf("PromptChars = %d for %d bytes", res.PromptChars, len(res.Prompt))
	}
	if !bytes.Contains(res.Prompt, []byte(res.RuntimeLine)) || !strings.HasPrefix(res.RuntimeLine, h.lit.runtimeLinePrefix) {
		t.Errorf("RuntimeLine %q not in prompt", res.RuntimeLine)
	}

	// Minimal and none modes resolve as documented.
	for mode, want := range map[string]string{"minimal": modeMinimal, "none": modeNone, "Minimal": modeFull, "": modeFull} {
		q := *p
		q.PromptMode = mode
		r, err := renderChecked(h, &q)
		if err != nil || r.Mode != want {
			t.Errorf("promptMode %q: Mode = %v, %v; want %q", mode, r, err, want)
		}
		if want == modeNone && (r.ToolNames != nil || r.ContextFiles != nil) {
			t.Errorf("none mode reports tools or files")
		}
	}
}

func BenchmarkRenderFull(b *testing.B) {
	h := loadCheckedHarness(b)
	p := vectorParams(b, "full")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := renderChecked(h, p); err != nil {
			b.Fatal(err)
		}
	}
}
