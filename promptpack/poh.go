package promptpack

import (
	"fmt"
	"slices"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/schema/schemas"
)

// maxPoHEntries is the largest number of prompt_pack.v1 entries (schema).
const maxPoHEntries = 256

// pohEntry is one prompt_pack.v1 entry.
type pohEntry struct {
	EntryID         string `json:"entry_id"`
	ContentHashB64u string `json:"content_hash_b64u"`
	SizeBytes       *int64 `json:"size_bytes,omitempty"`
}

// pohPromptPack is the PoH prompt_pack.v1 document (fields in PoH order).
type pohPromptPack struct {
	PromptPackVersion  string     `json:"prompt_pack_version"`
	PromptPackID       string     `json:"prompt_pack_id,omitempty"`
	HashAlgorithm      string     `json:"hash_algorithm"`
	PromptRootHashB64u string     `json:"prompt_root_hash_b64u"`
	Entries            []pohEntry `json:"entries"`
}

func sized(id string, b []byte) pohEntry {
	n := int64(len(b))
	return pohEntry{EntryID: id, ContentHashB64u: b64u.SHA256(b), SizeBytes: &n}
}

// pohEntries lists the hash-only entries of docs/spec section 5.1, except
// the report entry.
func (p *Pack) pohEntries(rep *Report) []pohEntry {
	if rep.V2 != nil {
		return p.pohEntriesV2(rep.V2)
	}
	es := []pohEntry{
		sized("params.json", p.Params),
		sized("harness:hardcoded-literals.json", p.Harness.Literals),
		sized("harness:core-tool-summaries.json", p.Harness.CoreToolSummaries),
		{EntryID: "tools:schemas", ContentHashB64u: rep.Inputs.ToolSchemasHashB64u},
	}
	if p.Harness.SigConfig != nil {
		es = append(es, sized("harness:sig-config.json", p.Harness.SigConfig))
	}
	for _, name := range templateNames(p.Harness) {
		es = append(es, sized("template:"+name, p.Harness.Templates[name]))
	}
	if rep.Inputs.SkillsEnvOverridesHashB64u != "" {
		es = append(es, pohEntry{EntryID: "skills:env-overrides", ContentHashB64u: rep.Inputs.SkillsEnvOverridesHashB64u})
	}
	for i, b := range rep.Inputs.Bootstrap {
		es = append(es, pohEntry{EntryID: fmt.Sprintf("bootstrap:%03d", i), ContentHashB64u: b.ContentHashB64u})
	}
	return es
}

// pohEntriesV2 lists the entries of a v2 rebuild: the harness entries as
// in v1, and for every pack input its salted commitment instead of its
// plain hash (docs/spec/report-v2.md section 6), so that the PoH
// commitment does not undo the salting.
func (p *Pack) pohEntriesV2(in *reportInputsV2) []pohEntry {
	es := []pohEntry{
		sized("harness:hardcoded-literals.json", p.Harness.Literals),
		sized("harness:core-tool-summaries.json", p.Harness.CoreToolSummaries),
	}
	if p.Harness.SigConfig != nil {
		es = append(es, sized("harness:sig-config.json", p.Harness.SigConfig))
	}
	for _, name := range templateNames(p.Harness) {
		es = append(es, sized("template:"+name, p.Harness.Templates[name]))
	}
	n := 0
	for _, c := range in.Commitments {
		id := "input:" + c.Kind + ":" + c.ID
		if c.Kind == kindBootstrap {
			// Paths are not revealed in PoH entry ids.
			id = fmt.Sprintf("input:bootstrap:%03d", n)
			n++
		}
		es = append(es, pohEntry{EntryID: id, ContentHashB64u: c.CommitmentB64u})
	}
	return es
}

