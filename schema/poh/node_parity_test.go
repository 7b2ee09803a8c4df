package poh_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/citest"
)

// TestNodeAgreesOnBundleVectors runs an independent Node.js implementation
// of the rate-limit and tool receipt rules (testdata/node_bundle_rules.js,
// using JavaScript's own JSON, Date.parse and sort) over every vector and
// expects clawverify's outcome: the INDEX code, or the clawverify column
// where we knowingly differ. Vectors that fail JSON Schema validation are
// skipped (the script does not validate schemas).
func TestNodeAgreesOnBundleVectors(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		citest.SkipOrFail(t, "node not installed")
	}
	want := map[string]string{}
	var files []string
	for _, r := range readIndex(t) {
		if r.code == "SCHEMA_VALIDATION_FAILED" {
			continue
		}
		p := filepath.Join(bundlesDir, r.file)
		files = append(files, p)
		want[p] = r.code
		if r.clawverify != "-" {
			want[p] = r.clawverify
		}
	}
	out, err := exec.Command(node, append([]string{filepath.Join("testdata", "node_bundle_rules.js")}, files...)...).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(files) {
		t.Fatalf("node printed %d lines for %d files", len(lines), len(files))
	}
	for _, l := range lines {
		file, code, _ := strings.Cut(l, " ")
		if code != want[file] {
			t.Errorf("%s: node says %s, want %s", file, code, want[file])
		}
	}
}
