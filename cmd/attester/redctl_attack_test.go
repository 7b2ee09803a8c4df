package main

import (
	"encoding/json"
	"os"
	"strings"
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
