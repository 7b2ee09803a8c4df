package promptpack

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// reportVersion is the report_version of SystemPromptReport.v1.
const reportVersion = "1"

// Report is clawea's SystemPromptReport.v1 (schemas.SystemPromptReportV1)
// or, when ReportVersion is "2", v2 (schemas.SystemPromptReportV2, salted
// commitments, docs/spec/report-v2.md): hash-only, never plaintext. Its canonical form is JCS and its hash
// b64u(SHA-256(JCS(report))). Each hash input is specified in
// docs/spec/promptpack-v1.md section 4.1.
type Report struct {
	ReportVersion string        `json:"report_version"`
	RunID         string        `json:"run_id,omitempty"`
	Harness       reportHarness `json:"harness"`
	PromptMode    string        `json:"prompt_mode"`
	Builder       reportBuilder `json:"builder"`
	Recipe        reportRecipe  `json:"recipe"`
	Final         reportFinal   `json:"final"`
	// Inputs are the v1 inputs; unused in v2.
	Inputs reportInputs `json:"inputs"`
	// V2 holds the inputs of a v2 report (ReportVersion "2"); nil in v1.
	// MarshalJSON writes it as "inputs".
	V2 *reportInputsV2 `json:"-"`
}

// reportHarness is report.harness.
type reportHarness struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// reportBuilder is report.builder.
type reportBuilder struct {
	Name           string `json:"name"`
	BuilderVersion string `json:"builder_version"`
}

// reportRecipe is report.recipe.
type reportRecipe struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// reportFinal describes the rebuilt prompt.
type reportFinal struct {
	// SystemPromptHashB64u is b64u(SHA-256(exact prompt bytes)).
	SystemPromptHashB64u string `json:"system_prompt_hash_b64u"`
	// SystemPromptChars is the prompt's UTF-16 length (JS .length).
	SystemPromptChars int `json:"system_prompt_chars"`
}

// reportTemplate is one template and its sig hash.
type reportTemplate struct {
	Name string `json:"name"`
	Hash string `json:"hash"` // "sha256:<hex>"
}

// bootstrapEntry describes one rendered context file.
type bootstrapEntry struct {
	PathHint           string `json:"path_hint,omitempty"`
	PathHashB64u       string `json:"path_hash_b64u,omitempty"`
	ContentHashB64u    string `json:"content_hash_b64u"`
	RawContentHashB64u string `json:"raw_content_hash_b64u,omitempty"`
	Chars              int    `json:"chars"`
	Truncated          bool   `json:"truncated"`
	MaxChars           *int64 `json:"max_chars,omitempty"`
}

// reportInputs holds the per-input hashes.
type reportInputs struct {
	ParamsHashB64u             string           `json:"params_hash_b64u"`
	Templates                  []reportTemplate `json:"templates"`
	HardcodedLiteralsHashB64u  string           `json:"hardcoded_literals_hash_b64u,omitempty"`
	CoreToolSummariesHashB64u  string           `json:"core_tool_summaries_hash_b64u,omitempty"`
	ResolvedToolNamesHashB64u  string           `json:"resolved_tool_names_hash_b64u"`
	ToolSchemasHashB64u        string           `json:"tool_schemas_hash_b64u"`
	ToolSummariesHashB64u      string           `json:"tool_summaries_hash_b64u"`
	Bootstrap                  []bootstrapEntry `json:"bootstrap"`
	SkillsPromptHashB64u       string           `json:"skills_prompt_hash_b64u,omitempty"`
	SkillsEnvOverridesHashB64u string           `json:"skills_env_overrides_hash_b64u,omitempty"`
	ExtraSystemPromptHashB64u  string           `json:"extra_system_prompt_hash_b64u,omitempty"`
	SandboxContextHashB64u     string           `json:"sandbox_context_hash_b64u,omitempty"`
	RuntimeLineHashB64u        string           `json:"runtime_line_hash_b64u,omitempty"`
	TimeContextHashB64u        string           `json:"time_context_hash_b64u,omitempty"`
	OwnerNumbersHashB64u       string           `json:"owner_numbers_hash_b64u,omitempty"`
	MessagingHintsHashB64u     string           `json:"messaging_hints_hash_b64u,omitempty"`
	TTSHintsHashB64u           string           `json:"tts_hints_hash_b64u,omitempty"`
	ModelAliasesHashB64u       string           `json:"model_aliases_hash_b64u,omitempty"`
}

// canonical returns JCS(report).
func (r *Report) canonical() ([]byte, error) {
	return canonicalJCS(r)
}

// validateReport checks report JSON against schemas.SystemPromptReportV1.
func validateReport(doc []byte) error {
	if err := schemas.Validate(schemas.SystemPromptReportV1, doc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	return nil
}

// canonicalJCS returns JCS(json.Marshal(v)): the bytes of a JSON report
// input, which a v1 report hashes and a v2 report carries.
func canonicalJCS(v any) ([]byte, error) {
	c, err := jcs.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidReport, err)
	}
	return c, nil
}

