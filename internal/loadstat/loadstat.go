// Package loadstat holds the figures the load tests and benchmarks report:
// latency percentiles and the test process's CPU time. Only tests import
// it (internal/layers enforces that).
package loadstat

import (
	"syscall"
	"testing"
	"time"
)

// Percentile returns the permille/1000 percentile of sorted (ascending):
// sorted[len*permille/1000], the last value when that is past the end, and
// 0 for no values. Percentile(d, 500) is the median, 990 p99, 999 p99.9.
func Percentile(sorted []time.Duration, permille int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := len(sorted) * permille / 1000
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// SelfCPU is this process's user+system CPU time (getrusage).
func SelfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
