package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/clawea/attester/internal/bintest"
)

// attesterBin is the attester binary the demo tests start, built from
// cmd/attester as make demo builds bin/attester.
var attesterBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-attester-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if attesterBin, err = bintest.BuildPackage(dir, "attester", "github.com/clawea/attester/cmd/attester"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
