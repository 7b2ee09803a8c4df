package main

import (
	"os"
	"testing"

	"github.com/clawea/attester/control"
)

// TestMain lets this test binary serve as the embedded attester's rebuild
// worker, as main does.
func TestMain(m *testing.M) {
	if code, ok := control.RunWorker(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
