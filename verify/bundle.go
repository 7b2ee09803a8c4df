package verify

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/poh"
)

// PoH event types this verifier counts.
const (
	eventLLMCall  = poh.EventTypeLLMCall
	eventToolCall = "tool_call"
)

// checkBundle verifies the proof bundle (PoH rules), its linkage to the
// attestation and its prompt commitments. A nil bundle is reported as
// skipped.
func (st *state) checkBundle(raw []byte) *Error {
	if raw == nil {
		st.skip(checkBundle, "no proof bundle supplied")
		st.warn("proof bundle not supplied: the run's events and prompt commitments were not checked")
		return nil
	}
	b, err := poh.VerifyProofBundle(raw, poh.BundleOptions{ReceiptSignerDIDs: st.policy.ReceiptSignerDIDs, VerificationTime: st.opts.Now()})
	if err != nil {
		return pohErr(checkBundle, err)
	}
	r := st.res
	br := &BundleResult{BundleID: b.BundleID, PayloadHashB64u: b.Envelope.PayloadHashB64u, Events: len(b.Events), Receipts: len(b.Receipts)}
	for _, e := range b.Events {
		switch e.EventType {
		case eventLLMCall:
			br.LLMCalls++
		case eventToolCall:
			br.ToolCalls++
		}
	}
	for _, rc := range b.Receipts {
		if rc.Allowlisted {
			br.AllowlistedReceipts++
		}
	}
	st.pass(checkBundle, "%s signed by the agent, %d events, %d receipts", b.BundleID, len(b.Events), len(b.Receipts))

	if b.Envelope.PayloadHashB64u != r.ProofBundleHashB64u {
		return rejected(checkBundleLinkage, poh.EvidenceMismatch, "the bundle's payload hash is not the attested proof_bundle_hash_b64u (another or a stale bundle)")
	}
	if err := poh.CheckBundleRun(b, r.AgentDID, r.RunID); err != nil {
		if pe, ok := errors.AsType[*poh.Error](err); ok {
			return rejected(checkBundleLinkage, pe.Code, "%s", pe.Msg)
		}
		return rejected(checkBundleLinkage, poh.MalformedEnvelope, "%v", err)
	}
	st.pass(checkBundleLinkage, "payload hash, agent and run agree")
	if e := checkPromptCommitments(b, r); e != nil {
		return e
	}
	st.pass(checkPromptCommit, "every llm_call committed to the attested system prompt and report")
	if e := st.checkGatewayReceipts(b); e != nil {
		return e
	}
	st.bundle = b
	r.Bundle = br
	return nil
}

// harnessID is the id of the harness an attestation names, "" for none.
func harnessID(h *poh.Harness) string {
	if h == nil {
		return ""
	}
	return h.ID
}

func commitErr(code poh.Code, field, format string, args ...any) *Error {
	return &Error{Class: ErrRejected, Check: checkPromptCommit, Code: code, Err: fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))}
}

// checkPromptCommitments checks the bundle's metadata against the attested
// commitments (docs/spec/attestation-v1.md section 5.1, with the attested
// values in place of the attester's): poh.CheckPromptCommitments, the
// function the attester ran before signing.
func checkPromptCommitments(b *poh.Bundle, r *Result) *Error {
	c := &r.Commitments
	err := poh.CheckPromptCommitments(b, poh.PromptCommitments{
		RunID:                        r.RunID,
		AgentDID:                     r.AgentDID,
		SystemPromptHashB64u:         c.SystemPromptHashB64u,
		SystemPromptReportHashB64u:   c.SystemPromptReportHashB64u,
		PromptPackCiphertextHashB64u: c.PromptPackCiphertextHashB64u,
		Provider:                     c.ModelIdentity.Provider,
		Model:                        c.ModelIdentity.Model,
		HarnessID:                    harnessID(r.Harness),
	})
	if err == nil {
		return nil
	}
	if pe, ok := errors.AsType[*poh.Error](err); ok {
		return commitErr(pe.Code, pe.Field, "%s", pe.Msg)
	}
	return commitErr(poh.MalformedEnvelope, "payload.metadata", "%v", err)
}
