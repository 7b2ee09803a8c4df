package sealed

import (
	"errors"
	"fmt"
)

// errHardenFailed is returned when the process could not be hardened.
var errHardenFailed = errors.New("sealed: cannot harden process")

// hardening is the process state HardenProcess establishes.
type hardening struct {
	// Dumpable is the PR_GET_DUMPABLE flag: false means no core dumps and
	// no ptrace attach or /proc/<pid>/mem access by unprivileged peers.
	Dumpable bool
	// CoreSoft and CoreHard are the RLIMIT_CORE limits in bytes.
	CoreSoft, CoreHard uint64
}

// hardened reports whether the state is what HardenProcess sets.
func (h hardening) hardened() bool { return !h.Dumpable && h.CoreSoft == 0 && h.CoreHard == 0 }

// String describes the state, for logs.
func (h hardening) String() string {
	return fmt.Sprintf("dumpable=%t core_limit=%d/%d", h.Dumpable, h.CoreSoft, h.CoreHard)
}
