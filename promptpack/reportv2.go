package promptpack

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/schema/schemas"
)

// ReportVersion2 is the report_version of SystemPromptReport v2, whose
// per-input commitments are salted (docs/spec/report-v2.md).
const ReportVersion2 = "2"

// inputCommitmentLabel separates the v2 input commitments from every other
// use of HMAC-SHA-256 or SHA-256 in this project.
const inputCommitmentLabel = "clawea.dev/promptpack/v2/input-commitment"

// Limits of report v2.
const (
	// saltSize is the size of a per-input salt.
	saltSize = 32
	// maxReportInputs bounds the committed inputs of a v2 report and the
	// pack's report_salts: every bootstrap file plus the fixed inputs.
	maxReportInputs = maxRawContextFiles + 16
	// maxInputIDLen bounds an input id in code points.
	maxInputIDLen = 1024
	// maxReportSize bounds a report document read by parseReportV2.
	maxReportSize = 1 << 20
)

// Input kinds of report v2.
const (
	kindParams    = "params"
	kindTools     = "tools"
	kindBootstrap = "bootstrap"
	kindSkills    = "skills"
	kindPrompt    = "prompt"
)

var (
	// errNotSalted: the pack or report is v1, whose commitments are not
	// salted; nothing can be revealed from it.
	errNotSalted = errors.New("promptpack: report is not salted (v1)")
	// errUnknownInput: a selector names no input of the report.
	errUnknownInput = errors.New("promptpack: no such report input")
	// errSalts: the pack's report_salts do not match its inputs one to one.
	errSalts = errors.New("promptpack: report salts do not match the inputs")
)

func knownKind(k string) bool {
	switch k {
	case kindParams, kindTools, kindBootstrap, kindSkills, kindPrompt:
		return true
	}
	return false
}

// selectorOf returns "kind:id".
func selectorOf(kind, id string) string { return kind + ":" + id }

// ParseSelector splits "kind:id" at the first colon and checks that kind is
// a v2 input kind and id is 1 to maxInputIDLen code points of valid UTF-8.
func ParseSelector(s string) (kind, id string, err error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok || !knownKind(kind) {
		return "", "", fmt.Errorf("%w: selector %q: not kind:id with a known kind", errUnknownInput, safetext.Clip(s, 64))
	}
	if err := checkInputID(id); err != nil {
		return "", "", fmt.Errorf("%w: selector %q: %w", errUnknownInput, safetext.Clip(s, 64), err)
	}
	return kind, id, nil
}

func checkInputID(id string) error {
	if id == "" || !utf8.ValidString(id) || utf8.RuneCountInString(id) > maxInputIDLen {
		return fmt.Errorf("%w: input id", errWrongType)
	}
	return nil
}

// inputCommitment is the v2 commitment to one input:
//
//	HMAC-SHA-256(key = salt, label || 0x00 || len(kind) || kind ||
//	             len(id) || id || len(content) || content)
//
// with each len an 8-byte big-endian byte count (docs/spec/report-v2.md
// section 3).
func inputCommitment(salt [saltSize]byte, kind, id string, content []byte) [32]byte {
	m := hmac.New(sha256.New, salt[:])
	m.Write([]byte(inputCommitmentLabel))
	m.Write([]byte{0})
	var n [8]byte
	for _, part := range [][]byte{[]byte(kind), []byte(id), content} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		m.Write(n[:])
		m.Write(part)
	}
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// reportInputsV2 are the inputs of a v2 report: the harness identity
// (public, unsalted) and one salted commitment per pack input.
type reportInputsV2 struct {
	Templates                 []reportTemplate `json:"templates"`
	HardcodedLiteralsHashB64u string           `json:"hardcoded_literals_hash_b64u"`
	CoreToolSummariesHashB64u string           `json:"core_tool_summaries_hash_b64u"`
	Commitments               []inputCommit    `json:"commitments"`
}

// inputCommit is one committed input of a v2 report. Chars, Truncated and
// MaxChars are set for bootstrap inputs only.
type inputCommit struct {
	Kind           string `json:"kind"`
	ID             string `json:"id"`
	CommitmentB64u string `json:"commitment_b64u"`
	Chars          *int   `json:"chars,omitempty"`
	Truncated      *bool  `json:"truncated,omitempty"`
	MaxChars       *int64 `json:"max_chars,omitempty"`
}

// reportAlias marshals a v1 report exactly as before v2 existed.
type reportAlias Report

type reportV2Wire struct {
	ReportVersion string          `json:"report_version"`
	Harness       reportHarness   `json:"harness"`
	PromptMode    string          `json:"prompt_mode"`
	Builder       reportBuilder   `json:"builder"`
	Recipe        reportRecipe    `json:"recipe"`
	Final         reportFinal     `json:"final"`
	Inputs        *reportInputsV2 `json:"inputs"`
}

