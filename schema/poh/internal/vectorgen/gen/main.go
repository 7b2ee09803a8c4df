// Command gen writes the proof-bundle test vectors (package vectorgen) into
// a directory: one JSON file per vector and INDEX.tsv. It removes vector
// files that are no longer generated. Run through `go generate ./schema/poh`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/clawea/attester/schema/poh/internal/vectorgen"
)

func main() {
	out := flag.String("out", "testdata/bundles", "output directory")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	vs, err := vectorgen.Build()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for _, v := range vs {
		if strings.ContainsAny(v.Name, `/\`) {
			return fmt.Errorf("bad vector name %q", v.Name)
		}
		if err := os.WriteFile(filepath.Join(dir, v.Name), append(v.Data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "INDEX.tsv"), vectorgen.Index(vs), 0o644)
}
