//go:build !linux

package control

import (
	"context"
	"fmt"
	"io"

	"github.com/clawea/attester/sealed"
)

// run is not supported on this operating system.
func (r *rebuilder) run(context.Context, rebuildRequest) (*rebuildResult, error) {
	return nil, fmt.Errorf("%w: %w", errRebuildWorker, sealed.ErrNotSupported)
}

// workerMain is not supported on this operating system: it refuses to run.
func workerMain(_ io.Reader, stderr io.Writer) int {
	fmt.Fprintln(stderr, "attester:", errNotWorker)
	return 2
}
