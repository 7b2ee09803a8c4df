package rebuild

import (
	"errors"
	"io"
)

// maxPack bounds the ciphertext the worker reads (the attester's own
// configuration bound is lower).
const maxPack = 256 << 20

// errNotWorker: the process was not started by a Runner.
var errNotWorker = errors.New("rebuild: " + workerArg + " is internal to the attester and is started only by it")

// RunWorker runs the worker (workerMain) when args, the program's arguments
// without its name, ask for the worker mode, and returns its exit code; ok
// is false, and nothing runs, otherwise. The attester's main and test
// binaries call it first thing.
func RunWorker(args []string, stdin io.Reader, stderr io.Writer) (code int, ok bool) {
	if len(args) != 1 || args[0] != workerArg {
		return 0, false
	}
	return workerMain(stdin, stderr), true
}
