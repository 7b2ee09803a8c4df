package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

const module = "github.com/clawea/attester"

// Layers, lowest first (docs/architecture.md). A package may import its own
// layer and the layers below it, and nothing else of this module. verify/
// is a layer of its own beside the producers: it imports only schema/,
// wire/ and verify/, so a verifier never links producer or device code.
var rank = map[string]int{
	"schema":      0,
	"wire":        1,
	"enclave":     2,
	"sealed":      2,
	"promptpack":  2,
	"attestation": 2,
	"gate":        2,
	// control/ is the attester's control plane (runs, capabilities, the
	// gate-plus-audit wrapper, identity): a producer, so the demo, the
	// deployment tests and other binaries use it without importing cmd/.
	"control": 2,
	"verify":  2,
	"cmd":     3,
	"hack":    3,
	// deploy/ holds deployment files and their tests, which parse the
	// example configurations with control.
	"deploy": 3,
	// internal/ holds test support (fixtures, the CI rule, this test):
	// only _test.go files import it, and it may import any layer below
	// cmd/.
	"internal": 3,
}

// verifyMayImport lists the folders verify/ may import.
var verifyMayImport = []string{"schema", "wire", "verify"}

// exceptions are single edges allowed against the rules, each with the
// reason it still exists. An exception that no longer occurs fails the test
// so that it is deleted.
var exceptions = map[[2]string]string{}

type pkg struct {
	ImportPath   string
	Name         string
	Dir          string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	// go test puts the running toolchain's bin directory first on PATH.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Name,Dir,Imports,TestImports,XTestImports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	return pkgs
}

// folder returns the top-level folder of a module package path, or "" for
// a path outside the module.
func folder(path string) string {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	f, _, _ := strings.Cut(rest, "/")
	return f
}

// generator reports whether p is a test-data generator: a command (package
// main) under a package's internal/ folder, run only by `go generate`
// (schema/poh/internal/vectorgen/gen). Its imports are held to the rules
// of tests, not of its folder: it may make real evidence with producers
// and use internal/ test support, but never import cmd/ or hack/. Nothing
// can import a command, so no library links what it imports.
func generator(p pkg) bool {
	rest, ok := strings.CutPrefix(p.ImportPath, module+"/")
	return ok && p.Name == "main" && strings.Contains(rest, "/internal/") && rank[folder(p.ImportPath)] < rank["cmd"]
}

// edgeError reports why from may not import to, or "".
func edgeError(from, to string) string {
	ff, tf := folder(from), folder(to)
	rf, ok := rank[ff]
	if !ok {
		return "folder " + ff + "/ has no layer: add it to rank and docs/architecture.md"
	}
	rt, ok := rank[tf]
	if !ok {
		return "folder " + tf + "/ has no layer: add it to rank and docs/architecture.md"
	}
	switch {
	case tf == "internal" && ff != "internal":
		return "only tests may import internal/ test support"
	case ff == "internal" && (tf == "cmd" || tf == "hack"):
		return "internal/ test support does not import cmd/ or hack/"
	case tf == "cmd" && ff != "cmd":
		return "nothing outside cmd/ imports cmd/"
	case ff == "verify" && !slices.Contains(verifyMayImport, tf):
		return "verify/ imports only schema/, wire/ and verify/"
	case ff != "verify" && rf == rank["verify"] && tf == "verify":
		return "producers do not import verify/"
	case rt > rf:
		return "imports a higher layer"
	}
	return ""
}

// testEdgeError reports why a test of package from (or a test-data
// generator in it) may not import to, or "". Tests may use producers to
// make real evidence (simulators are real implementations), but nothing
// outside cmd/ imports cmd/, tests included (the demo and the deployment
// tests start the binaries as processes), and no lower layer imports
// hack/.
func testEdgeError(from, to string) string {
	ff, tf := folder(from), folder(to)
	switch {
	case tf == "cmd" && ff != "cmd":
		return "nothing outside cmd/ imports cmd/, tests included"
	case tf == "hack" && rank[ff] < rank["hack"]:
		return "tests of a lower layer do not import hack/"
	}
	return ""
}

