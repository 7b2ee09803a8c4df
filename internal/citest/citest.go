// Package citest holds the rule for tests that need something from outside
// the module (the shared conformance folder, swtpm, node): on a developer's
// machine they skip when it is missing, under CI they fail, so that CI can
// never pass by skipping.
package citest

import (
	"fmt"
	"os"
	"testing"
)

// under reports whether the tests run under CI: the CI environment
// variable is set to a non-empty value (CI systems set CI=true).
func under() bool { return os.Getenv("CI") != "" }

// SkipOrFail skips tb with the formatted reason, or fails it (Fatal) when
// running under CI.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if under() {
		tb.Fatalf("%s (CI is set: this test must not skip)", msg)
		return
	}
	tb.Skip(msg)
}
