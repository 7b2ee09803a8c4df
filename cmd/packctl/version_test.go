package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clawea/attester/cmd/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{arg}, strings.NewReader(""), &stdout, &stderr)
		if code != exitOK || stdout.String() != buildinfo.Line("packctl")+"\n" || stderr.Len() != 0 {
			t.Errorf("%s: code %d, stdout %q, stderr %q", arg, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version", "extra"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage || stdout.Len() != 0 {
		t.Errorf("--version extra: code %d, stdout %q; want usage error", code, stdout.String())
	}
}
