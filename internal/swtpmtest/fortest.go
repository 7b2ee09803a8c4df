package swtpmtest

import (
	"crypto/rand"
	"crypto/rsa"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/tpmcred"
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

// ForeignEK returns the EK public area (tpmcred.EKPublic) of a fresh RSA
// 2048 key: an endorsement key no swtpm holds, for a credential the TPM
// must refuse.
func ForeignEK(tb testing.TB) *tpm2.TPMTPublic {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	ek, err := tpmcred.EKPublic(&k.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return ek
}

// StartWithBootLog starts a swtpm (as StartForTest) whose PCRs 0-9 hold a
// real boot's measurements: go-eventlog's cos-121-amd-sev sample, extended
// event by event. It returns the instance, the log and the path of a copy
// of it (as the kernel's binary_bios_measurements) in a test directory.
func StartWithBootLog(tb testing.TB) (in *Instance, log []byte, path string) {
	tb.Helper()
	log = tdxtest.ReadModule(tb, "github.com/google/go-eventlog", "testdata/eventlogs/tpm/cos-121-amd-sev.bin")
	in = StartForTest(tb)
	if err := in.extendEventLog(log, 9); err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(tb.TempDir(), "binary_bios_measurements")
	if err := os.WriteFile(path, log, 0o600); err != nil {
		tb.Fatal(err)
	}
	return in, log, path
}
