package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSocketLayoutAgainstTheBinary: a layout in which a control uid can
// write the control socket's parent directory (here 0777, so another uid
// can rename the socket's directory away and put its own socket there)
// makes a non-development attester refuse to start (exit 3, the log naming
// the uid and the directory), touching nothing; a development attester
// starts and warns.
func TestSocketLayoutAgainstTheBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the socket layout is read on Linux only")
	}
	pf := newPack(t)
	dir := t.TempDir()
	parent := filepath.Join(dir, "run")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(parent, "clawea", "attester.sock")
	control := os.Geteuid() + 1000
	extra := map[string]any{"controlSocket": socket, "controlUids": []int{control}}
	a, code := startAttester(t, writeConfig(t, dir, pf, extra))
	if a != nil || code != 3 {
		t.Fatalf("started (exit %d) with a control uid that can replace the socket", code)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Fatalf("the refused attester left its socket: %v", err)
	}
	extra["development"] = true
	a, code = startAttester(t, writeConfig(t, dir, pf, extra))
	if a == nil {
		t.Fatalf("development attester exited with %d", code)
	}
	if logs := a.logs.String(); !strings.Contains(logs, "DEVELOPMENT ONLY: the control socket's layout lets a control uid replace it") || !strings.Contains(logs, parent) {
		t.Fatalf("no warning naming %s: %s", parent, logs)
	}
}
