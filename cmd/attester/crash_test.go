//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
)

// TestKillUnderLoadAgainstTheBinary: kill -9 while 16 callers get tool-call
// decisions on the control socket, then restart on the same stateDir. The
// identity is the same (DID and pack key), every run's audit file verifies
// with wire/auditrec, and every decision a caller received before the kill
// is in its run's file at the seq it was told, with the same tool,
// parameters hash and outcome.
func TestKillUnderLoadAgainstTheBinary(t *testing.T) {
	pf, cfg, state := stateConfig(t)
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

// TestAuditCheckpointAgainstTheBinary (gate-v1 section 5.3): a clean stop
// (SIGINT) leaves a signed start-up checkpoint; an offline cut of the last
// record, which no record-by-record check can see, then stops the start.
// The restart uses the checkpoint and removes it before it records, so
// kill -9 after it leaves none: the next start verifies every record and
// an offline edit inside the old checkpoint's range stops it.
func TestAuditCheckpointAgainstTheBinary(t *testing.T) {
	pf, cfg, state := stateConfig(t)
	ck := filepath.Join(state, "audit", "CHECKPOINT")
	a, code := startAttester(t, cfg)
	if a == nil {
		t.Fatalf("attester exited with %d", code)
	}
	rn := a.createRun(t, pf, "checkpoint")
	decide := func(a *attester, rn runHandle, n int) {
		t.Helper()
		r := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", rn.id))
		for range n {
			if d := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": r.body["turn_id"], "tool": "read"}); d.code != 200 {
				t.Fatalf("decision: %d %v", d.code, d.body)
			}
		}
	}
	decide(a, rn, 6)
	a.cmd.Process.Signal(os.Interrupt)
	<-a.exited
	if a.exitCode != 0 {
		t.Fatalf("clean stop exited with %d", a.exitCode)
	}
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("no checkpoint after a clean stop: %v", err)
	}

	run := filepath.Join(state, "audit", rn.id+".jsonl")
	orig := testfile.Read(t, run)
	lastCut := orig[:bytes.LastIndexByte(orig[:len(orig)-1], '\n')+1]
	writeAudit(t, run, lastCut)
	if out := startRefused(t, cfg); !strings.Contains(out, "the files differ from the signed checkpoint") {
		t.Fatalf("a start over a cut the checkpoint contradicts: %s", out)
	}
	writeAudit(t, run, orig)

	b, code := startAttester(t, cfg)
	if b == nil {
		t.Fatalf("restart exited with %d", code)
	}
	if !strings.Contains(b.logs.String(), "start-up checkpoint verified") {
		t.Fatalf("the restart did not use the checkpoint: %s", b.logs.String())
	}
	if _, err := os.Stat(ck); !os.IsNotExist(err) {
		t.Fatalf("the checkpoint outlived the start: %v", err)
	}
	decide(b, b.createRun(t, pf, "after"), 2)
	b.cmd.Process.Kill()
	<-b.exited
	if _, err := os.Stat(ck); !os.IsNotExist(err) {
		t.Fatalf("a checkpoint after kill -9: %v", err)
	}

	// One record's params hash changed, the length and the last record
	// kept: only a record-by-record check catches it.
	edited := bytes.Clone(orig)
	i := bytes.Index(edited, []byte(`"params_hash_b64u":"`)) + len(`"params_hash_b64u":"`) + 4
	if edited[i] == 'A' {
		edited[i] = 'B'
	} else {
		edited[i] = 'A'
	}
	writeAudit(t, run, edited)
	if out := startRefused(t, cfg); !strings.Contains(out, "record_hash_b64u does not match") || strings.Contains(out, "checkpoint verified") {
		t.Fatalf("a start over an edited record after kill -9: %s", out)
	}
}

// startRefused runs the attester on config (runAttester) and returns its
// output; it fails the test unless the attester exits with 2 (setup
// failed).
func startRefused(t *testing.T, config string) string {
	t.Helper()
	code, out := runAttester(t, config)
	if code != 2 {
		t.Fatalf("the attester did not refuse to start: exit %d: %s", code, out)
	}
	return out
}

func writeAudit(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
