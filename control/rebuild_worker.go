package control

import (
	"errors"
	"io"
	"os"
)

// maxWorkerPack bounds the ciphertext the worker reads (the attester's own
// configuration bound is lower).
const maxWorkerPack = 256 << 20

// errNotWorker: the process was not started by a rebuilder.
var errNotWorker = errors.New("rebuild: " + workerArg + " is internal to the attester and is started only by it")

// RunWorker runs the pack-opening worker (docs/spec/sealed-memory.md
// section 2.7) when args, the program's arguments without its name, ask for
// it, and reports its exit code. A Service opens packs by starting its own
// binary (/proc/self/exe) in that mode, so every program that embeds a
// Service, and every test binary that creates runs, must call RunWorker
// first thing in main (or TestMain) and exit with the code when ok is true.
func RunWorker(args []string) (code int, ok bool) {
	return runRebuildWorker(args, os.Stdin, os.Stderr)
}

// runRebuildWorker runs the worker (workerMain) when args ask for the
// worker mode, and returns its exit code; ok is false, and nothing runs,
// otherwise.
func runRebuildWorker(args []string, stdin io.Reader, stderr io.Writer) (code int, ok bool) {
	if len(args) != 1 || args[0] != workerArg {
		return 0, false
	}
	return workerMain(stdin, stderr), true
}
