// Package gcflag is the --gc-percent flag of the clawea services: the
// garbage collector target a command sets at start, unless the operator
// chose one with GOGC and did not give the flag.
package gcflag

import (
	"flag"
	"os"
	"runtime/debug"
)

const name = "gc-percent"

// Define registers --gc-percent on fs with default def and returns its
// value. The caller checks the value after fs.Parse (a target must be
// positive: GOGC=off is for the environment only).
func Define(fs *flag.FlagSet, def int) *int {
	return fs.Int(name, def, "garbage collector target percentage; without this flag, GOGC from the environment wins when set")
}

// Apply sets the garbage collector target to pct, the parsed value of the
// flag Define registered on fs, when the flag was given or GOGC is not set
// in the environment (when it is, the runtime has applied it already).
func Apply(fs *flag.FlagSet, pct int) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if given || os.Getenv("GOGC") == "" {
		debug.SetGCPercent(pct)
	}
}
