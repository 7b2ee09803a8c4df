package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestPoHVerifyBundleVectors runs every proof-bundle vector of
// schema/poh/testdata/bundles through `packctl poh verify-bundle` in-process
// and checks the output contract: the first stdout line is `VERIFIED ...` (exit
// 0) or `REJECTED <REASON_CODE>` (exit 2).
func TestPoHVerifyBundleVectors(t *testing.T) {
	dir := filepath.Join("..", "..", "schema", "poh", "testdata", "bundles")
	n := 0
	for _, cols := range testfile.TSV(t, filepath.Join(dir, "INDEX.tsv"), 5) {
		n++
		name, valid, code := cols[0], cols[1] == "true", cols[2]
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run([]string{"poh", "verify-bundle", filepath.Join(dir, name)}, strings.NewReader(""), &stdout, &stderr)
			first, _, _ := strings.Cut(stdout.String(), "\n")
			if valid {
				if got != exitOK || !strings.HasPrefix(first, "VERIFIED bundle=") {
					t.Fatalf("exit %d, first line %q, stderr %q; want exit 0 and VALID", got, first, stderr.String())
				}
				return
			}
			if got != exitRejected || first != "REJECTED "+code {
				t.Fatalf("exit %d, first line %q, stderr %q; want exit 2 and REJECTED %s", got, first, stderr.String(), code)
			}
		})
	}
	if n < 40 {
		t.Fatalf("ran %d vectors", n)
	}
}