// MarshalJSON writes a v1 report (V2 nil) with its v1 members, and a v2
// report (ReportVersion "2", V2 set) with Inputs replaced by V2.
func (r Report) MarshalJSON() ([]byte, error) {
	switch {
	case r.ReportVersion == ReportVersion2 && r.V2 != nil:
		if r.RunID != "" {
			return nil, fmt.Errorf("%w: v2 has no run_id", ErrInvalidReport)
		}
		return json.Marshal(reportV2Wire{
			ReportVersion: r.ReportVersion, Harness: r.Harness, PromptMode: r.PromptMode,
			Builder: r.Builder, Recipe: r.Recipe, Final: r.Final, Inputs: r.V2,
		})
	case r.ReportVersion != ReportVersion2 && r.V2 == nil:
		return json.Marshal(reportAlias(r))
	}
	return nil, fmt.Errorf("%w: report_version %q with v2 inputs %t", ErrInvalidReport, safetext.Clip(r.ReportVersion, 16), r.V2 != nil)
}

// reportInput is one input of a rebuild with the exact bytes its
// commitment covers (secret).
type reportInput struct {
	kind, id  string
	content   []byte
	chars     *int
	truncated *bool
	maxChars  *int64
}

func (in *reportInput) selector() string { return selectorOf(in.kind, in.id) }

