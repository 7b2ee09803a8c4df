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
