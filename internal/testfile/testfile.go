// Package testfile writes the files a test lays out and reads the tables
// it is driven by. Only tests import it (internal/layers enforces that).
package testfile

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
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

// TSV reads the tab-separated file at path and returns each line's
// columns, the header line included; a failure fails tb.
func TSV(tb testing.TB, path string) [][]string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rows = append(rows, strings.Split(sc.Text(), "\t"))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return rows
}

// ModuleRoot returns the folder of this module's go.mod, the nearest above
// the test's working directory; a go.mod of another module there fails tb.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if !strings.HasPrefix(string(b), "module github.com/clawea/attester\n") {
				tb.Fatalf("%s/go.mod is not the module's", dir)
			}
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}
