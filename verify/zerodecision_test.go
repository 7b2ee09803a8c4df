package verify

import (
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/poh"
)

// TestZeroDecisionRun: a run in which the gate decided nothing is attested
// with the root of an empty log ("") and count 0, and verifies with an
// empty audit file; the run's bundle then carries no tool_call event. A
// log with records does not match it, and an allow decision without its
// tool_call event is refused.
func TestZeroDecisionRun(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	r.Events = []string{poh.PromptCommittedEventType, "llm_call", "llm_call"}
	f := attestWith(t, sev, r, func(in *attestation.AttestInput) { in.AuditRootB64u, in.AuditCount = "", 0 })
	res, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), Options{Now: fixedNow, AuditLog: []byte{}, Report: f.report})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commitments.GateAuditRootB64u != "" || res.Commitments.GateAuditCount != 0 || res.Audit == nil || res.Audit.Count != 0 ||
		!res.Audit.ToolCallsChecked || res.Audit.ToolCallsMatched != 0 {
		t.Fatalf("got commitments %+v, audit %+v", res.Commitments, res.Audit)
	}
	// The three-record log of newRun is not the attested empty one.
	_, err = Verify(f.att, f.ev, f.bundle, f.simPolicy(), Options{Now: fixedNow, AuditLog: f.audit, Report: f.report})
	wantErr(t, err, ErrRejected, checkAuditLog, poh.EvidenceMismatch)
}

// TestAllowWithoutToolCall: the log allowed two calls, the bundle logged
// only the first: the earlier rule accepted this (an allowed decision
// without an event); the one-to-one rule refuses it.
func TestAllowWithoutToolCall(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	pol := attest(t, sev, r).simPolicy()
	log, root, count := r.auditLog(t)
	r2 := *r
	r2.Events = []string{poh.PromptCommittedEventType, "llm_call", "tool_call", "llm_call"}
	spec := forgeRun(t, sev, &r2)
	spec.auditRoot, spec.auditCount = root, int64(count)
	att, jws := forge(t, spec)
	_, err := Verify(att, jws, spec.bundle, pol, Options{Now: fixedNow, AuditLog: log})
	wantErr(t, err, ErrRejected, checkToolCalls, poh.EvidenceMismatch)
}
