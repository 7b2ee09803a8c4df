package bounded

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// forbidden are the limiting readers that only this package may use: every
// other bounded read goes through Read, ReadFile, ReadFS or ReadBody.
var forbidden = map[string][]string{
	"io":       {"LimitReader", "LimitedReader"},
	"net/http": {"MaxBytesReader"},
}

// exempt are module-relative folders whose non-test code may still use
// the forbidden readers. An exemption that no folder needs any more fails
// the test so that it is deleted.
var exempt = []string{
	// This package.
	"schema/bounded/",
}

// TestNoLimitReaderOutsideBounded parses every non-test Go file of the
// module (go/parser, not grep: renamed and dot imports count) and fails on
// each use of a forbidden reader outside this package.
func TestNoLimitReaderOutsideBounded(t *testing.T) {
	root := testfile.ModuleRoot(t)
	files := 0
	exemptUses := map[string]int{}
	// WalkGo leaves out the folders the go tool ignores and other modules
	// (deploy/helm/chartcheck).
	err := testfile.WalkGo(root, nil, func(path, rel string) error {
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		uses := forbiddenUses(t, rel, src)
		if i := slices.IndexFunc(exempt, func(p string) bool { return strings.HasPrefix(rel, p) }); i >= 0 {
			exemptUses[exempt[i]] += len(uses)
			return nil
		}
		for _, use := range uses {
			t.Errorf("%s: %s: use schema/bounded (Read, ReadFile, ReadFS, ReadBody, Discard)", use.pos, use.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range exempt {
		if exemptUses[p] == 0 {
			t.Errorf("exemption %s is no longer needed: delete it", p)
		}
	}
	if files < 100 {
		t.Fatalf("checked %d files; the module has more", files)
	}
}

type use struct {
	pos  token.Position
	name string
}

// forbiddenUses returns the uses of a forbidden reader in one file.
func forbiddenUses(t *testing.T, name string, src []byte) []use {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	local := map[string]string{} // file-local package name -> import path
	var dot []string             // import paths imported with "."
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || forbidden[path] == nil {
			continue
		}
		switch {
		case imp.Name == nil:
			local[filepath.Base(path)] = path
		case imp.Name.Name == ".":
			dot = append(dot, path)
		case imp.Name.Name != "_":
			local[imp.Name.Name] = path
		}
	}
	if len(local) == 0 && len(dot) == 0 {
		return nil
	}
	var out []use
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok {
				if path, ok := local[x.Name]; ok && slices.Contains(forbidden[path], n.Sel.Name) {
					out = append(out, use{fset.Position(n.Pos()), path + "." + n.Sel.Name})
				}
			}
			// The selected name is not a package-level identifier.
			ast.Inspect(n.X, func(m ast.Node) bool { return inspectDot(fset, m, dot, &out) })
			return false
		default:
			return inspectDot(fset, n, dot, &out)
		}
	})
	return out
}

// inspectDot records an identifier that names a forbidden reader of a
// dot-imported package; it continues the walk.
func inspectDot(fset *token.FileSet, n ast.Node, dot []string, out *[]use) bool {
	id, ok := n.(*ast.Ident)
	if !ok {
		return true
	}
	for _, path := range dot {
		if slices.Contains(forbidden[path], id.Name) {
			*out = append(*out, use{fset.Position(id.Pos()), path + "." + id.Name})
		}
	}
	return true
}

// The guard itself must be able to fail.
func TestForbiddenUsesFound(t *testing.T) {
	for src, want := range map[string]int{
		`package p; import "io"; func f(r io.Reader) io.Reader { return io.LimitReader(r, 1) }`:                              1,
		`package p; import "io"; var _ = &io.LimitedReader{}`:                                                                1,
		`package p; import "io"; func f(r *io.LimitedReader) {}`:                                                             1,
		`package p; import "net/http"; func f(w http.ResponseWriter, r *http.Request) { http.MaxBytesReader(w, r.Body, 1) }`: 1,
		`package p; import stdio "io"; var _ = stdio.LimitReader(nil, 1)`:                                                    1,
		`package p; import web "net/http"; var _ = web.MaxBytesReader`:                                                       1,
		`package p; import . "io"; var _ = LimitReader(nil, 1)`:                                                              1,
		`package p; import . "io"; var _ = &LimitedReader{N: 1}`:                                                             1,
		`package p; import ("io"; "net/http"); var _, _ = io.LimitReader, http.MaxBytesReader`:                               2,
		// Allowed: other names, other packages, a local io.
		`package p; import "io"; var _ = io.ReadAll`:                                                                         0,
		`package p; import "net/http"; var _ = http.MaxBytesError{}`:                                                         0,
		`package p; type T struct{ LimitReader int }; var io T; var _ = io.LimitReader`:                                      0,
		`package p; import "example.com/io"; var _ = io.LimitReader`:                                                         0,
		`package p; import _ "io"`:                                                                                           0,
		`package p; import "io"; type s struct{ r io.Reader }; func (x s) LimitReader() {}; func g(x s) { x.LimitReader() }`: 0,
	} {
		if got := forbiddenUses(t, "x.go", []byte(src)); len(got) != want {
			t.Errorf("%d uses, want %d, in %s: %v", len(got), want, src, got)
		}
	}
}
