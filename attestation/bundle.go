package attestation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// Bundle metadata members (docs/spec/attestation-v1.md, "Proof bundle
// binding").
const (
	mdSystemPromptReport = "system_prompt_report"
	mdPromptPack         = "prompt_pack"
	mdClawea             = "clawea"
	llmCallEventType     = "llm_call"
)

// verifyBundle verifies the proof bundle envelope and its binding to the
// run the attester served.
func verifyBundle(in *AttestInput) (*poh.Bundle, error) {
	b, err := poh.VerifyProofBundle(in.BundleEnvelope, poh.BundleOptions{ReceiptSignerDIDs: in.ReceiptSignerDIDs})
	if err != nil {
		var pe *poh.Error
		if errors.As(err, &pe) {
			return nil, &BundleError{Code: pe.Code, Field: pe.Field, Msg: pe.Msg}
		}
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if b.AgentDID != in.AgentDID {
		return nil, bundleErr(poh.EvidenceMismatch, "payload.agent_did", "the bundle is from another agent")
	}
	if b.RunID == "" {
		return nil, bundleErr(poh.MissingRequiredField, "payload.event_chain", "the bundle has no event chain, so no run id")
	}
	if b.RunID != in.RunID {
		return nil, bundleErr(poh.EvidenceMismatch, "payload.event_chain[0].run_id", "the bundle is for another run")
	}
	if err := checkPromptCommitments(b, in); err != nil {
		return nil, err
	}
	return b, nil
}

// systemPromptReport mirrors the PoH system_prompt_report.v1 members used
// here; the schema has already refused anything else.
type systemPromptReport struct {
	RunID              string `json:"run_id"`
	AgentDID           string `json:"agent_did"`
	PromptRootHashB64u string `json:"prompt_root_hash_b64u"`
	Calls              []struct {
		EventID                      string `json:"event_id"`
		EventHashB64u                string `json:"event_hash_b64u"`
		Provider                     string `json:"provider"`
		Model                        string `json:"model"`
		RenderedSystemPromptHashB64u string `json:"rendered_system_prompt_hash_b64u"`
	} `json:"calls"`
}

type promptPackEntry struct {
	EntryID         string `json:"entry_id"`
	ContentHashB64u string `json:"content_hash_b64u"`
}

type promptPack struct {
	PromptRootHashB64u string            `json:"prompt_root_hash_b64u"`
	Entries            []promptPackEntry `json:"entries"`
}

// subDocument validates a metadata member against a PoH schema and decodes it.
func subDocument(v *pohjson.Value, field, schemaID string, dst any) error {
	raw, err := pohjson.Stringify(v)
	if err != nil {
		return bundleErr(poh.MalformedEnvelope, field, "cannot be serialized")
	}
	if schemaID != "" {
		if err := schemas.Validate(schemaID, raw); err != nil {
			var ve *schemas.ValidationError
			if errors.As(err, &ve) {
				return bundleErr(poh.SchemaValidationFailed, field+ve.Location, "%s", ve.Msg)
			}
			return bundleErr(poh.SchemaValidationFailed, field, "schema validation failed")
		}
	}
	// The PoH schemas refuse unknown members (additionalProperties false),
	// so decoding cannot meet a case variant of a known name.
	if err := json.Unmarshal(raw, dst); err != nil {
		return bundleErr(poh.SchemaValidationFailed, field, "unexpected shape or member")
	}
	return nil
}

func checkPromptCommitments(b *poh.Bundle, in *AttestInput) error {
	md := b.Metadata
	if md.Kind() != pohjson.Object {
		return bundleErr(poh.MissingRequiredField, "payload.metadata", "the bundle carries no prompt commitments")
	}

	// metadata.clawea: the SystemPromptReport.v1 hash (and optionally the
	// pack ciphertext hash) the harness committed to.
	cv := md.Get(mdClawea)
	if cv == nil {
		return bundleErr(poh.MissingRequiredField, "payload.metadata.clawea", "missing")
	}
	if cv.Kind() != pohjson.Object {
		return bundleErr(poh.SchemaValidationFailed, "payload.metadata.clawea", "must be an object")
	}
	for _, m := range cv.Members() {
		switch m.Key {
		case "system_prompt_report_hash_b64u", "prompt_pack_ciphertext_hash_b64u":
			if m.Value.Kind() != pohjson.String {
				return bundleErr(poh.SchemaValidationFailed, "payload.metadata.clawea."+m.Key, "must be a string")
			}
		default:
			return bundleErr(poh.SchemaValidationFailed, "payload.metadata.clawea", "unknown member")
		}
	}
	reportHash, ok := cv.GetString("system_prompt_report_hash_b64u")
	if !ok {
		return bundleErr(poh.MissingRequiredField, "payload.metadata.clawea.system_prompt_report_hash_b64u", "missing")
	}
	if reportHash != in.ReportHashB64u {
		return bundleErr(poh.PromptCommitmentMismatch, "payload.metadata.clawea.system_prompt_report_hash_b64u", "the bundle commits to another SystemPromptReport")
	}
	if packHash, ok := cv.GetString("prompt_pack_ciphertext_hash_b64u"); ok && packHash != in.PackCiphertextHashB64u {
		return bundleErr(poh.PromptCommitmentMismatch, "payload.metadata.clawea.prompt_pack_ciphertext_hash_b64u", "the bundle commits to another prompt pack")
	}

	// metadata.system_prompt_report: every call under the rebuilt prompt.
	sv := md.Get(mdSystemPromptReport)
	if sv == nil {
		return bundleErr(poh.MissingRequiredField, "payload.metadata.system_prompt_report", "missing")
	}
	const sf = "payload.metadata.system_prompt_report"
	var spr systemPromptReport
	if err := subDocument(sv, sf, schemas.PoHSystemPromptReportV1, &spr); err != nil {
		return err
	}
	if spr.RunID != in.RunID {
		return bundleErr(poh.PromptCommitmentMismatch, sf+".run_id", "the report is for another run")
	}
	if spr.AgentDID != in.AgentDID {
		return bundleErr(poh.PromptCommitmentMismatch, sf+".agent_did", "the report is for another agent")
	}
	if len(spr.Calls) == 0 {
		return bundleErr(poh.MissingRequiredField, sf+".calls", "the report commits to no llm call")
	}
	covered := map[string]bool{}
	for i, c := range spr.Calls {
		f := fmt.Sprintf("%s.calls[%d]", sf, i)
		if c.RenderedSystemPromptHashB64u != in.PromptHashB64u {
			return bundleErr(poh.PromptCommitmentMismatch, f+".rendered_system_prompt_hash_b64u", "the call used another system prompt")
		}
		idx := slices.IndexFunc(b.Events, func(e poh.Event) bool { return e.EventID == c.EventID })
		if idx < 0 || b.Events[idx].EventType != llmCallEventType {
			return bundleErr(poh.EvidenceMismatch, f+".event_id", "does not name an llm_call event of the bundle")
		}
		if c.EventHashB64u != "" && c.EventHashB64u != b.Events[idx].EventHashB64u {
			return bundleErr(poh.EvidenceMismatch, f+".event_hash_b64u", "does not match the event's hash")
		}
		if c.Provider != "" && c.Provider != in.Model.Provider {
			return bundleErr(poh.EvidenceMismatch, f+".provider", "differs from the attested model identity")
		}
		if c.Model != "" && c.Model != in.Model.Model {
			return bundleErr(poh.EvidenceMismatch, f+".model", "differs from the attested model identity")
		}
		covered[c.EventID] = true
	}
	for i, e := range b.Events {
		if e.EventType == llmCallEventType && !covered[e.EventID] {
			return bundleErr(poh.PromptCommitmentMismatch, fmt.Sprintf("payload.event_chain[%d]", i), "llm_call event without a system prompt commitment")
		}
	}

	// metadata.prompt_pack (optional): consistent root, tied to the report.
	root := spr.PromptRootHashB64u
	if pv := md.Get(mdPromptPack); pv != nil {
		const pf = "payload.metadata.prompt_pack"
		var pp promptPack
		if err := subDocument(pv, pf, schemas.PromptPackV1, &pp); err != nil {
			return err
		}
		want, err := promptRootHash(pp.Entries)
		if err != nil {
			return bundleErr(poh.MalformedEnvelope, pf+".entries", "%s", err.Error())
		}
		if want != pp.PromptRootHashB64u {
			return bundleErr(poh.PromptCommitmentMismatch, pf+".prompt_root_hash_b64u", "does not match the entries")
		}
		if root != "" && root != pp.PromptRootHashB64u {
			return bundleErr(poh.PromptCommitmentMismatch, sf+".prompt_root_hash_b64u", "differs from the prompt pack root")
		}
		root = pp.PromptRootHashB64u
	}
	if in.PromptRootHashB64u != "" {
		if root == "" {
			return bundleErr(poh.MissingRequiredField, "payload.metadata.prompt_pack", "a prompt root was expected")
		}
		if root != in.PromptRootHashB64u {
			return bundleErr(poh.PromptCommitmentMismatch, "payload.metadata.prompt_pack.prompt_root_hash_b64u", "the bundle commits to another prompt pack root")
		}
	}
	return nil
}

// promptRootHash is poh.PromptRootHash over the bundle's entries.
func promptRootHash(entries []promptPackEntry) (string, error) {
	es := make([]poh.PromptPackEntry, len(entries))
	for i, e := range entries {
		es[i] = poh.PromptPackEntry{EntryID: e.EntryID, ContentHashB64u: e.ContentHashB64u}
	}
	return poh.PromptRootHash(es)
}
