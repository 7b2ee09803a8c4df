// Package swtpmtest starts a manufactured swtpm for tests: swtpm_setup into
// a private directory with its own local CA (swtpm_localca, so nothing
// outside the directory is touched), RSA and ECC EKs with EK certificates,
// then swtpm serving raw TPM 2.0 commands on a free loopback port.
package swtpmtest

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Instance is a running swtpm.
type Instance struct {
	// Addr is the host:port of the TPM data socket.
	Addr string
	// Dir holds the state, the local CA and the logs.
	Dir    string
	cmd    *exec.Cmd
	exited chan error
}

// Start manufactures and starts a swtpm. The caller must Stop it. The
// swtpm and swtpm_setup binaries must be on PATH.
func Start() (*Instance, error) {
	dir, err := os.MkdirTemp("", "clawea-swtpm-")
	if err != nil {
		return nil, err
	}
	in := &Instance{Dir: dir}
	if err := in.start(); err != nil {
		in.Stop()
		return nil, err
	}
	return in, nil
}

func (in *Instance) start() error {
	dir := in.Dir
	state := filepath.Join(dir, "state")
	ca := filepath.Join(dir, "ca")
	for _, d := range []string{state, ca} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
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
			return err
		}
	}
	setup := exec.Command("swtpm_setup", "--tpm2", "--create-ek-cert", "--tpmstate", state,
		"--config", filepath.Join(dir, "swtpm_setup.conf"), "--pcr-banks", "sha256",
		"--logfile", filepath.Join(dir, "setup.log"))
	if out, err := setup.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "setup.log"))
		return fmt.Errorf("swtpm_setup: %v: %s %s", err, out, log)
	}

	// Port races (another process taking the port between our probe and
	// swtpm's bind) make swtpm exit; try a few ports.
	var lastErr error
	for range 3 {
		if lastErr = in.launch(state); lastErr == nil {
			return nil
		}
	}
	return lastErr
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// launch starts swtpm on a free loopback port and waits until it accepts
// connections (or exits).
func (in *Instance) launch(state string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("swtpm", "socket", "--tpm2",
		"--server", fmt.Sprintf("type=tcp,port=%d,bindaddr=127.0.0.1", port),
		"--flags", "not-need-init,startup-clear",
		"--tpmstate", "dir="+state,
		"--log", "file="+filepath.Join(in.Dir, "swtpm.log"))
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(in.Dir, "swtpm.log"))
			return fmt.Errorf("swtpm exited: %v: %s", err, log)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			in.Addr, in.cmd, in.exited = addr, cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("swtpm did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills swtpm and removes its directory.
func (in *Instance) Stop() {
	if in.cmd != nil && in.cmd.Process != nil {
		_ = in.cmd.Process.Kill()
		<-in.exited
		in.cmd = nil
	}
	if in.Dir != "" {
		_ = os.RemoveAll(in.Dir)
	}
}

// CA returns the swtpm_localca root certificate and the issuer
// (intermediate) certificate, DER, that signed the EK certificates.
func (in *Instance) CA() (root, intermediate []byte, err error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(in.Dir, "ca", name))
		if err != nil {
			return nil, err
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != "CERTIFICATE" {
			return nil, errors.New(name + ": no certificate")
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return blk.Bytes, nil
	}
	if root, err = read("swtpm-localca-rootca-cert.pem"); err != nil {
		return nil, nil, err
	}
	if intermediate, err = read("issuercert.pem"); err != nil {
		return nil, nil, err
	}
	return root, intermediate, nil
}
