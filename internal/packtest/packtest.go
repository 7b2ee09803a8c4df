// Package packtest builds prompt packs from the shared openclaw-sig
// conformance vectors (../shared/conformance/openclaw-sig), the fixture that
// the attester's server, binary and rebuild-worker tests all start from.
// Only tests import it (internal/layers enforces that).
package packtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack"
)

// recipe is the recipe name of the conformance harness.
const recipe = "openclaw-sig"

// Dir returns the openclaw-sig conformance folder. When it is missing the
// test is skipped, or fails under CI (citest.SkipOrFail).
func Dir(tb testing.TB) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "conformance", recipe)
	if _, err := os.Stat(d); err != nil {
		citest.SkipOrFail(tb, "shared conformance data not present: %v", err)
	}
	return d
}

// Params returns the conformance parameters file vectors/<name> (for
// example "min.params.json"), skipping or failing as Dir does when the
// conformance data is missing.
func Params(tb testing.TB, name string) []byte {
	tb.Helper()
	return testfile.Read(tb, filepath.Join(Dir(tb), "vectors", name))
}

// Pack is a built pack with the template hashes an attester must trust for
// it and its rebuilt report.
type Pack struct {
	Pack    *promptpack.Pack
	Rebuilt *promptpack.Rebuilt
	Trusted map[string]string
}

// Build builds a pack from params with the conformance harness, takes the
// pack's own template hashes as trusted and rebuilds it. Any error fails
// the test.
func Build(tb testing.TB, params []byte, opts promptpack.BuildOptions) *Pack {
	tb.Helper()
	pack, err := promptpack.Build(params, Dir(tb), recipe, opts)
	if err != nil {
		tb.Fatal(err)
	}
	trusted, err := pack.SigHashes()
	if err != nil {
		tb.Fatal(err)
	}
	rb, err := pack.Rebuild(trusted)
	if err != nil {
		tb.Fatal(err)
	}
	return &Pack{Pack: pack, Rebuilt: rb, Trusted: trusted}
}

// AdmissionDir is promptpack/admission/testdata: the admission vectors,
// their base pack inputs and the example policies.
func AdmissionDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "promptpack", "admission", "testdata")
}

// admitVector is one vector of AdmissionDir()/admit-vectors.json: the base
// pack changed by Set (params members) and Pack (pack members), checked
// against Policy; Rule is the rule that refuses it ("" when admitted) and
// Input the input it names.
type admitVector struct {
	Name   string         `json:"name"`
	Policy string         `json:"policy"`
	Set    map[string]any `json:"set"`
	Pack   map[string]any `json:"pack"`
	Rule   string         `json:"rule"`
	Input  string         `json:"input"`
}

// AdmitVectors returns the vectors of admit-vectors.json.
func AdmitVectors(tb testing.TB) []admitVector {
	tb.Helper()
	b := testfile.Read(tb, filepath.Join(AdmissionDir(), "admit-vectors.json"))
	var doc struct {
		Vectors []admitVector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		tb.Fatal(err)
	}
	return doc.Vectors
}