func TestNoUpwardImport(t *testing.T) {
	used := map[[2]string]bool{}
	for _, p := range listPackages(t) {
		if generator(p) {
			for _, imp := range p.Imports {
				if why := testEdgeError(p.ImportPath, imp); why != "" {
					t.Errorf("generator %s imports %s: %s", p.ImportPath, imp, why)
				}
			}
			continue
		}
		for _, imp := range p.Imports {
			if folder(imp) == "" {
				continue
			}
			why := edgeError(p.ImportPath, imp)
			if why == "" {
				continue
			}
			if _, ok := exceptions[[2]string{p.ImportPath, imp}]; ok {
				used[[2]string{p.ImportPath, imp}] = true
				continue
			}
			t.Errorf("%s imports %s: %s", p.ImportPath, imp, why)
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if why := testEdgeError(p.ImportPath, imp); why != "" {
				t.Errorf("tests of %s import %s: %s", p.ImportPath, imp, why)
			}
		}
	}
	for e, why := range exceptions {
		if !used[e] {
			t.Errorf("exception %s -> %s (%s) no longer occurs: delete it", e[0], e[1], why)
		}
	}
}

// nestedModuleEdges returns the imports of this module's packages made by
// the Go files of nested modules under root (deploy/helm/chartcheck keeps
// helm's dependencies out of ours), which go list of this module does not
// see. Each file is named by the package path its folder would have here,
// and by whether it is a test.
func nestedModuleEdges(root string) (edges []nestedEdge, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil || rel == "." || !inNestedModule(root, rel) {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		from := module + "/" + filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if folder(imp) != "" {
				edges = append(edges, nestedEdge{from: from, to: imp, file: path, test: strings.HasSuffix(path, "_test.go")})
			}
		}
		return nil
	})
	return edges, err
}

// nestedEdge is one import of this module from a nested module's file.
type nestedEdge struct {
	from, to, file string
	test           bool
}

// why reports why the import breaks the rules, or "".
func (e nestedEdge) why() string {
	if e.test {
		return testEdgeError(e.from, e.to)
	}
	return edgeError(e.from, e.to)
}

