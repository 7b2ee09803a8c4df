package gcflag

import (
	"flag"
	"io"
	"runtime/debug"
	"testing"
)

// TestApply: the flag wins over GOGC, GOGC wins over the default, and
// without either the default applies.
func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name string
		gogc string
		args []string
		want int
	}{
		{"flag over GOGC", "50", []string{"--gc-percent", "300"}, 300},
		{"GOGC over the default", "50", nil, 77},
		{"default without GOGC", "", nil, 400},
	} {
		t.Setenv("GOGC", tc.gogc)
		debug.SetGCPercent(77) // stands for what the runtime took from GOGC
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		pct := Define(fs, 400)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		Apply(fs, *pct)
		if got := debug.SetGCPercent(100); got != tc.want {
			t.Errorf("%s: garbage collector target %d, want %d", tc.name, got, tc.want)
		}
	}
}
