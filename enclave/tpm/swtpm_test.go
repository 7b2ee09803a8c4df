package tpm

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/swtpmtest"
)

// One swtpm per test binary (internal/swtpmtest: manufactured with its own
// local CA, RSA and ECC EKs and EK certificates), started on first use and
// stopped by TestMain.

var sw struct {
	once sync.Once
	in   *swtpmtest.Instance
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sw.in != nil {
		sw.in.Stop()
	}
	os.Exit(code)
}

// requireTool skips the test when name is not on PATH, except under CI=true
// where the tools are installed and their absence is a failure.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		citest.SkipOrFail(t, "%s not on PATH", name)
	}
	return p
}

// swtpm returns the shared swtpm, starting it if needed.
func swtpm(t testing.TB) *swtpmtest.Instance {
	t.Helper()
	requireTool(t, "swtpm")
	requireTool(t, "swtpm_setup")
	sw.once.Do(func() { sw.in, sw.err = swtpmtest.Start() })
	if sw.err != nil {
		t.Fatalf("start swtpm: %v", sw.err)
	}
	return sw.in
}

// swtpmAddr returns the address of the shared swtpm, starting it if needed.
func swtpmAddr(t testing.TB) string { t.Helper(); return swtpm(t).Addr }

// openSwtpm opens the shared swtpm with opts (Address filled in) and closes
// it at the end of the test.
func openSwtpm(t testing.TB, opts Options) *TPM {
	t.Helper()
	opts.Address = swtpmAddr(t)
	tp, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tp
}
