//go:build !linux

package sealed

import "fmt"

// HardenProcess is not supported on this operating system.
func HardenProcess() error { return fmt.Errorf("%w: %w", errHardenFailed, ErrNotSupported) }

// processHardening is not supported on this operating system.
func processHardening() (hardening, error) { return hardening{}, ErrNotSupported }
