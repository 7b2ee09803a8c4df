//go:build linux

package main

// docs/spec/attester-api.md section 2 step 2: a peer the attester cannot
// identify (its pid as SO_PEERCRED reports it is 0, because the peer is in
// a pid namespace the attester cannot see) is refused 403 PROCESS_BINDING,
// whatever it sends. The attack: the attester runs in a pid namespace of
// its own (unshare, as root) and this test, outside it, calls the control
// socket with an allowed uid.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestUnidentifiablePeerAttack(t *testing.T) {
	needRoot(t, "a pid namespace needs root (CAP_SYS_ADMIN); CI runs as root")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare (util-linux)")
	}
	// The attester binary, started in a new pid namespace.
	wrapper := filepath.Join(t.TempDir(), "attester-in-pidns")
	script := "#!/bin/sh\nexec " + unshare + " --pid --fork --kill-child=SIGINT " + attesterBin + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := attesterBin
	t.Cleanup(func() { attesterBin = saved }) // also when the start fails
	attesterBin = wrapper
	a, pf := startWithPack(t, nil)
	attesterBin = saved
	// unshare does not pass SIGINT on: stopping it stops the attester
	// (--kill-child=SIGINT, a clean stop).
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.exited
	})

	r := a.tryCreateRun(t, pf, "pidns")
	if r.code != 403 || r.body["reason"] != "PROCESS_BINDING" || r.body["run_id"] != nil {
		t.Fatalf("create from outside the attester's pid namespace: %d %s, want 403 PROCESS_BINDING", r.code, r.raw)
	}
	if r := a.req(t, false, "GET", "/v1/gate/policy", "", nil); r.code != 403 || r.body["reason"] != "PROCESS_BINDING" {
		t.Fatalf("policy from outside the attester's pid namespace: %d %s, want 403 PROCESS_BINDING", r.code, r.raw)
	}
	// The public listener does not depend on the peer's process.
	want(t, "identity", a.req(t, true, "GET", "/v1/identity", "", nil), 200)
}
