package control

import (
	"os"

	"github.com/clawea/attester/control/rebuild"
)

// RunWorker runs the pack-opening worker (docs/spec/sealed-memory.md
// section 2.7) when args, the program's arguments without its name, ask for
// it, and reports its exit code. A Server opens packs by starting its own
// binary (/proc/self/exe) in that mode, so every program that embeds a
// Server, and every test binary that creates runs, must call RunWorker
// first thing in main (or TestMain) and exit with the code when ok is true.
func RunWorker(args []string) (code int, ok bool) {
	return rebuild.RunWorker(args, os.Stdin, os.Stderr)
}
