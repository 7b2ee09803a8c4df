//go:build !linux

package rebuild

import (
	"context"
	"fmt"
	"io"

	"github.com/clawea/attester/sealed"
)

// Rebuild is not supported on this operating system.
func (r *Runner) Rebuild(context.Context, Request) (*Result, error) {
	return nil, fmt.Errorf("%w: %w", ErrWorker, sealed.ErrNotSupported)
}

// workerMain is not supported on this operating system: it refuses to run.
func workerMain(_ io.Reader, stderr io.Writer) int {
	fmt.Fprintln(stderr, "attester:", errNotWorker)
	return 2
}
