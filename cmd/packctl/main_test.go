package main

import (
	"bytes"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args, wantPos []string
		json          bool
		out           string
	}{
		{[]string{"FILE", "--json"}, []string{"FILE"}, true, ""},
		{[]string{"--json", "FILE"}, []string{"FILE"}, true, ""},
		{[]string{"FILE", "-o", "x", "--json"}, []string{"FILE"}, true, "x"},
		{[]string{"-o", "--json", "FILE"}, []string{"FILE"}, false, "--json"}, // a flag value is never a flag
		{[]string{"FILE", "--", "--json"}, []string{"FILE", "--json"}, false, ""},
		{[]string{"--", "-o"}, []string{"-o"}, false, ""},
		{[]string{"-", "--json=true"}, []string{"-"}, true, ""},
		{[]string{"a", "b", "-o=y"}, []string{"a", "b"}, false, "y"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		asJSON := fs.Bool("json", false, "")
		out := fs.String("o", "", "")
		if err := fs.Parse(interspersed(fs, tc.args)); err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !slices.Equal(fs.Args(), tc.wantPos) || *asJSON != tc.json || *out != tc.out {
			t.Errorf("%q: args %q json %t o %q, want %q %t %q", tc.args, fs.Args(), *asJSON, *out, tc.wantPos, tc.json, tc.out)
		}
	}
	// An unknown flag after a positional is still an error.
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(interspersed(fs, []string{"FILE", "--nope"})); err == nil {
		t.Error("unknown flag accepted")
	}
}

// TestCommandGroups: every command group prints its usage to stderr and
// exits 1 without a subcommand, prints it to stdout and exits 0 for -h,
// --help and help, and refuses another word by name (exit 1).
func TestCommandGroups(t *testing.T) {
	for _, group := range []string{"poh", "tpm", "policy", "collateral", "platform"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{group}, nil, &stdout, &stderr); code != exitUsage || stdout.Len() != 0 ||
			!strings.HasPrefix(stderr.String(), "usage: packctl "+group+" ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", group, code, stdout.String(), stderr.String())
		}
		for _, help := range []string{"-h", "--help", "help"} {
			stdout.Reset()
			stderr.Reset()
			if code := run([]string{group, help}, nil, &stdout, &stderr); code != exitOK || stderr.Len() != 0 ||
				!strings.HasPrefix(stdout.String(), "usage: packctl "+group+" ") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", group, help, code, stdout.String(), stderr.String())
			}
		}
		stdout.Reset()
		stderr.Reset()
		if code := run([]string{group, "bogus"}, nil, &stdout, &stderr); code != exitUsage || stdout.Len() != 0 ||
			!strings.Contains(stderr.String(), group+`: unknown subcommand "bogus"`) {
			t.Errorf("%s bogus: exit %d, stdout %q, stderr %q", group, code, stdout.String(), stderr.String())
		}
	}
}
