package swtpmtest

import (
	"crypto/rand"
	"crypto/rsa"
	"os/exec"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/internal/citest"
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
