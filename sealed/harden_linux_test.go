//go:build linux

package sealed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHardenProcess runs HardenProcess in a child process (it changes
// process-wide state that would otherwise leak into other tests).
func TestHardenProcess(t *testing.T) {
	if os.Getenv("SEALED_TEST_HARDEN_CHILD") == "1" {
		hardenChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardenProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SEALED_TEST_HARDEN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "harden-child: ok") {
		t.Fatalf("child did not report success:\n%s", out)
	}
}

func hardenChild() {
	fail := func(format string, args ...any) {
		fmt.Printf("harden-child: "+format+"\n", args...)
		os.Exit(1)
	}
	if _, err := processHardening(); err != nil {
		fail("processHardening: %v", err)
	}
	for i := range 2 { // idempotent
		if err := HardenProcess(); err != nil {
			fail("HardenProcess #%d: %v", i+1, err)
		}
		after, err := processHardening()
		if err != nil {
			fail("processHardening: %v", err)
		}
		if !after.hardened() || after.Dumpable || after.CoreSoft != 0 || after.CoreHard != 0 {
			fail("after HardenProcess #%d: %v", i+1, after)
		}
		if after.String() != "dumpable=false core_limit=0/0" {
			fail("String() = %q", after.String())
		}
	}
	fmt.Println("harden-child: ok")
	os.Exit(0)
}

func TestHardeningStatus(t *testing.T) {
	h := hardening{Dumpable: true, CoreSoft: 0, CoreHard: 0}
	if h.hardened() {
		t.Error("dumpable process reported hardened")
	}
	h = hardening{CoreSoft: 0, CoreHard: 1}
	if h.hardened() {
		t.Error("nonzero hard core limit reported hardened")
	}
	if !errors.Is(fmt.Errorf("x: %w", errHardenFailed), errHardenFailed) {
		t.Error("ErrHardenFailed not matchable")
	}
}
