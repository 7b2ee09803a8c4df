package poh

import (
	"errors"
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// PromptCommitments are the values a proof bundle's prompt commitments must
// match (docs/spec/attestation-v1.md section 5.1). The attester fills them
// from what it rebuilt before it signs; a verifier fills them from the
// hardware-bound commitments of the attestation it checks.
type PromptCommitments struct {
	// RunID and AgentDID identify the run.
	RunID    string
	AgentDID string
	// SystemPromptHashB64u is b64u(SHA-256) of the rebuilt system prompt.
	SystemPromptHashB64u string
	// SystemPromptReportHashB64u is the SystemPromptReport.v1 hash.
	SystemPromptReportHashB64u string
	// PromptPackCiphertextHashB64u is the prompt pack ciphertext hash; the
	// bundle's optional member, when present, must equal it.
	PromptPackCiphertextHashB64u string
	// Provider and Model are the attested model identity's.
	Provider string
	Model    string
	// PromptRootHashB64u, when set, is the prompt_pack root the bundle must
	// carry; "" accepts any consistent root or none.
	PromptRootHashB64u string
	// PromptCommittedEventHashB64u, when set, is the event_hash_b64u of the
	// run's prompt_committed event as the attester issued it when it opened
	// the run: the chain's first event must be exactly that event (same id,
	// run, time and payload). The attester sets it and refuses to attest
	// without it; a verifier has no attested copy of that event and leaves
	// it "", so only the event's type and recomputed payload hash are
	// checked.
	PromptCommittedEventHashB64u string
	// HarnessID is the harness the attestation names (its payload's
	// harness.id), "" when it names none. When it is harnessOpenClaw the
	// clawea_llm_calls rule applies whatever the bundle's metadata says, so
	// an attestation never names OpenClaw for a bundle that escaped it.
	HarnessID string
}

// EventTypeLLMCall is the PoH event type of an LLM call.
const EventTypeLLMCall = "llm_call"

// PromptCommittedEventType is the type of a run's first event: the
// attester's commitment to the prompt it rebuilt and serves.
const PromptCommittedEventType = "prompt_committed"

// PromptCommittedPayloadHash is the payload_hash_b64u of a run's
// prompt_committed event: b64u(SHA-256(JSON.stringify({report_hash_b64u,
// system_prompt_hash_b64u, prompt_pack_ciphertext_hash_b64u}))), keys in
// that order. The attester computes it when it opens a run;
// CheckPromptCommitments recomputes it from the commitments on both sides.
func PromptCommittedPayloadHash(reportHash, promptHash, packCiphertextHash string) (string, error) {
	return pohjson.Hash(pohjson.NewObject(
		pohjson.M("report_hash_b64u", pohjson.NewString(reportHash)),
		pohjson.M("system_prompt_hash_b64u", pohjson.NewString(promptHash)),
		pohjson.M("prompt_pack_ciphertext_hash_b64u", pohjson.NewString(packCiphertextHash)),
	))
}

// CheckPromptCommitments checks the prompt commitments of a verified bundle
// against want (docs/spec/attestation-v1.md section 5.1), starting with the
// chain's first event, the run's prompt_committed event. It is the one
// implementation of that section: the attester calls it before signing an
// execution attestation and verify/ calls it when checking one. Errors are
// *Error with the section's codes and the JSON path of the refused member
// in Field.
func CheckPromptCommitments(b *Bundle, want PromptCommitments) error {
	// event_chain[0]: the run's prompt_committed event, before anything
	// the harness wrote into the metadata.
	if err := checkPromptCommitted(b, want); err != nil {
		return err
	}
	md := b.Metadata
	if md.Kind() != pohjson.Object {
		return fail(MissingRequiredField, "payload.metadata", "the bundle carries no prompt commitments")
	}
	if err := checkClaweaCommitments(md, want); err != nil {
		return err
	}
	// A metadata tree that VerifyProofBundle parsed strictly from bytes
	// has a JSON.stringify form in every member; one set by hand may not.
	parsed := md == b.parsedMetadata
	sv, err := checkReportCalls(b, md, want, parsed)
	if err != nil {
		return err
	}
	// metadata.clawea_llm_calls: what each call sent, against the prompt.
	if err := checkLLMCalls(b, md, want); err != nil {
		return err
	}
	return checkPromptPack(md, sv, want, parsed)
}

// checkClaweaCommitments checks metadata.clawea: the SystemPromptReport.v1
// hash (and optionally the pack ciphertext hash) the harness committed to.
func checkClaweaCommitments(md *pohjson.Value, want PromptCommitments) error {
	const cf = "payload.metadata.clawea"
	cv := md.Get("clawea")
	if cv == nil {
		return fail(MissingRequiredField, cf, "missing")
	}
	if cv.Kind() != pohjson.Object {
		return fail(SchemaValidationFailed, cf, "must be an object")
	}
	for _, m := range cv.Members() {
		switch m.Key {
		case "system_prompt_report_hash_b64u", "prompt_pack_ciphertext_hash_b64u":
			if m.Value.Kind() != pohjson.String {
				return fail(SchemaValidationFailed, cf+"."+m.Key, "must be a string")
			}
		default:
			return fail(SchemaValidationFailed, cf, "unknown member")
		}
	}
	rh, ok := cv.GetString("system_prompt_report_hash_b64u")
	if !ok {
		return fail(MissingRequiredField, cf+".system_prompt_report_hash_b64u", "missing")
	}
	if rh != want.SystemPromptReportHashB64u {
		return fail(PromptCommitmentMismatch, cf+".system_prompt_report_hash_b64u", "the bundle commits to another SystemPromptReport")
	}
	if ph, ok := cv.GetString("prompt_pack_ciphertext_hash_b64u"); ok && ph != want.PromptPackCiphertextHashB64u {
		return fail(PromptCommitmentMismatch, cf+".prompt_pack_ciphertext_hash_b64u", "the bundle commits to another prompt pack")
	}
	return nil
}

// reportField is the JSON path of metadata.system_prompt_report.
const reportField = "payload.metadata.system_prompt_report"

// checkReportCalls checks metadata.system_prompt_report: every llm call of
// the bundle was made under the rebuilt prompt. It returns the report.
// parsed: md is a strict parse's (validateSub).
func checkReportCalls(b *Bundle, md *pohjson.Value, want PromptCommitments, parsed bool) (*pohjson.Value, error) {
	const sf = reportField
	sv := md.Get("system_prompt_report")
	if sv == nil {
		return nil, fail(MissingRequiredField, sf, "missing")
	}
	if err := validateSub(sv, sf, schemas.PoHSystemPromptReportV1, parsed); err != nil {
		return nil, err
	}
	if s, _ := sv.GetString("run_id"); s != want.RunID {
		return nil, fail(PromptCommitmentMismatch, sf+".run_id", "the report is for another run")
	}
	if s, _ := sv.GetString("agent_did"); s != want.AgentDID {
		return nil, fail(PromptCommitmentMismatch, sf+".agent_did", "the report is for another agent")
	}
	calls := sv.Get("calls").Elems()
	if len(calls) == 0 {
		return nil, fail(MissingRequiredField, sf+".calls", "the report commits to no llm call")
	}
	covered := make(map[string]bool, len(calls))
	for i, call := range calls {
		id, err := checkReportCall(b, fmt.Sprintf("%s.calls[%d]", sf, i), call, want)
		if err != nil {
			return nil, err
		}
		covered[id] = true
	}
	for i, e := range b.Events {
		if e.EventType == EventTypeLLMCall && !covered[e.EventID] {
			return nil, fail(PromptCommitmentMismatch, fmt.Sprintf("payload.event_chain[%d]", i), "llm_call event without a system prompt commitment")
		}
	}
	return sv, nil
}

// checkReportCall checks one call of the report, at JSON path f, against
// the bundle's events and want; it returns the call's event id.
func checkReportCall(b *Bundle, f string, call *pohjson.Value, want PromptCommitments) (string, error) {
	get := func(k string) string { s, _ := call.GetString(k); return s }
	if get("rendered_system_prompt_hash_b64u") != want.SystemPromptHashB64u {
		return "", fail(PromptCommitmentMismatch, f+".rendered_system_prompt_hash_b64u", "the call used another system prompt")
	}
	id := get("event_id")
	idx := slices.IndexFunc(b.Events, func(e Event) bool { return e.EventID == id })
	if idx < 0 || b.Events[idx].EventType != EventTypeLLMCall {
		return "", fail(EvidenceMismatch, f+".event_id", "does not name an llm_call event of the bundle")
	}
	if h := get("event_hash_b64u"); h != "" && h != b.Events[idx].EventHashB64u {
		return "", fail(EvidenceMismatch, f+".event_hash_b64u", "does not match the event's hash")
	}
	if p := get("provider"); p != "" && p != want.Provider {
		return "", fail(EvidenceMismatch, f+".provider", "differs from the attested model identity")
	}
	if m := get("model"); m != "" && m != want.Model {
		return "", fail(EvidenceMismatch, f+".model", "differs from the attested model identity")
	}
	return id, nil
}

// checkPromptPack checks metadata.prompt_pack (optional): a consistent
// root, tied to the report sv, and the root want expects. parsed: md is a
// strict parse's (validateSub).
func checkPromptPack(md, sv *pohjson.Value, want PromptCommitments, parsed bool) error {
	root, _ := sv.GetString("prompt_root_hash_b64u")
	const pf = "payload.metadata.prompt_pack"
	if pv := md.Get("prompt_pack"); pv != nil {
		if err := validateSub(pv, pf, schemas.PromptPackV1, parsed); err != nil {
			return err
		}
		elems := pv.Get("entries").Elems()
		entries := make([]PromptPackEntry, 0, len(elems))
		for _, ev := range elems {
			id, _ := ev.GetString("entry_id")
			h, _ := ev.GetString("content_hash_b64u")
			entries = append(entries, PromptPackEntry{EntryID: id, ContentHashB64u: h})
		}
		got, err := PromptRootHash(entries)
		if err != nil {
			return fail(MalformedEnvelope, pf+".entries", "%s", err.Error())
		}
		pr, _ := pv.GetString("prompt_root_hash_b64u")
		if got != pr {
			return fail(PromptCommitmentMismatch, pf+".prompt_root_hash_b64u", "does not match the entries")
		}
		if root != "" && root != pr {
			return fail(PromptCommitmentMismatch, reportField+".prompt_root_hash_b64u", "differs from the prompt pack root")
		}
		root = pr
	}
	if want.PromptRootHashB64u != "" {
		if root == "" {
			return fail(MissingRequiredField, pf, "a prompt root was expected")
		}
		if root != want.PromptRootHashB64u {
			return fail(PromptCommitmentMismatch, pf+".prompt_root_hash_b64u", "the bundle commits to another prompt pack root")
		}
	}
	return nil
}

// checkPromptCommitted: the chain starts with the run's prompt_committed
// event, whose payload hash is the one recomputed from want's report,
// prompt and pack hashes, and, when want names it, whose event hash is the
// one the attester issued.
func checkPromptCommitted(b *Bundle, want PromptCommitments) error {
	const field = "payload.event_chain[0]"
	if len(b.Events) == 0 || b.Events[0].EventType != PromptCommittedEventType {
		return fail(PromptCommitmentMismatch, field, "the event chain does not start with a prompt_committed event")
	}
	first := b.Events[0]
	ph, err := PromptCommittedPayloadHash(want.SystemPromptReportHashB64u, want.SystemPromptHashB64u, want.PromptPackCiphertextHashB64u)
	if err != nil || first.PayloadHashB64u != ph {
		return fail(PromptCommitmentMismatch, field+".payload_hash_b64u", "the prompt_committed event does not commit to the run's prompt, report and pack")
	}
	if want.PromptCommittedEventHashB64u != "" && first.EventHashB64u != want.PromptCommittedEventHashB64u {
		return fail(PromptCommitmentMismatch, field+".event_hash_b64u", "the event chain does not start with the run's prompt_committed event")
	}
	return nil
}

// validateSub validates a metadata member against a PoH schema. A member
// built by hand must also have a JSON.stringify form; one of a strict parse
// (parsed) has it already (every value the parser accepts does, which
// TestParsedMembersStringify checks over the vectors and corpora), so it is
// not encoded a second time only to be thrown away.
func validateSub(v *pohjson.Value, field, schemaID string, parsed bool) error {
	if !parsed {
		if _, err := pohjson.Stringify(v); err != nil {
			return fail(MalformedEnvelope, field, "cannot be serialized")
		}
	}
	if err := schemas.ValidateValue(schemaID, v); err != nil {
		if ve, ok := errors.AsType[*schemas.ValidationError](err); ok {
			return fail(SchemaValidationFailed, field+ve.Location, "%s", ve.Msg)
		}
		return fail(SchemaValidationFailed, field, "schema validation failed")
	}
	return nil
}

// CheckBundleRun checks that a verified bundle is the run's
// (docs/spec/attestation-v1.md section 5, step 2): its agent_did is
// agentDID (EVIDENCE_MISMATCH), it has an event chain (MISSING_REQUIRED_FIELD)
// and the chain's run id is runID (EVIDENCE_MISMATCH). The issuer and
// verify/ both call it.
func CheckBundleRun(b *Bundle, agentDID, runID string) error {
	switch {
	case b.AgentDID != agentDID:
		return fail(EvidenceMismatch, "payload.agent_did", "the bundle is from another agent")
	case b.RunID == "":
		return fail(MissingRequiredField, "payload.event_chain", "the bundle has no event chain, so no run id")
	case b.RunID != runID:
		return fail(EvidenceMismatch, "payload.event_chain[0].run_id", "the bundle is for another run")
	}
	return nil
}
