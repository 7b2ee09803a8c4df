package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/auditrec"
	"github.com/clawea/attester/wire/evidencedoc"
)

// loggedCall is a tool_call event the orchestrator logs: with payload nil,
// its payload hash is the params hash (binding "params"); otherwise
// payload is its clawea_tool_calls element (binding "call").
type loggedCall struct {
	paramsHash string
	payload    *pohjson.Value
}

// allowedCalls reads the run's audit log and returns its allow records.
func (a *attester) allowedCalls(t *testing.T, rn runHandle) []auditrec.Record {
	t.Helper()
	r := a.req(t, false, "GET", "/v1/runs/"+rn.id+"/audit", rn.capability, nil)
	if r.code != 200 {
		t.Fatalf("audit: %d %v", r.code, r.body)
	}
	var allows []auditrec.Record
	if _, _, err := auditrec.Read(bytes.NewReader(r.raw), func(rec auditrec.Record) error {
		if rec.Decision == auditrec.Allow {
			allows = append(allows, rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return allows
}

// paramsCalls are the tool_call events of recs with binding "params".
func paramsCalls(recs []auditrec.Record) []loggedCall {
	var out []loggedCall
	for _, r := range recs {
		out = append(out, loggedCall{paramsHash: r.ParamsHash})
	}
	return out
}

// callPayload is the clawea_tool_calls element of a call.
func callPayload(seq uint64, turn, tool, paramsHash string) loggedCall {
	return loggedCall{paramsHash: paramsHash, payload: pohjson.NewObject(
		pohjson.M("tool_call_version", pohjson.NewString(auditrec.ToolCallVersion)),
		pohjson.M("audit_seq", pohjson.NewInt(int64(seq))),
		pohjson.M("turn_id", pohjson.NewString(turn)),
		pohjson.M("tool", pohjson.NewString(tool)),
		pohjson.M("params_hash_b64u", pohjson.NewString(paramsHash)),
	)}
}

// callCalls are the tool_call events of recs with binding "call".
func callCalls(recs []auditrec.Record) []loggedCall {
	var out []loggedCall
	for _, r := range recs {
		out = append(out, callPayload(r.Seq, r.Turn, r.Tool, r.ParamsHash))
	}
	return out
}

// bundleWith is the orchestrator's proof bundle: the run's prompt_committed
// event, one llm_call, the prompt commitments, and a tool_call event per
// call (with metadata.clawea_tool_calls when the calls carry payloads).
func bundleWith(t *testing.T, pf *packFixture, rn runHandle, agentKey ed25519.PrivateKey, calls []loggedCall) []byte {
	t.Helper()
	agentDID := didkey.Format(agentKey.Public().(ed25519.PublicKey))
	now := poh.FormatTime(time.Now())
	e, err := rn.committed.Next("evt_llm_1", poh.EventTypeLLMCall, now, b64u.SHA256([]byte("llm")))
	if err != nil {
		t.Fatal(err)
	}
	first, err := pohjson.FromGo(rn.committed)
	if err != nil {
		t.Fatal(err)
	}
	llm, err := pohjson.FromGo(e)
	if err != nil {
		t.Fatal(err)
	}
	chain := []*pohjson.Value{first, llm}
	var payloads []*pohjson.Value
	prev := e
	for i, c := range calls {
		ph := c.paramsHash
		if c.payload != nil {
			if ph, err = pohjson.Hash(c.payload); err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, c.payload)
		}
		if prev, err = prev.Next(fmt.Sprintf("evt_tool_%d", i+1), auditrec.ToolCallEventType, now, ph); err != nil {
			t.Fatal(err)
		}
		v, err := pohjson.FromGo(prev)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, v)
	}
	report, _, err := pf.rb.SystemPromptReportCommitment(promptpack.ReportCommitmentInput{
		ReportID: "spr_" + rn.id, RunID: rn.id, AgentDID: agentDID, IssuedAt: time.Now(),
		Calls: []promptpack.CallRef{{EventID: e.EventID, EventHashB64u: e.EventHashB64u, Provider: "anthropic", Model: "claude-test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := pohjson.FromGo(report)
	if err != nil {
		t.Fatal(err)
	}
	md := []pohjson.Member{
		pohjson.M("system_prompt_report", rv),
		pohjson.M("clawea", pohjson.NewObject(
			pohjson.M("system_prompt_report_hash_b64u", pohjson.NewString(pf.rb.ReportHashB64u())),
			pohjson.M("prompt_pack_ciphertext_hash_b64u", pohjson.NewString(rn.ctHash)),
		)),
	}
	if payloads != nil {
		md = append(md, pohjson.M(auditrec.ToolCallsMember, pohjson.NewArray(payloads...)))
	}
	b, err := poh.Sign(poh.TypeProofBundle, pohjson.NewObject(
		pohjson.M("bundle_version", pohjson.NewString("1")),
		pohjson.M("bundle_id", pohjson.NewString("bundle_"+rn.id)),
		pohjson.M("agent_did", pohjson.NewString(agentDID)),
		pohjson.M("event_chain", pohjson.NewArray(chain...)),
		pohjson.M("metadata", pohjson.NewObject(md...)),
	), agentKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// attestRun asks for the run's attestation with bundle.
func (a *attester) attestRun(t *testing.T, rn runHandle, agentKey ed25519.PrivateKey, bundle []byte) reply {
	t.Helper()
	return a.req(t, false, "POST", "/v1/runs/"+rn.id+"/attestation", rn.capability,
		map[string]any{"bundle": json.RawMessage(bundle), "agent_did": didkey.Format(agentKey.Public().(ed25519.PublicKey))})
}

// commitments reads metadata.clawea of an attestation reply.
func commitments(t *testing.T, r reply) evidencedoc.Metadata {
	t.Helper()
	var out struct {
		Attestation struct {
			Payload struct {
				Metadata struct {
					Clawea evidencedoc.Metadata `json:"clawea"`
				} `json:"metadata"`
			} `json:"payload"`
		} `json:"attestation"`
	}
	if err := json.Unmarshal(r.raw, &out); err != nil {
		t.Fatalf("attestation reply: %v", err)
	}
	return out.Attestation.Payload.Metadata.Clawea
}

// TestZeroDecisionRunAgainstTheBinary: a run in which the gate decided
// nothing is attested with the empty log's root "" and count 0 (it was a
// 400 "invalid attestation request" before).
func TestZeroDecisionRunAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "agent:main:main")
	_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	r := a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, nil))
	if r.code != 200 {
		t.Fatalf("zero-decision run: %d %v", r.code, r.body)
	}
	c := commitments(t, r)
	if c.GateAuditRootB64u != "" || c.GateAuditCount != 0 {
		t.Fatalf("zero-decision run commits to root %q count %d", c.GateAuditRootB64u, c.GateAuditCount)
	}
	// The run's isolation claims: observed at its creation, with this test
	// process as the peer (the control uid is the attester's own here).
	iso := c.Isolation
	if c.Version != evidencedoc.CommitmentsVersionV3 || iso == nil || iso.ObservedAt != evidencedoc.ObservedAtRunCreation ||
		iso.PeerUID != int64(os.Geteuid()) || iso.PeerPIDNamespace != evidencedoc.PIDNamespaceSame || iso.ControlUIDsSeparate {
		t.Fatalf("isolation claims: %s %+v", c.Version, iso)
	}
	// A tool_call event in a run without decisions is refused.
	r = a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, []loggedCall{{paramsHash: b64u.SHA256([]byte("{}"))}}))
	if r.code != 422 || r.body["reason"] != string(poh.EvidenceMismatch) || !strings.Contains(fmt.Sprint(r.body["error"]), "without an allow decision") {
		t.Fatalf("tool call without decisions: %d %v", r.code, r.body)
	}
}

// TestToolCallsAgainstTheBinary: the attester refuses (422,
// EVIDENCE_MISMATCH, the message naming the mismatch) a bundle whose
// tool_call events are not its allowed decisions one to one and in order:
// an extra call, a missing one, two swapped, one from another run, one
// named in another turn; it attests the bundle that logs exactly its
// allowed calls, with either binding, and commits to the records checked.
func TestToolCallsAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	// Two runs, each with two allowed calls in two turns and a denial.
	decide := func(rn runHandle, tag string) {
		for i, step := range []struct {
			tool, path string
		}{{"read", "/a"}, {"browser", "/denied"}, {"read", "/b"}} {
			if i != 1 {
				r := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", fmt.Sprint(tag, i)))
				if r.code != 201 {
					t.Fatalf("turn: %d %v", r.code, r.body)
				}
				turn := r.body["turn_id"].(string)
				r = a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": step.tool, "params": map[string]any{"path": tag + step.path}})
				if r.code != 200 || r.body["allow"] != true {
					t.Fatalf("%s: %d %v", step.tool, r.code, r.body)
				}
				continue
			}
			turn := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", fmt.Sprint(tag, i))).body["turn_id"]
			r := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": step.tool})
			if r.code != 200 || r.body["allow"] != false {
				t.Fatalf("%s: %d %v", step.tool, r.code, r.body)
			}
		}
	}
	rn := a.createRun(t, pf, "agent:main:main")
	other := a.createRun(t, pf, "agent:main:other")
	decide(rn, "victim")
	decide(other, "other")
	allows, otherAllows := a.allowedCalls(t, rn), a.allowedCalls(t, other)
	if len(allows) != 2 || len(otherAllows) != 2 {
		t.Fatalf("allowed: %d and %d", len(allows), len(otherAllows))
	}
	p := paramsCalls(allows)
	c := callCalls(allows)
	for _, tc := range []struct {
		name     string
		calls    []loggedCall
		contains string
	}{
		{"an extra tool_call", append(paramsCalls(allows), p[1]), "without an allow decision"},
		{"a missing tool_call", p[:1], fmt.Sprintf("audit seq %d (tool \"read\") has no tool_call event", allows[1].Seq)},
		{"two tool calls swapped", []loggedCall{p[1], p[0]}, "out of order"},
		{"a tool call from another run", []loggedCall{p[0], paramsCalls(otherAllows)[1]}, fmt.Sprintf("does not match the allow decision of audit seq %d", allows[1].Seq)},
		{"call payloads swapped", []loggedCall{c[1], c[0]}, "out of order"},
		{"a call named in another turn", []loggedCall{c[0], callPayload(allows[1].Seq, allows[0].Turn, "read", allows[1].ParamsHash)}, "another turn"},
		{"a call payload from another run", []loggedCall{c[0], callCalls(otherAllows)[1]}, "does not match"},
	} {
		r := a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, tc.calls))
		if r.code != 422 || r.body["reason"] != string(poh.EvidenceMismatch) || !strings.Contains(fmt.Sprint(r.body["error"]), tc.contains) {
			t.Errorf("%s: got %d %v, want 422 EVIDENCE_MISMATCH naming %q", tc.name, r.code, r.body, tc.contains)
		}
	}
	for name, calls := range map[string][]loggedCall{"params": p, "call": c} {
		r := a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, calls))
		if r.code != 200 {
			t.Fatalf("binding %s: %d %v", name, r.code, r.body)
		}
		if m := commitments(t, r); m.GateAuditCount != 3 || m.GateAuditRootB64u == "" {
			t.Fatalf("binding %s: commits to %q, %d", name, m.GateAuditRootB64u, m.GateAuditCount)
		}
	}
}
