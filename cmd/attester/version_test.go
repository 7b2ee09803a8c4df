package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "--version=true"} {
		var stdout bytes.Buffer
		ran := false
		code := versionOr([]string{arg}, &stdout, func() int { ran = true; return 9 })
		if code != 0 || ran || stdout.String() != buildinfo.Line("attester")+"\n" {
			t.Errorf("%s: code %d, ran %v, stdout %q", arg, code, ran, stdout.String())
		}
	}
	// With other arguments the server's own parsing decides: a usage error,
	// and nothing is started.
	for _, args := range [][]string{{"--version", "--config", "x.json"}, {"--config", "x.json", "--version"}, {"--version=false"}} {
		var stdout, stderr bytes.Buffer
		code := versionOr(args, &stdout, func() int { return run(args, &stderr) })
		if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "Usage") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 1 and usage", args, code, stdout.String(), stderr.String())
		}
	}
}
