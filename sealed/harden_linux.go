//go:build linux

package sealed

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// HardenProcess makes the process non-dumpable (prctl PR_SET_DUMPABLE 0) and
// sets both RLIMIT_CORE limits to 0. It is idempotent. It tries both steps
// and reports every failure; processHardening reports the resulting state.
// Lowering the hard core limit cannot be undone by an unprivileged process.
func HardenProcess() error {
	var errs []error
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("%w: prctl(PR_SET_DUMPABLE, 0): %w", errHardenFailed, err))
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		errs = append(errs, fmt.Errorf("%w: setrlimit(RLIMIT_CORE, 0): %w", errHardenFailed, err))
	}
	return errors.Join(errs...)
}

// processHardening reads the current dumpable flag and core limits.
func processHardening() (hardening, error) {
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		return hardening{}, fmt.Errorf("sealed: prctl(PR_GET_DUMPABLE): %w", err)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		return hardening{}, fmt.Errorf("sealed: getrlimit(RLIMIT_CORE): %w", err)
	}
	return hardening{Dumpable: d != 0, CoreSoft: rl.Cur, CoreHard: rl.Max}, nil
}