// promptPack returns the PoH prompt_pack.v1 commitment of the rebuild,
// validated against the embedded PoH schema, and its JSON.stringify bytes.
func (rb *Rebuilt) promptPack() (*pohPromptPack, []byte, error) {
	es := slices.Clone(rb.entries)
	es = append(es, pohEntry{EntryID: "report:system_prompt_report.v1", ContentHashB64u: rb.ReportHashB64u()})
	if len(es) > maxPoHEntries {
		return nil, nil, fmt.Errorf("%w: %d prompt pack entries, at most %d", ErrInvalidReport, len(es), maxPoHEntries)
	}
	slices.SortFunc(es, func(a, b pohEntry) int { return jsstr.Compare(a.EntryID, b.EntryID) })
	for i := 1; i < len(es); i++ {
		if es[i].EntryID == es[i-1].EntryID {
			return nil, nil, fmt.Errorf("%w: duplicate entry id %q", ErrInvalidReport, safetext.Clip(es[i].EntryID, 64))
		}
	}
	root, err := promptRootHash(es)
	if err != nil {
		return nil, nil, err
	}
	doc := &pohPromptPack{
		PromptPackVersion:  "1",
		PromptPackID:       rb.PackID,
		HashAlgorithm:      "SHA-256",
		PromptRootHashB64u: root,
		Entries:            es,
	}
	raw, err := marshalValid(doc, schemas.PromptPackV1, ErrInvalidReport)
	if err != nil {
		return nil, nil, err
	}
	return doc, raw, nil
}

// marshalValid encodes v (pohjson) and validates it against schema; a
// failure of either is an error of class errClass.
func marshalValid(v any, schema string, errClass error) ([]byte, error) {
	raw, err := pohjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errClass, err)
	}
	if err := schemas.Validate(schema, raw); err != nil {
		return nil, fmt.Errorf("%w: %w", errClass, err)
	}
	return raw, nil
}

// promptRootHash computes prompt_root_hash_b64u as the PoH schema defines
// it: b64u(SHA-256(JSON.stringify({prompt_pack_version: "1", entries:
// sorted.map(({entry_id, content_hash_b64u}) => ({entry_id,
// content_hash_b64u}))}))), entries sorted by entry_id (UTF-16 order, as
// JavaScript's default sort).
func promptRootHash(entries []pohEntry) (string, error) {
	es := make([]poh.PromptPackEntry, len(entries))
	for i, e := range entries {
		es[i] = poh.PromptPackEntry{EntryID: e.EntryID, ContentHashB64u: e.ContentHashB64u}
	}
	h, err := poh.PromptRootHash(es)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidReport, err)
	}
	return h, nil
}

// CallRef identifies one llm_call event of a run.
type CallRef struct {
	EventID       string
	EventHashB64u string // optional
	Provider      string // optional
	Model         string // optional
}

// ReportCommitmentInput are the per-run values of a PoH
// system_prompt_report.v1 document.
type ReportCommitmentInput struct {
	ReportID string
	RunID    string
	AgentDID string
	IssuedAt time.Time
	Calls    []CallRef
}

// SystemPromptReportCommitment returns the PoH system_prompt_report.v1
// document a harness puts in its bundle metadata: every call's
// rendered_system_prompt_hash_b64u is the rebuilt prompt's hash and
// prompt_root_hash_b64u the root of promptPack. The document is validated
// against the embedded PoH schema; its JSON.stringify bytes are returned.
func (rb *Rebuilt) SystemPromptReportCommitment(in ReportCommitmentInput) (*poh.SystemPromptReportCommitment, []byte, error) {
	if in.IssuedAt.IsZero() {
		return nil, nil, fmt.Errorf("%w: issued_at is zero", errInvalidInput)
	}
	if len(in.Calls) == 0 {
		return nil, nil, fmt.Errorf("%w: no calls", errInvalidInput)
	}
	pp, _, err := rb.promptPack()
	if err != nil {
		return nil, nil, err
	}
	c := &poh.SystemPromptReportCommitment{
		SystemPromptReportVersion: "1",
		ReportID:                  in.ReportID,
		RunID:                     in.RunID,
		AgentDID:                  in.AgentDID,
		IssuedAt:                  in.IssuedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		HashAlgorithm:             "SHA-256",
		PromptRootHashB64u:        pp.PromptRootHashB64u,
		Calls:                     make([]poh.PromptCall, 0, len(in.Calls)),
	}
	for _, call := range in.Calls {
		c.Calls = append(c.Calls, poh.PromptCall{
			EventID:                      call.EventID,
			EventHashB64u:                call.EventHashB64u,
			Provider:                     call.Provider,
			Model:                        call.Model,
			RenderedSystemPromptHashB64u: rb.PromptHashB64u(),
		})
	}
	raw, err := marshalValid(c, schemas.PoHSystemPromptReportV1, errInvalidInput)
	if err != nil {
		return nil, nil, err
	}
	return c, raw, nil
}
