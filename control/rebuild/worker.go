package rebuild

import "errors"

// maxPack bounds the ciphertext the worker reads (the attester's own
// configuration bound is lower).
const maxPack = 256 << 20

// errNotWorker: the process was not started by a Runner.
var errNotWorker = errors.New("rebuild: " + workerArg + " is internal to the attester and is started only by it")

// IsWorker reports whether args (without the program name) ask for the
// worker mode. The attester's main and test binaries call Main then.
func IsWorker(args []string) bool { return len(args) == 1 && args[0] == workerArg }
