package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	ran := false
	if code := buildinfo.VersionOr("verifier", []string{"--version"}, &stdout, func() int { ran = true; return 9 }); code != 0 || ran || stdout.String() != buildinfo.Line("verifier")+"\n" {
		t.Errorf("--version: code %d, ran %v, stdout %q", code, ran, stdout.String())
	}
	// Mixed with other arguments: a usage error from the verifier's own
	// parsing, and nothing is served.
	for _, args := range [][]string{{"--version", "--ear-key", "k.pem", "--policy", "p.json"}, {"--ear-key", "k.pem", "--policy", "p.json", "--version"}} {
		var stdout, stderr bytes.Buffer
		code := buildinfo.VersionOr("verifier", args, &stdout, func() int { return run(context.Background(), args, &stderr) })
		if code != exitUsage || stdout.Len() != 0 || !strings.Contains(stderr.String(), "--version") {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want a usage error", args, code, stdout.String(), stderr.String())
		}
	}
}

// A garbage collector target must be positive (GOGC=off is for the
// environment, with GOMEMLIMIT).
func TestGCPercentFlag(t *testing.T) {
	for _, v := range []string{"0", "-1", "off"} {
		var stderr bytes.Buffer
		if code := run(context.Background(), []string{"--ear-key", "k.pem", "--policy", "p.json", "--gc-percent", v}, &stderr); code != exitUsage || stderr.Len() == 0 {
			t.Errorf("--gc-percent %s: code %d, stderr %q; want a usage error", v, code, stderr.String())
		}
	}
}
