// Command gen re-creates the generated files of the example harness (sigs,
// sig config, signed reference values) from the hand-written ones. Run it
// with `go generate ./hack/demo/example` (it works in the example directory).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/clawea/attester/hack/demo/example"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	src := os.DirFS(".")
	out, err := example.Generate(src)
	if err != nil {
		return err
	}
	// Remove generated files that are no longer produced (a deleted template).
	old, err := example.GeneratedPaths(src)
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, ok := out[p]; !ok {
			if err := os.Remove(filepath.FromSlash(p)); err != nil {
				return err
			}
		}
	}
	for p, b := range out {
		if err := os.MkdirAll(filepath.Dir(filepath.FromSlash(p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.FromSlash(p), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