// canonicalValueJCS is canonicalJCS for a parsed params value, written as
// JSON.stringify writes it.
func canonicalValueJCS(v *pohjson.Value) ([]byte, error) {
	raw, err := pohjson.Stringify(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidReport, err)
	}
	defer clear(raw)
	c, err := jcs.Canonicalize(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidReport, err)
	}
	return c, nil
}

// hashJCS returns b64u(SHA-256(JCS(json.Marshal(v)))).
func hashJCS(v any) (string, error) {
	c, err := canonicalJCS(v)
	if err != nil {
		return "", err
	}
	return b64u.SHA256(c), nil
}

// hashValueJCS returns b64u(SHA-256(JCS(v))) for a parsed params value.
func hashValueJCS(v *pohjson.Value) (string, error) {
	c, err := canonicalValueJCS(v)
	if err != nil {
		return "", err
	}
	return b64u.SHA256(c), nil
}

// reportTools returns the JCS forms of a report's three tool inputs: the
// resolved tool names ([] when none), the pack's tool schemas and the tool
// summaries (name and summary of each). A v1 report hashes them, a v2
// report carries them (docs/spec/report-v2.md section 4).
func (p *Pack) reportTools(params *openclawsig.Params, res *openclawsig.Result) (names, schemas, summaries []byte, err error) {
	toolNames := res.ToolNames
	if toolNames == nil {
		toolNames = []string{}
	}
	if names, err = canonicalJCS(toolNames); err != nil {
		return nil, nil, nil, err
	}
	if schemas, err = p.toolSchemasJCS(); err != nil {
		return nil, nil, nil, err
	}
	type summary struct {
		Name    string `json:"name"`
		Summary string `json:"summary"`
	}
	sums := make([]summary, 0, len(params.ToolSummaries))
	for _, s := range params.ToolSummaries {
		sums = append(sums, summary{Name: s.Name, Summary: s.Summary})
	}
	if summaries, err = canonicalJCS(sums); err != nil {
		return nil, nil, nil, err
	}
	return names, schemas, summaries, nil
}

