// Package testfile writes the files a test lays out and reads the tables
// it is driven by. Only tests import it (internal/layers enforces that).
package testfile

import (
	"bufio"
	"encoding/hex"
	"io/fs"
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

// Read returns the content of the file at path; a failure to read it
// fails tb.
func Read(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Hex decodes the hex string s of a test vector; a malformed s fails tb.
func Hex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TSV reads the tab-separated file at path and returns the columns of
// each line after the header line. A line without exactly columns columns,
// or a failure to read, fails tb.
func TSV(tb testing.TB, path string, columns int) [][]string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != columns {
			tb.Fatalf("%s line %d: %d columns, want %d", path, line, len(cols), columns)
		}
		if line > 1 {
			rows = append(rows, cols)
		}
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

// WalkGo calls fn with the path and the slash-separated path relative to
// root of each non-test Go file of the module at root, in lexical order. It
// leaves out the folders the go tool ignores (testdata, vendor, names
// starting with "." or "_"), other modules (a folder with a go.mod) and
// each folder whose relative path skip reports (skip may be nil). An error
// from fn or the walk ends it and is returned.
func WalkGo(root string, skip func(rel string) bool, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if name := d.Name(); name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if skip != nil && skip(rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		return fn(path, rel)
	})
}
