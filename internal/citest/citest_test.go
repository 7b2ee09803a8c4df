package citest

import (
	"testing"
)

// recorder captures what SkipOrFail does without stopping this test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skip(args ...any)          { r.skipped = true; r.msg = args[0].(string) }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = true; r.msg = f }

func TestSkipOrFail(t *testing.T) {
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	SkipOrFail(r, "no %s", "swtpm")
	if !r.skipped || r.failed || r.msg != "no swtpm" {
		t.Fatalf("without CI: skipped %v failed %v msg %q", r.skipped, r.failed, r.msg)
	}
	t.Setenv("CI", "true")
	r = &recorder{TB: t}
	SkipOrFail(r, "no %s", "swtpm")
	if r.skipped || !r.failed {
		t.Fatalf("under CI: skipped %v failed %v", r.skipped, r.failed)
	}
}
