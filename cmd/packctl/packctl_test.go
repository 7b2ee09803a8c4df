package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"packctl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the txtar scripts in testdata/script. $SHARED points at
// the shared conformance folder beside the checkout, $PLATFORMS at the
// copies of its real platform samples in verify/platform/testdata/trustee.
func TestScripts(t *testing.T) {
	shared, err := filepath.Abs(filepath.Join("..", "..", "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	platforms, err := filepath.Abs(filepath.Join("..", "..", "verify", "platform", "testdata", "trustee"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shared); err != nil {
		citest.SkipOrFail(t, "shared folder not present")
	}
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(e *testscript.Env) error {
			e.Setenv("SHARED", shared)
			e.Setenv("PLATFORMS", platforms)
			return nil
		},
	})
}
