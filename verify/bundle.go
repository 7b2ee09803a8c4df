package verify

import (
	"errors"
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// PoH event types this verifier looks at.
const (
	eventLLMCall  = "llm_call"
	eventToolCall = "tool_call"
)

// checkBundle verifies the proof bundle (PoH rules), its linkage to the
// attestation and its prompt commitments. A nil bundle is reported as
// skipped.
func (st *state) checkBundle(raw []byte) *Error {
	if raw == nil {
		st.skip(CheckBundle, "no proof bundle supplied")
		st.warn("proof bundle not supplied: the run's events and prompt commitments were not checked")
		return nil
	}
	b, err := poh.VerifyProofBundle(raw, poh.BundleOptions{ReceiptSignerDIDs: st.policy.ReceiptSignerDIDs})
	if err != nil {
		return pohErr(CheckBundle, err)
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
	st.pass(CheckBundle, "%s signed by the agent, %d events, %d receipts", b.BundleID, len(b.Events), len(b.Receipts))

	switch {
	case b.Envelope.PayloadHashB64u != r.ProofBundleHashB64u:
		return rejected(CheckBundleLinkage, poh.EvidenceMismatch, "the bundle's payload hash is not the attested proof_bundle_hash_b64u (another or a stale bundle)")
	case b.AgentDID != r.AgentDID:
		return rejected(CheckBundleLinkage, poh.EvidenceMismatch, "the bundle is from another agent")
	case b.RunID == "":
		return rejected(CheckBundleLinkage, poh.MissingRequiredField, "the bundle has no event chain, so no run id")
	case b.RunID != r.RunID:
		return rejected(CheckBundleLinkage, poh.EvidenceMismatch, "the bundle is for another run")
	}
	st.pass(CheckBundleLinkage, "payload hash, agent and run agree")
	if e := checkPromptCommitments(b, r); e != nil {
		return e
	}
	st.pass(CheckPromptCommitments, "every llm_call committed to the attested system prompt and report")
	st.bundle = b
	r.Bundle = br
	return nil
}

func commitErr(code poh.Code, field, format string, args ...any) *Error {
	return &Error{Class: ErrRejected, Check: CheckPromptCommitments, Code: code, Err: fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))}
}

