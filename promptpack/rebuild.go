package promptpack

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"

	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// Rebuilt is the result of a rebuild: the prompt (secret) and its
// hash-only report.
type Rebuilt struct {
	// Prompt is the exact UTF-8 bytes of the system prompt. It is secret:
	// call Wipe when done.
	Prompt []byte
	// Mode is the resolved prompt mode.
	Mode string
	// Report is the SystemPromptReport (v1, or v2 when the pack has
	// report salts); ReportJCS its canonical bytes and ReportHash their
	// SHA-256.
	Report     *Report
	ReportJCS  []byte
	ReportHash [32]byte
	// PackID is the pack id of the rebuilt pack (docs/spec section 3.4).
	PackID string

	entries []pohEntry // prompt_pack.v1 entries without the report entry

	// inputs are the report inputs with their contents (secret); set for
	// v2 and for Build. salts is a copy of the pack's report salts.
	inputs []reportInput
	salts  map[string][saltSize]byte
}

// ReportHashB64u returns b64u(ReportHash).
func (rb *Rebuilt) ReportHashB64u() string { return b64u.Encode(rb.ReportHash[:]) }

// PromptHashB64u returns the report's final.system_prompt_hash_b64u.
func (rb *Rebuilt) PromptHashB64u() string { return rb.Report.Final.SystemPromptHashB64u }

// Wipe zeroes the prompt, the input contents and the salts.
func (rb *Rebuilt) Wipe() {
	if rb != nil {
		clear(rb.Prompt)
		rb.Prompt = nil
		wipeInputs(rb.inputs)
		rb.inputs = nil
		for k := range rb.salts {
			rb.salts[k] = [saltSize]byte{}
		}
		rb.salts = nil
	}
}

// String describes the result without the prompt.
func (rb *Rebuilt) String() string {
	if rb == nil {
		return "promptpack.Rebuilt(nil)"
	}
	return fmt.Sprintf("promptpack.Rebuilt{report=%s}", rb.ReportHashB64u())
}

// GoString is String.
func (rb *Rebuilt) GoString() string { return rb.String() }

// Format prints String for every verb.
func (rb *Rebuilt) Format(f fmt.State, _ rune) { fmt.Fprint(f, rb.String()) }

// SigHashes returns the sig hash of every signed template of the pack
// (name -> "sha256:<hex>"). Used as the trusted list it only checks that
// the pack is self-consistent; trust is the opener's policy.
//
// For an openclaw-release pack it returns the one entry that trusts the
// pack's own OpenClaw release (ReleaseTrust).
func (p *Pack) SigHashes() (map[string]string, error) {
	if err := knownRecipe(p.Recipe); err != nil {
		return nil, err
	}
	if p.Recipe.ID == openclawrelease.ID {
		rel, err := openclawrelease.Lookup(p.Provenance.HarnessVersion)
		if err != nil {
			return nil, fmt.Errorf("promptpack: %w", err)
		}
		return ReleaseTrust(rel)
	}
	h, err := openclawsig.NewHarness(p.Harness)
	if err != nil {
		return nil, fmt.Errorf("promptpack: %w", err)
	}
	return sigHashes(h), nil
}

func sigHashes(h *openclawsig.Harness) map[string]string {
	out := map[string]string{}
	for _, name := range h.TemplateNames() {
		if s, ok := h.Sig(name); ok {
			out[name] = s.Hash
		}
	}
	return out
}

// Rebuild checks the templates against trusted (template name ->
// "sha256:<hex>"; nil trusts nothing), renders the prompt with the recipe the
// pack names, checks the resolved mode, and computes the report, which is
// validated against its schema. It reads no clock, environment or file.
func (p *Pack) Rebuild(trusted map[string]string) (*Rebuilt, error) {
	return p.rebuild(trusted, true, false)
}

