package main

import (
	"testing"

	"github.com/clawea/attester/internal/bintest"
)

// attesterBin is the attester binary the demo tests start, built from
// cmd/attester as make demo builds bin/attester.
var attesterBin string

func TestMain(m *testing.M) {
	bintest.Main(m, "attester", "github.com/clawea/attester/cmd/attester", &attesterBin)
}
