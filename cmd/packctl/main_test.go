package main

import (
	"flag"
	"io"
	"slices"
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
