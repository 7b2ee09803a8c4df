//go:build !linux

package sealed

import "fmt"

// HardenProcess is not supported on this operating system.
func HardenProcess() error { return fmt.Errorf("%w: %w", errHardenFailed, ErrNotSupported) }

// ProcessHardening is not supported on this operating system.
func ProcessHardening() (Hardening, error) { return Hardening{}, ErrNotSupported }