// computeInputs lists the inputs a v2 report commits to, in report order,
// with the same bytes as the v1 hashes (docs/spec/report-v2.md section 4).
// The contents are copies: wipe them when done.
func (p *Pack) computeInputs(params *openclawsig.Params, res *openclawsig.Result) ([]reportInput, error) {
	var out []reportInput
	add := func(kind, id string, content []byte) *reportInput {
		out = append(out, reportInput{kind: kind, id: id, content: content})
		return &out[len(out)-1]
	}
	add(kindParams, "params.json", bytes.Clone(p.Params))
	names, schemas, summaries, err := p.reportTools(params, res)
	if err != nil {
		return nil, err
	}
	add(kindTools, "resolved_names", names)
	add(kindTools, "schemas", schemas)
	add(kindTools, "summaries", summaries)
	if len(res.ContextFiles) > maxRawContextFiles {
		return nil, fmt.Errorf("%w: more than %d context files", ErrInvalidReport, maxRawContextFiles)
	}
	seen := map[string]bool{}
	for _, f := range res.ContextFiles {
		if err := checkInputID(f.Path); err != nil {
			return nil, fmt.Errorf("%w: a context file path is empty or longer than %d code points", ErrInvalidReport, maxInputIDLen)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("%w: context file %q rendered twice", ErrInvalidReport, safetext.Clip(f.Path, 64))
		}
		seen[f.Path] = true
		in := add(kindBootstrap, f.Path, bytes.Clone(f.Content))
		chars, truncated := f.Chars, false
		in.chars, in.truncated = &chars, &truncated
		if rc, ok := p.RawContextFiles[f.Path]; ok {
			truncated = rc.Truncated
			in.maxChars = rc.MaxChars
		}
	}
	if res.SkillsPrompt != "" {
		add(kindSkills, "prompt", []byte(res.SkillsPrompt))
	}
	if p.SkillsEnvOverrides != nil {
		c, err := canonicalJCS(p.SkillsEnvOverrides)
		if err != nil {
			return nil, err
		}
		add(kindSkills, "env_overrides", c)
	}
	if res.ExtraSystemPrompt != "" {
		add(kindPrompt, "extra_system_prompt", []byte(res.ExtraSystemPrompt))
	}
	if res.RuntimeLine != "" {
		add(kindPrompt, "runtime_line", []byte(res.RuntimeLine))
	}
	err = p.paramSections(func(key string, v *pohjson.Value) error {
		c, err := canonicalValueJCS(v)
		if err != nil {
			return err
		}
		add(kindParams, key, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) > maxReportInputs {
		wipeInputs(out)
		return nil, fmt.Errorf("%w: more than %d inputs", ErrInvalidReport, maxReportInputs)
	}
	return out, nil
}

func wipeInputs(ins []reportInput) {
	for i := range ins {
		clear(ins[i].content)
		ins[i].content = nil
	}
}

// computeReportV2 builds the v2 report from the v1 header fields, the
// harness identity and the salted commitments of ins. Every input MUST have
// a salt in the pack and every salt MUST name an input.
func (p *Pack) computeReportV2(v1 *Report, ins []reportInput) (*Report, error) {
	if len(p.ReportSalts) != len(ins) {
		return nil, fmt.Errorf("%w: %d salts for %d inputs", errSalts, len(p.ReportSalts), len(ins))
	}
	rep := &Report{
		ReportVersion: ReportVersion2, Harness: v1.Harness, PromptMode: v1.PromptMode,
		Builder: v1.Builder, Recipe: v1.Recipe, Final: v1.Final,
		V2: &reportInputsV2{
			Templates:                 v1.Inputs.Templates,
			HardcodedLiteralsHashB64u: v1.Inputs.HardcodedLiteralsHashB64u,
			CoreToolSummariesHashB64u: v1.Inputs.CoreToolSummariesHashB64u,
			Commitments:               make([]inputCommit, 0, len(ins)),
		},
	}
	for i := range ins {
		in := &ins[i]
		salt, ok := p.ReportSalts[in.selector()]
		if !ok {
			return nil, fmt.Errorf("%w: input %q has no salt", errSalts, safetext.Clip(in.selector(), 80))
		}
		c := inputCommitment(salt, in.kind, in.id, in.content)
		rep.V2.Commitments = append(rep.V2.Commitments, inputCommit{
			Kind: in.kind, ID: in.id, CommitmentB64u: b64u.Encode(c[:]),
			Chars: in.chars, Truncated: in.truncated, MaxChars: in.maxChars,
		})
	}
	return rep, nil
}

// validateReportV2 checks report JSON against schemas.SystemPromptReportV2.
func validateReportV2(doc []byte) error {
	if err := schemas.Validate(schemas.SystemPromptReportV2, doc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	return nil
}

// parsedReportV2 is a v2 report read by parseReportV2: the commitments a
// disclosure is checked against, and the report hash.
type parsedReportV2 struct {
	// Hash is SHA-256 of the report bytes (which are canonical).
	Hash [32]byte
	// Commitments maps "kind:id" to the commitment.
	Commitments map[string][32]byte
	// SystemPromptHashB64u is final.system_prompt_hash_b64u.
	SystemPromptHashB64u string
}

// parseReportV2 reads a SystemPromptReport v2: at most maxReportSize bytes,
// valid against its JSON Schema, in JCS canonical form (so its hash is the
// hash of exactly the bytes received), with distinct (kind, id) pairs.
// A v1 report is refused with errNotSalted.
func parseReportV2(data []byte) (*parsedReportV2, error) {
	if len(data) > maxReportSize {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReport, ErrTooLarge)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxReportSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	if v, ok := root.GetString("report_version"); ok && v == reportVersion {
		return nil, errNotSalted
	}
	if err := validateReportV2(data); err != nil {
		return nil, err
	}
	if err := requireJCS(data, ErrInvalidReport); err != nil {
		return nil, err
	}
	r := &jsonobj.Reader{}
	out := &parsedReportV2{Hash: sha256.Sum256(data), Commitments: map[string][32]byte{}}
	final := root.Get("final")
	out.SystemPromptHashB64u, _ = r.Str(final.Get("system_prompt_hash_b64u"), "$.final.system_prompt_hash_b64u")
	cs := r.Array(root.Get("inputs").Get("commitments"), "$.inputs.commitments", 1, maxReportInputs)
	for i, c := range cs {
		path := jsonobj.Index("$.inputs.commitments", i)
		f := r.Object(c, path, map[string]bool{"kind": true, "id": true, "commitment_b64u": true, "chars": false, "truncated": false, "max_chars": false})
		kind, _ := r.Str(f["kind"], path+".kind")
		id, _ := r.Str(f["id"], path+".id")
		cb := r.B64u(f["commitment_b64u"], path+".commitment_b64u", 32)
		if r.Err() != nil {
			break
		}
		if !knownKind(kind) || checkInputID(id) != nil {
			r.Fail(path, fmt.Errorf("%w: kind or id", errWrongType))
			break
		}
		sel := selectorOf(kind, id)
		if _, dup := out.Commitments[sel]; dup {
			r.Fail(path, fmt.Errorf("%w: duplicate input %q", errWrongType, safetext.Clip(sel, 80)))
			break
		}
		out.Commitments[sel] = [32]byte(cb)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	return out, nil
}

// saltedInput is one input of a v2 rebuild with its salt: what a disclosure
// reveals. Content is secret until disclosed.
type saltedInput struct {
	Kind, ID string
	Content  []byte
	Salt     [saltSize]byte
}

// reveal returns the input named by selector ("kind:id") with its content
// and salt. It refuses a v1 rebuild (errNotSalted) and an unknown input
// (errUnknownInput). The content is a copy.
func (rb *Rebuilt) reveal(selector string) (*saltedInput, error) {
	if rb == nil || rb.Report == nil || rb.Report.ReportVersion != ReportVersion2 {
		return nil, errNotSalted
	}
	kind, id, err := ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	for i := range rb.inputs {
		in := &rb.inputs[i]
		if in.kind == kind && in.id == id {
			salt, ok := rb.salts[in.selector()]
			if !ok {
				return nil, fmt.Errorf("%w: input %q", errSalts, safetext.Clip(selector, 80))
			}
			return &saltedInput{Kind: kind, ID: id, Content: bytes.Clone(in.content), Salt: salt}, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", errUnknownInput, safetext.Clip(selector, 80))
}

// inputSelectors lists the "kind:id" of every input of the rebuild, in
// report order (v1 and v2).
func (rb *Rebuilt) inputSelectors() []string {
	out := make([]string, 0, len(rb.inputs))
	for i := range rb.inputs {
		out = append(out, rb.inputs[i].selector())
	}
	return out
}
