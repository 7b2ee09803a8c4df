package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// maxLines is the longest a function may be, counted from the line of its
// func keyword to the line of its closing brace.
const maxLines = 120

// exempt are module-relative folders whose functions may be longer, each
// with the reason. An exemption that no folder needs any more fails the
// test so that it is deleted.
var exempt = map[string]string{
	// Build lists the proof-bundle vectors one after another; the package
	// is the library of the generator schema/poh/internal/vectorgen/gen and
	// only it and schema/poh's tests import it.
	"schema/poh/internal/vectorgen/": "test-data generator",
}

// TestNoLongFunction parses every non-test Go file of the module (outside
// hack/, testdata, vendor, nested modules and test-data generators) and
// fails naming each function longer than maxLines lines.
func TestNoLongFunction(t *testing.T) {
	long, files, err := longFunctions(testfile.ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, l := range long {
		if p := exemptFolder(l); p != "" {
			used[p] = true
			continue
		}
		t.Errorf("%s: split it into named steps (STYLE.md item 24)", l)
	}
	for p, why := range exempt {
		if !used[p] {
			t.Errorf("exemption %s (%s) is no longer needed: delete it", p, why)
		}
	}
	if files < 100 {
		t.Fatalf("checked %d files; the module has more", files)
	}
}

// TestLongFunctionSelf proves that the check fails on a long function and
// skips exactly what it should, on a module made for the test.
func TestLongFunctionSelf(t *testing.T) {
	root := t.TempDir()
	write := func(rel, pkg string, lines ...int) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n", pkg)
		for i, n := range lines {
			b.WriteString(function(fmt.Sprintf("f%d", i), n))
		}
		testfile.Write(t, root, rel, []byte(b.String()))
	}
	write("go.mod", "") // overwritten below
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("a/a.go", "a", maxLines, maxLines+1, 1)
	write("a/b.go", "a", maxLines+40)
	write("a/a_test.go", "a", maxLines+1)
	write("a/testdata/x.go", "x", maxLines+1)
	write("a/vendor/x/x.go", "x", maxLines+1)
	write("a/.hidden/x.go", "x", maxLines+1)
	write("hack/x/x.go", "main", maxLines+1)
	write("a/internal/gen/main.go", "main", maxLines+1)       // a generator
	write("a/internal/lib/lib.go", "lib", maxLines+1)         // not a generator: a library
	write("cmd/c/internal/gen/main.go", "main", maxLines+1)   // not a generator: below cmd/
	write("internal/fixture/gen/main.go", "main", maxLines+1) // not a generator: test support
	write("nested/go.mod", "")
	if err := os.WriteFile(filepath.Join(root, "nested", "go.mod"), []byte("module example.com/n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("nested/x.go", "x", maxLines+1)

	long, files, err := longFunctions(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a/a.go:122: f1 is 121 lines, limit 120",
		"a/b.go:2: f0 is 160 lines, limit 120",
		"a/internal/lib/lib.go:2: f0 is 121 lines, limit 120",
		"cmd/c/internal/gen/main.go:2: f0 is 121 lines, limit 120",
		"internal/fixture/gen/main.go:2: f0 is 121 lines, limit 120",
	}
	if !slices.Equal(long, want) {
		t.Errorf("long functions:\n%s\nwant:\n%s", strings.Join(long, "\n"), strings.Join(want, "\n"))
	}
	if files != 6 {
		t.Errorf("checked %d files, want 6", files)
	}
}

// exemptFolder returns the exempt folder a finding lies in, or "".
func exemptFolder(finding string) string {
	for p := range exempt {
		if strings.HasPrefix(finding, p) {
			return p
		}
	}
	return ""
}

// function returns the source of a function of n >= 1 lines.
func function(name string, n int) string {
	if n == 1 {
		return "func " + name + "() {}\n"
	}
	return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", n-2) + "}\n"
}

// longFunctions walks the module at root and returns "file:line: name is N
// lines, limit L" for each function over maxLines, sorted, and the number
// of files parsed.
func longFunctions(root string) (long []string, files int, err error) {
	err = testfile.WalkGo(root, func(rel string) bool { return rel == "hack" }, func(path, rel string) error {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		if generator(rel, f.Name.Name) {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := end - start + 1; n > maxLines {
				long = append(long, fmt.Sprintf("%s:%d: %s is %d lines, limit %d", rel, start, funcName(fn), n, maxLines))
			}
		}
		return nil
	})
	slices.Sort(long)
	return long, files, err
}

// generator reports whether a file belongs to a test-data generator: a
// command (package main) under the internal/ folder of a package outside
// cmd/ and internal/ (schema/poh/internal/vectorgen/gen), as
// internal/layers defines it.
func generator(rel, pkg string) bool {
	top, _, _ := strings.Cut(rel, "/")
	return pkg == "main" && strings.Contains(rel, "/internal/") && top != "cmd" && top != "internal"
}

// funcName returns a function's name, with its receiver type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