// computeReport builds the report of one rebuild.
func (p *Pack) computeReport(h *openclawsig.Harness, params *openclawsig.Params, res *openclawsig.Result) (*Report, error) {
	rep := &Report{
		ReportVersion: reportVersion,
		Harness:       reportHarness{ID: p.Provenance.HarnessID, Version: p.Provenance.HarnessVersion, Commit: p.Provenance.HarnessCommit},
		PromptMode:    res.Mode,
		Builder:       reportBuilder{Name: p.Provenance.BuilderName, BuilderVersion: p.Provenance.BuilderVersion},
		Recipe:        reportRecipe{ID: p.Recipe.ID, Version: p.Recipe.Version},
		Final:         reportFinal{SystemPromptHashB64u: b64u.SHA256(res.Prompt), SystemPromptChars: res.PromptChars},
	}
	in := &rep.Inputs
	in.ParamsHashB64u = b64u.SHA256(p.Params)
	in.HardcodedLiteralsHashB64u = b64u.SHA256(p.Harness.Literals)
	in.CoreToolSummariesHashB64u = b64u.SHA256(p.Harness.CoreToolSummaries)
	names := h.TemplateNames() // sorted; names are ASCII
	in.Templates = make([]reportTemplate, 0, len(names))
	for _, name := range names {
		sig, ok := h.Sig(name)
		if !ok {
			// Render refuses unsigned templates; never here.
			return nil, fmt.Errorf("%w: template %q unsigned", ErrInvalidReport, name)
		}
		in.Templates = append(in.Templates, reportTemplate{Name: name, Hash: sig.Hash})
	}
	toolNames, schemas, summaries, err := p.reportTools(params, res)
	if err != nil {
		return nil, err
	}
	in.ResolvedToolNamesHashB64u = b64u.SHA256(toolNames)
	in.ToolSchemasHashB64u = b64u.SHA256(schemas)
	in.ToolSummariesHashB64u = b64u.SHA256(summaries)
	if len(res.ContextFiles) > maxRawContextFiles {
		return nil, fmt.Errorf("%w: more than %d context files", ErrInvalidReport, maxRawContextFiles)
	}
	in.Bootstrap = make([]bootstrapEntry, 0, len(res.ContextFiles))
	for _, f := range res.ContextFiles {
		e := bootstrapEntry{ContentHashB64u: b64u.SHA256(f.Content), Chars: f.Chars}
		if n := utf8.RuneCountInString(f.Path); n >= 1 && n <= 1024 {
			e.PathHint = f.Path
		} else {
			e.PathHashB64u = b64u.SHA256([]byte(f.Path))
		}
		if rc, ok := p.RawContextFiles[f.Path]; ok {
			e.RawContentHashB64u = b64u.Encode(rc.RawContentHash[:])
			e.Truncated = rc.Truncated
			e.MaxChars = rc.MaxChars
		}
		in.Bootstrap = append(in.Bootstrap, e)
	}
	if res.SkillsPrompt != "" {
		in.SkillsPromptHashB64u = b64u.SHA256([]byte(res.SkillsPrompt))
	}
	if in.SkillsEnvOverridesHashB64u, _, err = p.SkillsEnvOverridesHash(); err != nil {
		return nil, err
	}
	if res.ExtraSystemPrompt != "" {
		in.ExtraSystemPromptHashB64u = b64u.SHA256([]byte(res.ExtraSystemPrompt))
	}
	if res.RuntimeLine != "" {
		in.RuntimeLineHashB64u = b64u.SHA256([]byte(res.RuntimeLine))
	}
	// Per-section hashes of raw params values (JCS of the value).
	err = p.paramSections(func(key string, v *pohjson.Value) (err error) {
		switch key {
		case "sandboxInfo":
			in.SandboxContextHashB64u, err = hashValueJCS(v)
		case "userTimezone":
			in.TimeContextHashB64u, err = hashValueJCS(pohjson.NewObject(pohjson.M("userTimezone", v)))
		case "ownerNumbers":
			in.OwnerNumbersHashB64u, err = hashValueJCS(v)
		case "messageToolHints":
			in.MessagingHintsHashB64u, err = hashValueJCS(v)
		case "ttsHint":
			in.TTSHintsHashB64u, err = hashValueJCS(v)
		case "modelAliasLines":
			in.ModelAliasesHashB64u, err = hashValueJCS(v)
		default:
			err = fmt.Errorf("%w: no v1 report field for params.%s", ErrInvalidReport, key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// reportParams are the params members a report commits to one by one, each
// only when present with its kind. A v1 report hashes JCS(value), except
// userTimezone, whose time context hash is of {"userTimezone": value}; a
// v2 report carries JCS(value) under the member name.
var reportParams = [...]struct {
	key  string
	kind pohjson.Kind
}{
	{"sandboxInfo", pohjson.Object},
	{"userTimezone", pohjson.String},
	{"ownerNumbers", pohjson.Array},
	{"messageToolHints", pohjson.Array},
	{"ttsHint", pohjson.String},
	{"modelAliasLines", pohjson.Array},
}

// paramSections parses the pack's params and calls fn, in reportParams
// order, for each reportParams member present with its kind.
func (p *Pack) paramSections(fn func(key string, v *pohjson.Value) error) error {
	root, err := pohjson.ParseWith(p.Params, pohjson.ParseOptions{MaxBytes: openclawsig.MaxParamsSize})
	if err != nil {
		return fmt.Errorf("%w: params: %v", ErrInvalidReport, err)
	}
	for _, s := range reportParams {
		v := root.Get(s.key)
		if v.Kind() != s.kind {
			continue
		}
		if err := fn(s.key, v); err != nil {
			return err
		}
	}
	return nil
}

// ToolSchemasHash returns the report's tool_schemas_hash_b64u:
// b64u(SHA-256(JCS(tool_schemas))). Admission policies pin it.
func (p *Pack) ToolSchemasHash() (string, error) { return p.toolSchemasHash() }

// SkillsEnvOverridesHash returns the report's
// skills_env_overrides_hash_b64u, b64u(SHA-256(JCS(skills_env_overrides))),
// and false when the pack has no skills_env_overrides.
func (p *Pack) SkillsEnvOverridesHash() (string, bool, error) {
	if p.SkillsEnvOverrides == nil {
		return "", false, nil
	}
	h, err := hashJCS(p.SkillsEnvOverrides)
	return h, err == nil, err
}

// toolSchemasHash is b64u(SHA-256(JCS(tool_schemas))).
func (p *Pack) toolSchemasHash() (string, error) {
	c, err := p.toolSchemasJCS()
	if err != nil {
		return "", err
	}
	return b64u.SHA256(c), nil
}

// toolSchemasJCS is JCS(tool_schemas).
func (p *Pack) toolSchemasJCS() ([]byte, error) {
	m := make(map[string]json.RawMessage, len(p.ToolSchemas))
	for k, v := range p.ToolSchemas {
		m[k] = json.RawMessage(v)
	}
	return canonicalJCS(m)
}

// templateEntries returns the sorted template names.
func templateNames(f openclawsig.HarnessFiles) []string {
	names := make([]string, 0, len(f.Templates))
	for n := range f.Templates {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func sha(b []byte) [32]byte { return sha256.Sum256(b) }
