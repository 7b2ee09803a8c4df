package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/clawea/attester/hack/demo/example"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
)

// harnessSource is what the pack author builds from: a harness directory
// in the openclaw-sig layout, builder params, and the trusted template
// hashes (the pack author's reference values, pinned by policy).
type harnessSource struct {
	Name    string
	Dir     string
	Params  []byte
	Trusted map[string]string
	cleanup func()
}

// Close removes what loadHarness wrote.
func (s *harnessSource) Close() {
	if s.cleanup != nil {
		s.cleanup()
	}
}

// loadHarness returns the example harness (default), or the OpenClaw SIG
// conformance harness and one of its vectors when o.Shared is set.
func loadHarness(o options) (*harnessSource, error) {
	if o.Shared == "" {
		// This project's own harness. Its trusted template hashes are the
		// reference values signed by the example key; Materialize returns
		// them only after the signature verifies.
		// The harness files are public text; they are written to their own
		// temporary folder for the directory loader and removed once the
		// pack is built (Close).
		tmp, err := os.MkdirTemp("", "clawea-demo-harness-")
		if err != nil {
			return nil, err
		}
		dir, params, trusted, err := example.Materialize(example.FS(), tmp)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("example harness: %w", err)
		}
		return &harnessSource{
			Name: "the example harness (hack/demo/example, signed by " + example.SignerDID + ")",
			Dir:  dir, Params: params, Trusted: trusted, cleanup: func() { os.RemoveAll(tmp) },
		}, nil
	}
	dir := filepath.Join(o.Shared, "conformance", "openclaw-sig")
	params, err := os.ReadFile(filepath.Join(dir, "vectors", o.Vector+".params.json"))
	if err != nil {
		return nil, fmt.Errorf("-shared %s: the OpenClaw SIG conformance folder is missing: %w", o.Shared, err)
	}
	// The conformance sigs are bare content hashes: the demo takes them as
	// the reference values, as a pack author who reviewed them would.
	h, err := openclawsig.LoadHarnessDir(dir)
	if err != nil {
		return nil, err
	}
	trusted := map[string]string{}
	for _, name := range h.TemplateNames() {
		if s, ok := h.Sig(name); ok {
			trusted[name] = s.Hash
		}
	}
	return &harnessSource{Name: "OpenClaw SIG vector " + o.Vector + " (" + dir + ")", Dir: dir, Params: params, Trusted: trusted}, nil
}
