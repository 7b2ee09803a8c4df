package main

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
)

// redctlConfig is writeConfig's configuration with the gate's tools
// section replaced by tools.
func redctlConfig(t *testing.T, pf *packFixture, tools map[string]any) string {
	t.Helper()
	path := writeConfig(t, t.TempDir(), pf, nil)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["tools"] = tools
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDeniedVerifyRouteAttack: the tool policy denies `verify`. The gate
// denies the verify tool call; an orchestrator that then calls the verify
// route anyway (skipping the gate, as a harness that does not run the
// plugin's hook would) is refused 403 and the turn stays unverified: a
// gated exec is still denied by the verification gate. (Before: the route
// did not consult the policy, the turn was verified and exec allowed.)
func TestDeniedVerifyRouteAttack(t *testing.T) {
	pf := newPack(t)
	a := mustStartAttester(t, redctlConfig(t, pf, map[string]any{"deny": []string{"browser", "verify"}}))
	rn := a.createRun(t, pf, "agent:main:main")
	base := "/v1/runs/" + rn.id
	r := a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("telegram", "owner-1", "m1"))
	if r.code != 201 || r.body["owner"] != true {
		t.Fatalf("owner turn: %d %v", r.code, r.body)
	}
	turn := r.body["turn_id"].(string)

	r = a.req(t, false, "POST", base+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": "verify"})
	if r.code != 200 || r.body["allow"] != false || r.body["stage"] != "tool_policy" {
		t.Fatalf("verify tool call: %d %v", r.code, r.body)
	}
	for _, body := range []map[string]any{
		{"turn_id": turn},
		{"turn_id": turn, "message_id": "m1", "content_sha256_b64u": content},
	} {
		r = a.req(t, false, "POST", base+"/verify", rn.capability, body)
		if r.code != 403 || !strings.Contains(r.body["error"].(string), "tool policy denies the verify tool") {
			t.Errorf("verify route with verify denied: %d %v", r.code, r.body)
		}
	}
	r = a.req(t, false, "POST", base+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": "exec", "params": map[string]any{"command": "id"}})
	if r.code != 200 || r.body["allow"] != false || r.body["stage"] != "verification_gate" {
		t.Fatalf("exec after a refused verify: %d %v", r.code, r.body)
	}
	if n := a.auditCount(t, rn); n != 2 {
		t.Errorf("audit holds %d records, want the 2 decisions", n)
	}
}

// TestConcurrentDecisionsAuditAttack: many tool calls of one run at once,
// allowed and denied, each with its own params. Every answer's audit_seq
// names a record of the run's log that says exactly what the answer said
// (tool, params hash, stage, decision, reason, turn); no seq is given
// twice, none is skipped, and the log holds nothing else.
func TestConcurrentDecisionsAuditAttack(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "agent:main:main")
	base := "/v1/runs/" + rn.id
	turn := a.openTurn(t, rn, "telegram", "guest", "m1")
	const n = 24
	answers := make([]map[string]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tool := []string{"read", "browser", "exec"}[i%3] // allowed, policy deny, gate deny
			ans := a.req(t, false, "POST", base+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": tool, "params": map[string]any{"i": i}})
			if ans.code != 200 {
				t.Errorf("call %d: %d %v", i, ans.code, ans.body)
			}
			answers[i] = ans.body
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	log := a.req(t, false, "GET", base+"/audit", rn.capability, nil)
	if log.code != 200 {
		t.Fatalf("audit: %d", log.code)
	}
	records := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSuffix(string(log.raw), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		records[rec["seq"].(float64)] = rec
	}
	if len(records) != n {
		t.Fatalf("audit holds %d distinct seqs, want %d", len(records), n)
	}
	for i, ans := range answers {
		rec := records[ans["audit_seq"].(float64)]
		if rec == nil {
			t.Errorf("call %d: no record for seq %v", i, ans["audit_seq"])
			continue
		}
		decision := map[bool]string{true: "allow", false: "deny"}[ans["allow"] == true]
		if rec["tool"] != ans["tool"] || rec["params_hash_b64u"] != ans["params_hash_b64u"] || rec["stage"] != ans["stage"] ||
			rec["reason"] != ans["reason"] || rec["decision"] != decision || rec["turn"] != turn {
			t.Errorf("call %d: answer %v, record %v", i, ans, rec)
		}
		delete(records, ans["audit_seq"].(float64))
	}
	if len(records) != 0 {
		t.Errorf("records no answer names: %v", records)
	}
}

// TestNonASCIIToolNameAttack: over the socket, a tool name that only Go's
// Unicode case mapping makes a real tool ("\u0130mage" -> "image") is
// denied at stage input and recorded with no tool name, not allowed as
// "image" (OpenClaw's JavaScript lower-cases it to another name).
func TestNonASCIIToolNameAttack(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "agent:main:main")
	base := "/v1/runs/" + rn.id
	turn := a.openTurn(t, rn, "telegram", "owner-1", "m1")
	r := a.req(t, false, "POST", base+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": "\u0130mage"})
	if r.code != 200 || r.body["allow"] != false || r.body["stage"] != "input" || r.body["tool"] != "" {
		t.Fatalf("non-ASCII tool name: %d %v", r.code, r.body)
	}
}