// checkPromptCommitments checks the bundle's metadata against the attested
// commitments (docs/spec/attestation-v1.md section 5.1, with the attested
// values in place of the attester's).
func checkPromptCommitments(b *poh.Bundle, r *Result) *Error {
	c := &r.Commitments
	md := b.Metadata
	if md.Kind() != pohjson.Object {
		return commitErr(poh.MissingRequiredField, "payload.metadata", "the bundle carries no prompt commitments")
	}
	cv := md.Get("clawea")
	if cv == nil {
		return commitErr(poh.MissingRequiredField, "payload.metadata.clawea", "missing")
	}
	if cv.Kind() != pohjson.Object {
		return commitErr(poh.SchemaValidationFailed, "payload.metadata.clawea", "must be an object")
	}
	for _, m := range cv.Members() {
		if (m.Key != "system_prompt_report_hash_b64u" && m.Key != "prompt_pack_ciphertext_hash_b64u") || m.Value.Kind() != pohjson.String {
			return commitErr(poh.SchemaValidationFailed, "payload.metadata.clawea", "unknown member or wrong type")
		}
	}
	rh, ok := cv.GetString("system_prompt_report_hash_b64u")
	if !ok {
		return commitErr(poh.MissingRequiredField, "payload.metadata.clawea.system_prompt_report_hash_b64u", "missing")
	}
	if rh != c.SystemPromptReportHashB64u {
		return commitErr(poh.PromptCommitmentMismatch, "payload.metadata.clawea.system_prompt_report_hash_b64u", "differs from the attested report hash")
	}
	if ph, ok := cv.GetString("prompt_pack_ciphertext_hash_b64u"); ok && ph != c.PromptPackCiphertextHashB64u {
		return commitErr(poh.PromptCommitmentMismatch, "payload.metadata.clawea.prompt_pack_ciphertext_hash_b64u", "differs from the attested pack ciphertext hash")
	}

	const sf = "payload.metadata.system_prompt_report"
	sv := md.Get("system_prompt_report")
	if sv == nil {
		return commitErr(poh.MissingRequiredField, sf, "missing")
	}
	if e := validateSub(sv, sf, schemas.PoHSystemPromptReportV1); e != nil {
		return e
	}
	if s, _ := sv.GetString("run_id"); s != r.RunID {
		return commitErr(poh.PromptCommitmentMismatch, sf+".run_id", "the report is for another run")
	}
	if s, _ := sv.GetString("agent_did"); s != r.AgentDID {
		return commitErr(poh.PromptCommitmentMismatch, sf+".agent_did", "the report is for another agent")
	}
	calls := sv.Get("calls").Elems()
	if len(calls) == 0 {
		return commitErr(poh.MissingRequiredField, sf+".calls", "the report commits to no llm call")
	}
	covered := map[string]bool{}
	for i, call := range calls {
		f := fmt.Sprintf("%s.calls[%d]", sf, i)
		get := func(k string) string { s, _ := call.GetString(k); return s }
		if get("rendered_system_prompt_hash_b64u") != c.SystemPromptHashB64u {
			return commitErr(poh.PromptCommitmentMismatch, f+".rendered_system_prompt_hash_b64u", "the call used another system prompt than the attested one")
		}
		id := get("event_id")
		idx := slices.IndexFunc(b.Events, func(e poh.Event) bool { return e.EventID == id })
		if idx < 0 || b.Events[idx].EventType != eventLLMCall {
			return commitErr(poh.EvidenceMismatch, f+".event_id", "does not name an llm_call event of the bundle")
		}
		if h := get("event_hash_b64u"); h != "" && h != b.Events[idx].EventHashB64u {
			return commitErr(poh.EvidenceMismatch, f+".event_hash_b64u", "does not match the event's hash")
		}
		if p := get("provider"); p != "" && p != c.ModelIdentity.Provider {
			return commitErr(poh.EvidenceMismatch, f+".provider", "differs from the attested model identity")
		}
		if m := get("model"); m != "" && m != c.ModelIdentity.Model {
			return commitErr(poh.EvidenceMismatch, f+".model", "differs from the attested model identity")
		}
		covered[id] = true
	}
	for i, e := range b.Events {
		if e.EventType == eventLLMCall && !covered[e.EventID] {
			return commitErr(poh.PromptCommitmentMismatch, fmt.Sprintf("payload.event_chain[%d]", i), "llm_call event without a system prompt commitment")
		}
	}
	root, _ := sv.GetString("prompt_root_hash_b64u")
	if pv := md.Get("prompt_pack"); pv != nil {
		const pf = "payload.metadata.prompt_pack"
		if e := validateSub(pv, pf, schemas.PromptPackV1); e != nil {
			return e
		}
		var entries []packEntry
		seen := map[string]bool{}
		for _, ev := range pv.Get("entries").Elems() {
			id, _ := ev.GetString("entry_id")
			h, _ := ev.GetString("content_hash_b64u")
			if seen[id] {
				return commitErr(poh.MalformedEnvelope, pf+".entries", "duplicate entry_id")
			}
			seen[id] = true
			entries = append(entries, packEntry{id: id, hash: h})
		}
		want, err := promptRootHash(entries)
		if err != nil {
			return commitErr(poh.MalformedEnvelope, pf+".entries", "root cannot be computed")
		}
		pr, _ := pv.GetString("prompt_root_hash_b64u")
		if want != pr {
			return commitErr(poh.PromptCommitmentMismatch, pf+".prompt_root_hash_b64u", "does not match the entries")
		}
		if root != "" && root != pr {
			return commitErr(poh.PromptCommitmentMismatch, sf+".prompt_root_hash_b64u", "differs from the prompt pack root")
		}
	}
	return nil
}

func validateSub(v *pohjson.Value, field, schemaID string) *Error {
	raw, err := pohjson.Stringify(v)
	if err != nil {
		return commitErr(poh.MalformedEnvelope, field, "cannot be serialized")
	}
	if err := schemas.Validate(schemaID, raw); err != nil {
		var ve *schemas.ValidationError
		if errors.As(err, &ve) {
			return commitErr(poh.SchemaValidationFailed, field+ve.Location, "%s", ve.Msg)
		}
		return commitErr(poh.SchemaValidationFailed, field, "schema validation failed")
	}
	return nil
}

type packEntry struct{ id, hash string }

// promptRootHash is poh.PromptRootHash over the bundle's entries.
func promptRootHash(entries []packEntry) (string, error) {
	es := make([]poh.PromptPackEntry, len(entries))
	for i, e := range entries {
		es[i] = poh.PromptPackEntry{EntryID: e.id, ContentHashB64u: e.hash}
	}
	return poh.PromptRootHash(es)
}
