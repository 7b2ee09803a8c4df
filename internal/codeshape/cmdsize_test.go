package codeshape

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// maxCmdAttesterLines bounds the non-test lines of cmd/attester (issue 18:
// main, configuration loading and the HTTP surfaces stay there; the
// service's logic and transports live in control/).
const maxCmdAttesterLines = 2000

// TestCmdAttesterSize counts the lines of cmd/attester's non-test Go files
// (blank and comment lines included, as wc -l does) and fails above
// maxCmdAttesterLines.
func TestCmdAttesterSize(t *testing.T) {
	root := filepath.Join(testfile.ModuleRoot(t), "cmd", "attester")
	lines, files := 0, 0
	err := testfile.WalkGo(root, nil, func(path, _ string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines += bytes.Count(b, []byte("\n"))
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("read %d files of cmd/attester; it has more", files)
	}
	if lines > maxCmdAttesterLines {
		t.Errorf("cmd/attester has %d non-test lines, at most %d: move service logic into control/", lines, maxCmdAttesterLines)
	}
	t.Logf("cmd/attester: %d non-test lines in %d files", lines, files)
}
