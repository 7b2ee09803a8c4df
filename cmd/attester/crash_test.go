//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestKillUnderLoadAgainstTheBinary: kill -9 while 16 callers get tool-call
// decisions on the control socket, then restart on the same stateDir. The
// identity is the same (DID and pack key), every run's audit file verifies
// with wire/auditrec, and every decision a caller received before the kill
// is in its run's file at the seq it was told, with the same tool,
// parameters hash and outcome.
func TestKillUnderLoadAgainstTheBinary(t *testing.T) {
	pf := newPack(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := writeConfig(t, dir, pf, map[string]any{"stateDir": state})
	a := mustStartAttester(t, cfg)
	id0 := a.req(t, true, "GET", "/v1/identity", "", nil)
	if id0.code != 200 || id0.body["identity_sealed"] != true {
		t.Fatalf("identity: %d %v", id0.code, id0.body)
	}

	// Load until 5,000 decisions or for a second after the first one
	// (bounded: 20 s), runs replaced every 500 calls so closed runs' files
	// are checked too; then cancel and kill -9 at once, with calls in flight.
	g := loadGenFor(t, a, pf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			cancel()
			a.cmd.Process.Kill()
		})
	}
	res := g.run(ctx, loadOptions{callers: 16, runs: 3, callsPerRun: 500, duration: 20 * time.Second, onAck: func(n int64) {
		switch n {
		case 1:
			time.AfterFunc(time.Second, kill)
		case 5000:
			kill()
		}
	}})
	kill()
	<-a.exited
	if res.firstErr != nil {
		t.Fatalf("the load failed before the kill: %v", res.firstErr)
	}
	if res.acked < 50 {
		t.Fatalf("only %d decisions before the kill (first error: %v)", res.acked, res.firstErr)
	}
	if a.exitCode != -1 {
		t.Fatalf("the attester was not killed: exit code %d", a.exitCode)
	}
	t.Logf("%d decisions acknowledged on %d runs before kill -9 (%.0f/s)", res.acked, len(res.runs), float64(res.acked)/res.elapsed.Seconds())

	b, code := startAttester(t, cfg)
	if b == nil {
		t.Fatalf("restart exited with %d: %s", code, a.logs.String())
	}
	id1 := b.req(t, true, "GET", "/v1/identity", "", nil)
	if id1.code != 200 || id1.body["did"] != id0.body["did"] || id1.body["pack_public_key"] != id0.body["pack_public_key"] {
		t.Fatalf("identity changed across kill -9: %v %v -> %v %v", id0.body["did"], id0.body["pack_public_key"], id1.body["did"], id1.body["pack_public_key"])
	}
	want(t, "readyz after restart", b.req(t, true, "GET", "/readyz", "", nil), 200)

	// Runs do not survive a restart (their capabilities were only in
	// memory): a capability from before is refused like an unknown one.
	want(t, "capability from before the restart", b.req(t, false, "GET", "/v1/runs/"+res.runs[0].id+"/audit", res.runs[0].capability, nil), 403)

	// The files, as recovered at start-up (a torn last record cut).
	got := checkAuditFiles(t, state, res.runs, false)
	if got.records < res.acked {
		t.Fatalf("%d records on disk for %d acknowledged decisions", got.records, res.acked)
	}
	t.Logf("%d audit files, %d records verified; %d acknowledged decisions all present", got.files, got.records, res.acked)

	// The restarted attester records new decisions.
	rn := b.createRun(t, pf, "after-restart")
	r := b.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "1"))
	if r.code != 201 {
		t.Fatalf("turn after restart: %d %v", r.code, r.body)
	}
	r = b.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": r.body["turn_id"], "tool": "read"})
	if r.code != 200 || r.body["audit_seq"] != float64(1) {
		t.Fatalf("decision after restart: %d %v", r.code, r.body)
	}
	if _, err := os.Stat(filepath.Join(state, "audit", rn.id+".jsonl")); err != nil {
		t.Fatal(err)
	}
}
