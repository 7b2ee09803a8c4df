package server

import (
	"os"
	"testing"
)

// TestMain lets this test binary serve as the rebuild worker: the Server
// starts /proc/self/exe with rebuild.WorkerArg, as the attester does.
func TestMain(m *testing.M) {
	if code, ok := RunWorker(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