// rebuild renders and reports; wantInputs keeps the input contents of a v1
// rebuild too (Build needs their selectors to salt them).
func (p *Pack) rebuild(trusted map[string]string, checkMode, wantInputs bool) (*Rebuilt, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil pack", errInvalidInput)
	}
	if err := knownRecipe(p.Recipe); err != nil {
		return nil, err
	}
	canon, err := p.Encode()
	if err != nil {
		return nil, err
	}
	packID := packID(canon)
	clear(canon)
	if p.Recipe.ID == openclawrelease.ID {
		return p.rebuildRelease(trusted, packID)
	}
	h, err := openclawsig.NewHarness(p.Harness)
	if err != nil {
		return nil, fmt.Errorf("promptpack: rebuild: %w", err)
	}
	res, err := openclawsig.Render(h, trusted, p.Params)
	if err != nil {
		return nil, fmt.Errorf("promptpack: rebuild: %w", err)
	}
	params := res.Params
	if checkMode && res.Mode != p.PromptMode {
		clear(res.Prompt)
		return nil, fmt.Errorf("%w: pack states %q, recipe resolved %q", ErrModeMismatch, safetext.Clip(p.PromptMode, 64), res.Mode)
	}
	if err := p.checkRawContextFiles(params); err != nil {
		clear(res.Prompt)
		return nil, err
	}
	rep, err := p.computeReport(h, params, res)
	if err != nil {
		clear(res.Prompt)
		return nil, err
	}
	var ins []reportInput
	if p.ReportSalts != nil || wantInputs {
		if ins, err = p.computeInputs(params, res); err != nil {
			clear(res.Prompt)
			return nil, err
		}
	}
	validate := validateReport
	if p.ReportSalts != nil {
		if rep, err = p.computeReportV2(rep, ins); err != nil {
			clear(res.Prompt)
			wipeInputs(ins)
			return nil, err
		}
		validate = validateReportV2
	}
	c, err := rep.canonical()
	if err == nil {
		err = validate(c)
	}
	if err != nil {
		clear(res.Prompt)
		wipeInputs(ins)
		return nil, err
	}
	rb := &Rebuilt{Prompt: res.Prompt, Mode: res.Mode, Report: rep, ReportJCS: c, ReportHash: sha(c), PackID: packID, inputs: ins}
	if p.ReportSalts != nil {
		rb.salts = make(map[string][saltSize]byte, len(p.ReportSalts))
		for k, v := range p.ReportSalts {
			rb.salts[k] = v
		}
	}
	rb.entries = p.pohEntries(rep)
	return rb, nil
}

// BuildOptions are the optional inputs of Build.
type BuildOptions struct {
	// Provenance is the builder identity; nil: DefaultProvenance.
	Provenance *Provenance
	// ToolSchemas is a JSON object: tool name -> JSON Schema object
	// sent to the model; nil: {}.
	ToolSchemas []byte
	// SkillsEnvOverrides is a JSON object of strings; nil: none.
	SkillsEnvOverrides []byte
	// RawContextFiles describes bootstrap files before truncation.
	RawContextFiles map[string]rawContextFile
	// Trusted template hashes; nil: the harness's own sig hashes, which
	// only checks consistency.
	Trusted map[string]string
	// ReportVersion selects the SystemPromptReport version the pack
	// produces: 0 or 1 for v1 (no salts), 2 for v2 (a fresh random salt
	// per input, docs/spec/report-v2.md).
	ReportVersion int
}

// maxAuxJSONSize bounds BuildOptions.ToolSchemas and SkillsEnvOverrides.
const maxAuxJSONSize = 8 << 20

// Build makes a pack from the resolved builder params (the exact bytes of a
// NAME.params.json), a harness directory laid out as the conformance folder
// (templates/, sigs/, hardcoded-literals.json, core-tool-summaries.json) and
// a recipe id. It rebuilds the prompt once to check the inputs and to record
// the resolved prompt mode.
func Build(params []byte, harnessDir, recipeID string, opts BuildOptions) (*Pack, error) {
	if recipeID != openclawsig.ID {
		return nil, fmt.Errorf("%w: %q", ErrUnknownRecipe, safetext.Clip(recipeID, 64))
	}
	prov := opts.Provenance
	if prov == nil {
		d, err := DefaultProvenance(recipeID)
		if err != nil {
			return nil, err
		}
		prov = &d
	}
	h, err := openclawsig.LoadHarnessDir(harnessDir)
	if err != nil {
		return nil, fmt.Errorf("promptpack: build: %w", err)
	}
	p := &Pack{
		Recipe:          RecipeRef{ID: openclawsig.ID, Version: openclawsig.Version},
		Provenance:      *prov,
		PromptMode:      "pending",
		Params:          bytes.Clone(params),
		Harness:         h.Files(),
		ToolSchemas:     map[string][]byte{},
		RawContextFiles: opts.RawContextFiles,
	}
	if opts.ToolSchemas != nil {
		if p.ToolSchemas, err = parseToolSchemas(opts.ToolSchemas); err != nil {
			return nil, err
		}
	}
	if opts.SkillsEnvOverrides != nil {
		if p.SkillsEnvOverrides, err = parseStringMap(opts.SkillsEnvOverrides); err != nil {
			return nil, err
		}
	}
	if opts.ReportVersion < 0 || opts.ReportVersion > 2 {
		return nil, fmt.Errorf("%w: report version %d", errInvalidInput, opts.ReportVersion)
	}
	trusted := opts.Trusted
	if trusted == nil {
		trusted = sigHashes(h)
	}
	rb, err := p.rebuild(trusted, false, opts.ReportVersion == 2)
	if err != nil {
		p.Wipe()
		return nil, err
	}
	p.PromptMode = rb.Mode
	sels := rb.inputSelectors()
	rb.Wipe()
	if opts.ReportVersion == 2 {
		if p.ReportSalts, err = newSalts(sels); err != nil {
			p.Wipe()
			return nil, err
		}
		// Check that the salted pack reports.
		rb, err := p.rebuild(trusted, true, false)
		if err != nil {
			p.Wipe()
			return nil, err
		}
		rb.Wipe()
	}
	return p, nil
}

