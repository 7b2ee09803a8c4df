package swtpmtest

import (
	"os/exec"
	"testing"

	"github.com/clawea/attester/internal/citest"
)

// StartForTest starts a manufactured swtpm that is stopped when tb ends.
// Without the swtpm tools on PATH the test is skipped (failed under CI).
func StartForTest(tb testing.TB) *Instance {
	tb.Helper()
	for _, tool := range []string{"swtpm", "swtpm_setup"} {
		if _, err := exec.LookPath(tool); err != nil {
			citest.SkipOrFail(tb, "%s not on PATH", tool)
		}
	}
	in, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(in.Stop)
	return in
}
