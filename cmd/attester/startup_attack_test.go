//go:build linux

package main

// Attacks on what the attester reads at start-up from its state directory
// (docs/spec/gate-v1.md section 5.2, docs/spec/sealed-memory.md section
// 3.4), through the real binary: files changed while it was down (kill -9
// first, so that no start-up checkpoint covers them) and a second attester
// on the same directory.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
)

// stoppedWithAudit starts an attester on a state directory, records n
// decisions in one run, kills it (-9: no checkpoint) and returns the
// config, the state directory and the run's audit file.
func stoppedWithAudit(t *testing.T, n int) (cfg, state, file string) {
	t.Helper()
	pf, cfg, state := stateConfig(t)
	a := mustStartAttester(t, cfg)
	rn := a.createRun(t, pf, "startup")
	tr := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "m1"))
	for range n {
		want(t, "decision", a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": tr.body["turn_id"], "tool": "read"}), 200)
	}
	a.cmd.Process.Kill()
	<-a.exited
	return cfg, state, filepath.Join(state, "audit", rn.id+".jsonl")
}

// TestAuditFilesAtStartAttack: a torn last record (no line feed) is cut
// and the attester starts; a complete record changed, a line over 16 KiB
// and a *.jsonl file whose name is not a run id each stop the start (exit
// 2) with an error naming the file, and the refused start changes no file.
func TestAuditFilesAtStartAttack(t *testing.T) {
	cfg, state, file := stoppedWithAudit(t, 3)
	orig := testfile.Read(t, file)
	if bytes.Count(orig, []byte("\n")) != 3 {
		t.Fatalf("audit file: %q", orig)
	}

	// A torn record: cut at start-up, the file back to its complete records.
	writeAudit(t, file, append(bytes.Clone(orig), orig[:40]...))
	b := mustStartAttester(t, cfg)
	b.cmd.Process.Kill()
	<-b.exited
	if got, _ := os.ReadFile(file); !bytes.Equal(got, orig) {
		t.Fatalf("the torn record was not cut: %d bytes, want %d", len(got), len(orig))
	}

	// Each of these stops the start and is left as it was.
	second := bytes.Index(orig, []byte("\n")) + 1
	edited := bytes.Clone(orig)
	i := second + bytes.Index(orig[second:], []byte(`"params_hash_b64u":"`)) + len(`"params_hash_b64u":"`) + 3
	edited[i] ^= 0x01
	for _, tc := range []struct {
		name, path string
		content    []byte
		names      string
	}{
		{"a changed middle record", file, edited, filepath.Base(file)},
		{"a line over 16 KiB", file, append(bytes.Clone(orig), append(bytes.Repeat([]byte("x"), 17<<10), '\n')...), filepath.Base(file)},
		{"a file whose name is not a run id", filepath.Join(state, "audit", "run.bad.jsonl"), orig, "run.bad.jsonl"},
	} {
		writeAudit(t, tc.path, tc.content)
		out := startRefused(t, cfg)
		if !strings.Contains(out, tc.names) {
			t.Errorf("%s: the refusal does not name %s: %s", tc.name, tc.names, out)
		}
		if got, _ := os.ReadFile(tc.path); !bytes.Equal(got, tc.content) {
			t.Errorf("%s: the refused start changed the file", tc.name)
		}
		if tc.path == file {
			writeAudit(t, file, orig)
		} else {
			os.Remove(tc.path)
		}
	}
	// Put back, the files start again.
	mustStartAttester(t, cfg)
}

// TestStateDirTakenAttack: a second attester on a running one's state
// directory (another control socket) refuses to start and leaves the first
// one's identity and audit files as they were; the first keeps serving.
func TestStateDirTakenAttack(t *testing.T) {
	pf, cfg, state := stateConfig(t)
	a := mustStartAttester(t, cfg)
	rn := a.createRun(t, pf, "first")
	want(t, "turn", a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "m1")), 201)
	before := dirBytes(t, state)

	dir2 := t.TempDir()
	b, code := startAttester(t, writeConfig(t, dir2, pf, map[string]any{"stateDir": state}))
	if b != nil || code == 0 {
		t.Fatalf("a second attester on the same state directory: started=%v exit %d", b != nil, code)
	}
	if after := dirBytes(t, state); after != before {
		t.Fatalf("the refused attester changed the state directory:\n%s\n->\n%s", before, after)
	}
	want(t, "the first attester after the refusal", a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "m2")), 201)
}

// dirBytes describes every regular file under dir: path, size and content.
func dirBytes(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(&sb, "%s %d %s\n", p, len(b), b64u.SHA256(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestIdentityBlobAttack (sealed-memory.md section 3.4): a sealed identity
// changed while the attester was down (one byte flipped, cut short, a byte
// appended) stops the start (exit 2) without replacing it: the file is as
// it was, and put back, it gives the same DID.
func TestIdentityBlobAttack(t *testing.T) {
	_, cfg, state := stateConfig(t)
	a := mustStartAttester(t, cfg)
	did := a.req(t, true, "GET", "/v1/identity", "", nil).body["did"]
	a.cmd.Process.Kill()
	<-a.exited
	blob := filepath.Join(state, "identity.sealed")
	orig := testfile.Read(t, blob)
	flipped := bytes.Clone(orig)
	flipped[len(flipped)-1] ^= 0x01
	labelFlipped := bytes.Clone(orig)
	labelFlipped[3] ^= 0x01
	// The kind (after the 30-byte version and its length byte) renamed:
	// refused as another sealer's blob.
	otherKind := bytes.Clone(orig)
	if last := 30 + int(orig[30]); otherKind[last] == 'x' {
		otherKind[last] = 'y'
	} else {
		otherKind[last] = 'x'
	}
	for name, content := range map[string][]byte{
		"a flipped byte":    flipped,
		"a flipped label":   labelFlipped,
		"cut short":         orig[:len(orig)-1],
		"a byte appended":   append(bytes.Clone(orig), 0),
		"empty":             {},
		"another blob kind": otherKind,
	} {
		if err := os.WriteFile(blob, content, 0o600); err != nil {
			t.Fatal(err)
		}
		out := startRefused(t, cfg)
		if got, _ := os.ReadFile(blob); !bytes.Equal(got, content) {
			t.Errorf("%s: the refused start replaced the sealed identity", name)
		}
		if !strings.Contains(out, "identity") {
			t.Errorf("%s: the refusal does not name the identity: %s", name, out)
		}
	}
	if err := os.WriteFile(blob, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	b := mustStartAttester(t, cfg)
	if got := b.req(t, true, "GET", "/v1/identity", "", nil).body["did"]; got != did {
		t.Fatalf("the identity put back: %v, want %v", got, did)
	}
}
