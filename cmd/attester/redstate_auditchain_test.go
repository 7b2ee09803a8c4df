//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestAuditRecordsSplicedAtStartAttack (gate-v1 section 5.2): whole,
// valid records moved while the attester was down (the last one
// duplicated, the first or a middle one dropped, two swapped), with no
// checkpoint (kill -9), each stop the start (exit 2) with a chain break
// naming the file, and the refused start leaves the file as it was.
func TestAuditRecordsSplicedAtStartAttack(t *testing.T) {
	cfg, _, file := stoppedWithAudit(t, 3)
	orig := testfile.Read(t, file)
	l := bytes.SplitAfter(orig, []byte("\n"))[:3]
	join := func(lines ...[]byte) []byte { return bytes.Join(lines, nil) }
	for _, tc := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"the last record duplicated", join(l[0], l[1], l[2], l[2]), "seq 3, want 4"},
		{"a middle record dropped", join(l[0], l[2]), "seq 3, want 2"},
		{"the first record dropped", join(l[1], l[2]), "seq 2, want 1"},
		{"two records swapped", join(l[0], l[2], l[1]), "seq 3, want 2"},
	} {
		writeAudit(t, file, tc.content)
		out := startRefused(t, cfg)
		if !strings.Contains(out, filepath.Base(file)) || !strings.Contains(out, "hash chain break") || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %s", tc.name, out)
		}
		if got, _ := os.ReadFile(file); !bytes.Equal(got, tc.content) {
			t.Errorf("%s: the refused start changed the file", tc.name)
		}
	}
	writeAudit(t, file, orig)
	a := mustStartAttester(t, cfg)
	a.cmd.Process.Kill()
	<-a.exited
}

// cleanStopWithRuns starts an attester on a new state directory, records
// n decisions in each of two runs, stops it cleanly (SIGINT: a signed
// checkpoint) and returns the config, the audit directory and the two
// run files.
func cleanStopWithRuns(t *testing.T, n int) (cfg, dir string, runs [2]string) {
	t.Helper()
	pf, cfg, state := stateConfig(t)
	a := mustStartAttester(t, cfg)
	dir = filepath.Join(state, "audit")
	for i := range runs {
		rn := a.createRun(t, pf, "ck"+string(rune('a'+i)))
		tr := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "m"))
		for range n {
			want(t, "decision", a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": tr.body["turn_id"], "tool": "read"}), 200)
		}
		runs[i] = filepath.Join(dir, rn.id+".jsonl")
	}
	a.cmd.Process.Signal(os.Interrupt)
	<-a.exited
	if a.exitCode != 0 {
		t.Fatalf("clean stop exited with %d", a.exitCode)
	}
	return cfg, dir, runs
}

// TestCheckpointSwapAndForeignAttack (gate-v1 section 5.3): after a clean
// stop, two runs' files swapped (each a valid chain) stop the start (exit
// 2, "the files differ from the signed checkpoint"), which no
// record-by-record check can see; another attester's checkpoint put in
// its place is not used (a warning naming the signature, every record
// verified).
func TestCheckpointSwapAndForeignAttack(t *testing.T) {
	cfg, dir, runs := cleanStopWithRuns(t, 2)
	a0, a1 := testfile.Read(t, runs[0]), testfile.Read(t, runs[1])
	writeAudit(t, runs[0], a1)
	writeAudit(t, runs[1], a0)
	if out := startRefused(t, cfg); !strings.Contains(out, "the files differ from the signed checkpoint") {
		t.Fatalf("swapped run files: %s", out)
	}
	writeAudit(t, runs[0], a0)
	writeAudit(t, runs[1], a1)

	// Another attester's (valid, signed) checkpoint in this one's place.
	_, otherDir, _ := cleanStopWithRuns(t, 1)
	writeAudit(t, filepath.Join(dir, "CHECKPOINT"), testfile.Read(t, filepath.Join(otherDir, "CHECKPOINT")))
	b := mustStartAttester(t, cfg)
	b.cmd.Process.Kill()
	<-b.exited
	logs := b.logs.String()
	if !strings.Contains(logs, "start-up checkpoint ignored") || !strings.Contains(logs, "signature does not verify") || strings.Contains(logs, "checkpoint verified") {
		t.Fatalf("another attester's checkpoint: %s", logs)
	}
}