// inNestedModule reports whether the folder rel (below root) belongs to a
// module of its own: it or a folder above it, below root, has a go.mod.
func inNestedModule(root, rel string) bool {
	for d := rel; d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

// The nested modules follow the same rules: deploy/helm/chartcheck parses
// the chart's configurations with control/ and imports nothing under cmd/.
func TestNestedModules(t *testing.T) {
	edges, err := nestedModuleEdges(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(edges, func(e nestedEdge) bool { return e.from == module+"/deploy/helm/chartcheck" }) {
		t.Fatal("no import of this module found in deploy/helm/chartcheck: the walk missed the nested module")
	}
	for _, e := range edges {
		if why := e.why(); why != "" {
			t.Errorf("%s imports %s: %s", e.file, e.to, why)
		}
	}
}

// The nested-module check sees a nested module's tests, and refuses one
// that imports cmd/.
func TestNestedModulesRefuse(t *testing.T) {
	root := t.TempDir()
	for name, src := range map[string]string{
		"go.mod":                     "module " + module + "\n",
		"control/c.go":               "package control\n\nimport _ \"" + module + "/cmd/attester\"\n",
		"deploy/x/go.mod":            "module " + module + "/deploy/x\n",
		"deploy/x/x_test.go":         "package x\n\nimport (\n\t_ \"" + module + "/control\"\n\t_ \"" + module + "/cmd/attester/server\"\n)\n",
		"deploy/x/sub/testdata/t.go": "package t\n\nimport _ \"" + module + "/cmd/attester\"\n",
	} {
		testfile.Write(t, root, name, []byte(src))
	}
	edges, err := nestedModuleEdges(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) != 2 {
		t.Fatalf("edges %+v, want the two imports of deploy/x/x_test.go", edges)
	}
	for _, e := range edges {
		refused := e.why() != ""
		if e.from != module+"/deploy/x" || !e.test || refused != (e.to == module+"/cmd/attester/server") {
			t.Errorf("edge %+v refused=%v", e, refused)
		}
	}
}

func TestNoFolderCycle(t *testing.T) {
	// Edges between top-level folders from non-test imports.
	edges := map[string]map[string]string{} // from -> to -> example
	for _, p := range listPackages(t) {
		if generator(p) {
			continue // like a test: nothing imports it
		}
		ff := folder(p.ImportPath)
		for _, imp := range p.Imports {
			tf := folder(imp)
			if tf == "" || tf == ff {
				continue
			}
			if edges[ff] == nil {
				edges[ff] = map[string]string{}
			}
			edges[ff][tf] = p.ImportPath + " -> " + imp
		}
	}
	if cyc := findCycle(edges); cyc != nil {
		var b strings.Builder
		for i := 0; i+1 < len(cyc); i++ {
			b.WriteString("\n  " + edges[cyc[i]][cyc[i+1]])
		}
		t.Errorf("folders form a cycle %s:%s", strings.Join(cyc, " -> "), b.String())
	}
}

// findCycle returns a cycle (first node repeated at the end) or nil.
func findCycle(edges map[string]map[string]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		color[n] = grey
		stack = append(stack, n)
		tos := make([]string, 0, len(edges[n]))
		for to := range edges[n] {
			tos = append(tos, to)
		}
		slices.Sort(tos)
		for _, to := range tos {
			switch color[to] {
			case grey:
				i := slices.Index(stack, to)
				return append(slices.Clone(stack[i:]), to)
			case white:
				if c := visit(to); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return nil
	}
	froms := make([]string, 0, len(edges))
	for f := range edges {
		froms = append(froms, f)
	}
	slices.Sort(froms)
	for _, f := range froms {
		if color[f] == white {
			if c := visit(f); c != nil {
				return c
			}
		}
	}
	return nil
}

// The checks themselves must be able to fail.
func TestRulesRefuse(t *testing.T) {
	// expect checks each edge (module-relative paths) with check and wants
	// it allowed (ok) or refused.
	expect := func(check func(from, to string) string, ok bool, edges [][2]string) {
		t.Helper()
		for _, e := range edges {
			switch why := check(module+"/"+e[0], module+"/"+e[1]); {
			case ok && why != "":
				t.Errorf("%s -> %s refused: %s", e[0], e[1], why)
			case !ok && why == "":
				t.Errorf("%s -> %s accepted", e[0], e[1])
			}
		}
	}
	expect(edgeError, false, [][2]string{
		{"schema/poh", "wire/evidence"},
		{"wire/evidence", "enclave"},
		{"verify", "enclave"},
		{"verify/platform", "attestation"},
		{"gate", "verify"},
		{"enclave/tpm", "cmd/attester"},
		{"attestation", "internal/testfixture"},
		{"newfolder/x", "schema/b64u"},
		{"internal/testfixture", "cmd/attester/server"},
		{"control", "verify"},
		{"control/rebuild", "cmd/attester/server"},
		{"control", "internal/packtest"},
		{"hack/demo", "cmd/attester/server"},
		{"deploy", "cmd/internal/buildinfo"},
		{"deploy/helm/chartcheck", "cmd/attester"},
	})
	expect(testEdgeError, false, [][2]string{
		{"hack/demo", "cmd/attester/server"},
		{"deploy", "cmd/attester"},
		{"internal/bintest", "cmd/internal/buildinfo"},
		{"control", "cmd/attester/server"},
		{"gate", "hack/demo/example"},
		{"schema/poh/internal/vectorgen/gen", "cmd/packctl"},
	})
	expect(testEdgeError, true, [][2]string{
		{"cmd/attester", "cmd/attester/server"},
		{"cmd/packctl", "cmd/internal/buildinfo"},
		{"hack/demo", "internal/bintest"},
		{"hack/demo", "hack/demo/example"},
		{"deploy", "control"},
		{"gate", "control"},
	})
	expect(edgeError, true, [][2]string{
		{"wire/evidence", "schema/b64u"},
		{"verify", "wire/evidencedoc"},
		{"enclave/tpm", "sealed"},
		{"cmd/packctl", "verify"},
		{"internal/testfixture", "attestation"},
		{"cmd/attester", "cmd/attester/server"},
		{"hack/demo", "control"},
		{"deploy/helm/chartcheck", "control"},
	})
	for _, c := range []struct {
		p    pkg
		want bool
	}{
		{pkg{ImportPath: module + "/enclave/tpm/internal/fixturegen", Name: "main"}, true},
		{pkg{ImportPath: module + "/enclave/tpm/internal/fixturegen", Name: "fixturegen"}, false},
		{pkg{ImportPath: module + "/cmd/attester/internal/x", Name: "main"}, false},
		{pkg{ImportPath: module + "/internal/x", Name: "main"}, false},
		{pkg{ImportPath: module + "/enclave/tpm", Name: "main"}, false},
	} {
		if got := generator(c.p); got != c.want {
			t.Errorf("generator(%s, package %s) = %v", c.p.ImportPath, c.p.Name, got)
		}
	}
	cyc := findCycle(map[string]map[string]string{"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}})
	if len(cyc) != 4 || cyc[0] != cyc[3] {
		t.Errorf("cycle a->b->c->a not found: %v", cyc)
	}
	if c := findCycle(map[string]map[string]string{"a": {"b": ""}, "b": {"c": ""}}); c != nil {
		t.Errorf("acyclic graph reported a cycle %v", c)
	}
}
