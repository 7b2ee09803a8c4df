// Package testfile writes the files a test lays out in a folder. Only
// tests import it (internal/layers enforces that).
package testfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes b to dir/rel (rel slash-separated), making the folders on
// the way; a failure fails tb.
func Write(tb testing.TB, dir, rel string, b []byte) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}