// parseToolSchemas reads a JSON object of tool name -> schema object and
// returns each schema's JCS bytes.
func parseToolSchemas(data []byte) (map[string][]byte, error) {
	if len(data) > maxAuxJSONSize {
		return nil, fmt.Errorf("%w: tool schemas: %w", errInvalidInput, ErrTooLarge)
	}
	root, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: maxAuxJSONSize, AllowFloats: true})
	if err != nil {
		return nil, fmt.Errorf("%w: tool schemas: %w", errInvalidInput, err)
	}
	if root.Kind() != pohjson.Object {
		return nil, fmt.Errorf("%w: tool schemas: not an object", errInvalidInput)
	}
	if len(root.Members()) > maxToolSchemas {
		return nil, fmt.Errorf("%w: tool schemas: %w", errInvalidInput, ErrTooLarge)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: tool schemas: %v", errInvalidInput, err)
	}
	out := make(map[string][]byte, len(raw))
	for _, m := range root.Members() {
		if m.Value.Kind() != pohjson.Object {
			return nil, fmt.Errorf("%w: tool schema %q: not an object", errInvalidInput, safetext.Clip(m.Key, 64))
		}
		c, err := jcs.Canonicalize(raw[m.Key])
		if err != nil {
			return nil, fmt.Errorf("%w: tool schema %q: %v", errInvalidInput, safetext.Clip(m.Key, 64), err)
		}
		out[m.Key] = c
	}
	return out, nil
}

// parseStringMap reads a JSON object of strings.
func parseStringMap(data []byte) (map[string]string, error) {
	if len(data) > maxAuxJSONSize {
		return nil, fmt.Errorf("%w: skills env overrides: %w", errInvalidInput, ErrTooLarge)
	}
	root, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: maxAuxJSONSize})
	if err != nil {
		return nil, fmt.Errorf("%w: skills env overrides: %w", errInvalidInput, err)
	}
	if root.Kind() != pohjson.Object || len(root.Members()) > maxEnvOverrides {
		return nil, fmt.Errorf("%w: skills env overrides: not an object of at most %d strings", errInvalidInput, maxEnvOverrides)
	}
	out := make(map[string]string, len(root.Members()))
	for _, m := range root.Members() {
		s, ok := m.Value.Str()
		if !ok {
			return nil, fmt.Errorf("%w: skills env override %q: not a string", errInvalidInput, safetext.Clip(m.Key, 64))
		}
		out[m.Key] = s
	}
	return out, nil
}

// ParseTrusted parses a trusted template list: a JSON object of template
// name -> "sha256:<64 lower-case hex>", at most 64 KiB.
func ParseTrusted(data []byte) (map[string]string, error) {
	const max = 64 << 10
	if len(data) > max {
		return nil, fmt.Errorf("%w: trusted list: %w", errInvalidInput, ErrTooLarge)
	}
	root, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: max})
	if err != nil {
		return nil, fmt.Errorf("%w: trusted list: %w", errInvalidInput, err)
	}
	if root.Kind() != pohjson.Object {
		return nil, fmt.Errorf("%w: trusted list: not an object", errInvalidInput)
	}
	out := make(map[string]string, len(root.Members()))
	for _, m := range root.Members() {
		s, ok := m.Value.Str()
		if !ok || !validTaggedHash(s) {
			return nil, fmt.Errorf("%w: trusted list: %q: not sha256:<hex>", errInvalidInput, safetext.Clip(m.Key, 64))
		}
		out[m.Key] = s
	}
	return out, nil
}

func validTaggedHash(s string) bool {
	const p = "sha256:"
	return len(s) == len(p)+64 && s[:len(p)] == p && charclass.LowerHex().All(s[len(p):])
}

// equalHash compares two hashes in constant time.
func equalHash(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }

// newSalts draws an independent 32-byte salt for each selector from
// crypto/rand.
func newSalts(selectors []string) (map[string][saltSize]byte, error) {
	out := make(map[string][saltSize]byte, len(selectors))
	for _, sel := range selectors {
		var s [saltSize]byte
		if _, err := rand.Read(s[:]); err != nil {
			return nil, fmt.Errorf("promptpack: salt: %w", err)
		}
		out[sel] = s
	}
	return out, nil
}

// checkRawContextFiles refuses a raw_context_files entry whose key is not
// the path, byte for byte, of a context file of the params
// (promptpack-v1.md section 3.6): the report would drop it, so a pack
// could carry it, or a spelling of a real path ("./AGENTS.md"), beside
// the entry the report commits.
func (p *Pack) checkRawContextFiles(params *openclawsig.Params) error {
	if len(p.RawContextFiles) == 0 {
		return nil
	}
	paths := make(map[string]bool, len(params.ContextFiles))
	for _, f := range params.ContextFiles {
		paths[f.Path] = true
	}
	for path := range p.RawContextFiles {
		if !paths[path] {
			return ferr(jsonobj.Key("$.raw_context_files", path), fmt.Errorf("%w: names no context file of the params", errUnknownField))
		}
	}
	return nil
}
