package bintest

import (
	"fmt"
	"os"
	"testing"
)

// Main is a TestMain that builds the main package pkg (as buildPackage
// takes it) into a temporary folder as name, sets *bin to the binary's
// path, runs the tests and exits; the folder is removed before it exits.
func Main(m *testing.M, name, pkg string, bin *string) {
	dir, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = buildPackage(dir, name, pkg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
