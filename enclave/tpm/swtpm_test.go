package tpm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/citest"
)

// One swtpm per test binary, started on first use and stopped by TestMain.
// It is manufactured with swtpm_setup into a private directory (its own local
// CA, so nothing outside the directory is touched) with RSA and ECC EKs and
// EK certificates.

var sw struct {
	once   sync.Once
	dir    string
	cmd    *exec.Cmd
	exited chan error
	addr   string
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopSwtpm()
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

// swtpmAddr returns the address of the shared swtpm, starting it if needed.
func swtpmAddr(t testing.TB) string {
	t.Helper()
	requireTool(t, "swtpm")
	requireTool(t, "swtpm_setup")
	sw.once.Do(func() { sw.addr, sw.err = startSwtpm() })
	if sw.err != nil {
		t.Fatalf("start swtpm: %v", sw.err)
	}
	return sw.addr
}

func startSwtpm() (string, error) {
	dir, err := os.MkdirTemp("", "clawea-swtpm-")
	if err != nil {
		return "", err
	}
	sw.dir = dir
	state := filepath.Join(dir, "state")
	ca := filepath.Join(dir, "ca")
	for _, d := range []string{state, ca} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"swtpm_setup.conf": fmt.Sprintf("create_certs_tool = swtpm_localca\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = %s\nactive_pcr_banks = sha256\n",
			filepath.Join(dir, "swtpm-localca.conf"), filepath.Join(dir, "swtpm-localca.options")),
		"swtpm-localca.conf":    fmt.Sprintf("statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca),
		"swtpm-localca.options": "--platform-manufacturer clawea-test\n--platform-version 1.0\n--platform-model swtpm\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return "", err
		}
	}
	setup := exec.Command("swtpm_setup", "--tpm2", "--create-ek-cert", "--tpmstate", state,
		"--config", filepath.Join(dir, "swtpm_setup.conf"), "--pcr-banks", "sha256",
		"--logfile", filepath.Join(dir, "setup.log"))
	if out, err := setup.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "setup.log"))
		return "", fmt.Errorf("swtpm_setup: %v: %s %s", err, out, log)
	}

	// Port races (another process taking the port between our probe and
	// swtpm's bind) make swtpm exit; try a few ports.
	var lastErr error
	for range 3 {
		addr, err := launchSwtpm(dir, state)
		if err == nil {
			return addr, nil
		}
		lastErr = err
	}
	return "", lastErr
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// launchSwtpm starts swtpm on a free loopback port and waits until it accepts
// connections (or exits).
func launchSwtpm(dir, state string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("swtpm", "socket", "--tpm2",
		"--server", fmt.Sprintf("type=tcp,port=%d,bindaddr=127.0.0.1", port),
		"--flags", "not-need-init,startup-clear",
		"--tpmstate", "dir="+state,
		"--log", "file="+filepath.Join(dir, "swtpm.log"))
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "swtpm.log"))
			return "", fmt.Errorf("swtpm exited: %v: %s", err, log)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			sw.cmd, sw.exited = cmd, exited
			return addr, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return "", fmt.Errorf("swtpm did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopSwtpm() {
	if sw.cmd != nil && sw.cmd.Process != nil {
		_ = sw.cmd.Process.Kill()
		<-sw.exited
	}
	if sw.dir != "" {
		_ = os.RemoveAll(sw.dir)
	}
}

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
