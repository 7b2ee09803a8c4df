// Package promptpack implements the plaintext prompt pack (format
// clawea.dev/promptpack/v1/pack), the SystemPromptReport.v1 computed by
// rebuilding the system prompt from it, the PoH prompt commitments derived
// from both, and helpers that seal a pack into, and open it from, the
// prompt-pack envelope (package envelope) through sealed memory.
//
// The normative specification is docs/spec/promptpack-v1.md.
//
// The flow on the author's side is Build (or Parse), Rebuild, SealPack; on
// the attester's side OpenPack, then Opened.Rebuild with the trusted
// template hashes of its policy, which also compares the report hash with
// the committed one.
//
// A v2 report's inputs can be revealed selectively: Rebuilt.Disclose writes
// a disclosure document (docs/spec/disclosure-v1.md) and VerifyDisclosure
// checks one against the report (disclosure.go).
package promptpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// Labels. Each is used for exactly one purpose.
const (
	// packVersion is the value of "pack_version", the first member of
	// every pack.
	packVersion = "clawea.dev/promptpack/v1/pack"
	// packIDLabel separates the pack id hash from every other hash.
	packIDLabel = "clawea.dev/promptpack/v1/pack-id"
	// packIDPrefix starts every pack id.
	packIDPrefix = "pack:"
)

// Limits of format v1.
const (
	// maxPackSize bounds the canonical pack bytes.
	maxPackSize = jcs.MaxBytes
	// maxToolSchemas bounds the tool_schemas entries.
	maxToolSchemas = 1024
	// maxEnvOverrides bounds the skills_env_overrides entries.
	maxEnvOverrides = 1024
	// maxRawContextFiles bounds raw_context_files and the reported
	// bootstrap entries.
	maxRawContextFiles = 256
	// maxIdentityLen bounds provenance strings (builder_name: 2x).
	maxIdentityLen = 64
	maxRecipeIDLen = 64
	maxRecipeVer   = 32
	maxModeLen     = 32
)

// Errors. Parse errors are *fieldError values that match ErrMalformed and
// a more specific sentinel with errors.Is.
var (
	// ErrMalformed: the pack is not v1 syntax.
	ErrMalformed = errors.New("promptpack: malformed pack")
	// ErrUnknownVersion: pack_version is missing or not PackVersion.
	ErrUnknownVersion = errors.New("promptpack: unknown pack version")
	// errUnknownField: a member the format does not define. It is
	// jsonobj.ErrUnknownField.
	errUnknownField = jsonobj.ErrUnknownField
	// errMissingField: a required member is absent. It is
	// jsonobj.ErrMissingField.
	errMissingField = jsonobj.ErrMissingField
	// errWrongType: a member has another JSON type, or an invalid value.
	// It is jsonobj.ErrWrongType.
	errWrongType = jsonobj.ErrWrongType
	// ErrTooLarge: an input exceeds a size or count limit. It is
	// jsonobj.ErrTooLarge.
	ErrTooLarge = jsonobj.ErrTooLarge
	// errNotCanonical: the bytes are not the JCS canonical form.
	errNotCanonical = errors.New("promptpack: pack is not in canonical form")
	// ErrUnknownRecipe: the pack names a recipe id or version this build
	// does not implement.
	ErrUnknownRecipe = errors.New("recipe: unknown recipe")
	// ErrModeMismatch: the rebuild resolved another prompt mode than the
	// pack states.
	ErrModeMismatch = errors.New("promptpack: prompt mode mismatch")
	// ErrPackIDMismatch: the decrypted pack's id is not the envelope's.
	ErrPackIDMismatch = errors.New("promptpack: pack id mismatch")
	// ErrReportMismatch: the rebuilt report hash is not the committed one.
	ErrReportMismatch = errors.New("promptpack: report hash mismatch")
	// ErrInvalidReport: the computed report or commitment cannot be
	// represented (limits) or does not validate against its schema.
	ErrInvalidReport = errors.New("promptpack: invalid report")
	// errInvalidInput: an argument to Build, SealPack or a commitment
	// helper is not acceptable.
	errInvalidInput = errors.New("promptpack: invalid input")
)

// fieldError reports where a pack was refused. Field is a JSON path such as
// `$.sources.templates["x.txt"].text` (jsonobj syntax); it never holds a
// value.
type fieldError struct {
	Field string
	Err   error
}

func (e *fieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("promptpack: malformed pack: %v", e.Err)
	}
	return fmt.Sprintf("promptpack: malformed pack: %s: %v", e.Field, e.Err)
}

// Unwrap returns ErrMalformed and the specific reason.
func (e *fieldError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// RecipeRef names a recipe and the version of its rules.
type RecipeRef struct {
	ID      string
	Version string
}

// Provenance is the builder identity carried in the pack and copied into
// the report.
type Provenance struct {
	HarnessID      string // e.g. "openclaw"
	HarnessVersion string // e.g. "2026.2.4"
	HarnessCommit  string // git commit or release build hash
	BuilderName    string // e.g. "buildAgentSystemPrompt"
	BuilderVersion string // e.g. "openclaw-sig/1"
}

// rawContextFile describes a bootstrap file before truncation.
type rawContextFile struct {
	RawContentHash [32]byte // SHA-256 of the file before truncation
	Truncated      bool
	MaxChars       *int64 // truncation limit in UTF-16 units; nil: not stated
}

// Pack is a parsed prompt pack. Its byte fields are secret: call Wipe when
// done. A Pack does not print its contents.
type Pack struct {
	Recipe     RecipeRef
	Provenance Provenance
	// PromptMode is the mode the recipe must resolve.
	PromptMode string
	// Params are the exact bytes of the recipe's params JSON.
	Params []byte
	// Harness is the harness data (templates, sigs, literals, summaries).
	Harness openclawsig.HarnessFiles
	// ToolSchemas maps a tool name to the JCS bytes of its JSON Schema
	// object.
	ToolSchemas map[string][]byte
	// SkillsEnvOverrides is nil when the pack has none.
	SkillsEnvOverrides map[string]string
	// RawContextFiles is keyed by context-file path; nil when absent.
	RawContextFiles map[string]rawContextFile
	// ReportSalts maps each report input ("kind:id") to its 32-byte salt;
	// nil: the pack produces SystemPromptReport.v1, otherwise v2
	// (docs/spec/report-v2.md). The salts are secret: they never leave the
	// sealed pack except in a disclosure of their own input.
	ReportSalts map[string][saltSize]byte
}

// String describes the pack without its contents.
func (p *Pack) String() string {
	if p == nil {
		return "promptpack.Pack(nil)"
	}
	return fmt.Sprintf("promptpack.Pack{recipe=%s/%s templates=%d}", p.Recipe.ID, p.Recipe.Version, len(p.Harness.Templates))
}

// GoString is String.
func (p *Pack) GoString() string { return p.String() }

// Format prints String for every verb.
func (p *Pack) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

// Wipe zeroes the pack's byte fields (best effort: Go strings such as map
// keys cannot be zeroed).
func (p *Pack) Wipe() {
	if p == nil {
		return
	}
	wipe := func(b []byte) { clear(b) }
	wipe(p.Params)
	for _, m := range []map[string][]byte{p.Harness.Templates, p.Harness.Sigs, p.ToolSchemas} {
		for _, v := range m {
			wipe(v)
		}
	}
	wipe(p.Harness.SigConfig)
	wipe(p.Harness.Literals)
	wipe(p.Harness.CoreToolSummaries)
	for k := range p.ReportSalts {
		p.ReportSalts[k] = [saltSize]byte{}
	}
}

// knownRecipe refuses a recipe pair this build does not link in. There is
// no registry: a pack names a recipe id and version, and only the exact
// pairs of the recipes below are known (a change of output for the same
// inputs is a new version).
func knownRecipe(r RecipeRef) error {
	if (r.ID == openclawrelease.ID && r.Version == openclawrelease.Version) ||
		(r.ID == openclawsig.ID && r.Version == openclawsig.Version) {
		return nil
	}
	return fmt.Errorf("%w: %q version %q", ErrUnknownRecipe, r.ID, r.Version)
}

// DefaultProvenance returns the builder identity the recipe reproduces.
func DefaultProvenance(recipeID string) (Provenance, error) {
	if recipeID != openclawsig.ID {
		return Provenance{}, fmt.Errorf("%w: %q", ErrUnknownRecipe, safetext.Clip(recipeID, 64))
	}
	return Provenance{
		HarnessID:      "openclaw",
		HarnessVersion: "2026.2.4",
		HarnessCommit:  "04c9b1debfed6c74f3f2bdc011b668597e525b48",
		BuilderName:    "buildAgentSystemPrompt",
		BuilderVersion: openclawsig.ID + "/" + openclawsig.Version,
	}, nil
}

func ferr(field string, err error) error { return &fieldError{Field: field, Err: err} }

// fieldErr turns the first error of a jsonobj.Reader into a *fieldError.
func fieldErr(err error) error {
	if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
		return ferr(pe.Path, pe.Err)
	}
	return err
}

// ---- encoding ----

type wirePack struct {
	PackVersion        string                     `json:"pack_version"`
	ParamsJSON         string                     `json:"params_json"`
	PromptMode         string                     `json:"prompt_mode"`
	Provenance         wireProvenance             `json:"provenance"`
	RawContextFiles    map[string]wireRawContext  `json:"raw_context_files,omitempty"`
	Recipe             wireRecipe                 `json:"recipe"`
	ReportSalts        map[string]string          `json:"report_salts,omitempty"`
	SkillsEnvOverrides *map[string]string         `json:"skills_env_overrides,omitempty"`
	Sources            wireSources                `json:"sources"`
	ToolSchemas        map[string]json.RawMessage `json:"tool_schemas"`
}

type wireProvenance struct {
	BuilderName    string `json:"builder_name"`
	BuilderVersion string `json:"builder_version"`
	HarnessCommit  string `json:"harness_commit"`
	HarnessID      string `json:"harness_id"`
	HarnessVersion string `json:"harness_version"`
}

type wireRawContext struct {
	MaxChars           *int64 `json:"max_chars,omitempty"`
	RawContentHashB64u string `json:"raw_content_hash_b64u"`
	Truncated          bool   `json:"truncated"`
}

type wireRecipe struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

type wireSources struct {
	CoreToolSummariesJSON string                  `json:"core_tool_summaries_json"`
	HardcodedLiteralsJSON string                  `json:"hardcoded_literals_json"`
	SigConfigJSON         *string                 `json:"sig_config_json,omitempty"`
	Templates             map[string]wireTemplate `json:"templates"`
}

type wireTemplate struct {
	SigJSON *string `json:"sig_json,omitempty"`
	Text    string  `json:"text"`
}

// Encode returns the canonical (JCS) bytes of the pack. It refuses a pack
// that Parse would refuse.
func (p *Pack) Encode() ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil pack", errInvalidInput)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	w := wirePack{
		PackVersion: packVersion,
		ParamsJSON:  string(p.Params),
		PromptMode:  p.PromptMode,
		Provenance: wireProvenance{
			BuilderName: p.Provenance.BuilderName, BuilderVersion: p.Provenance.BuilderVersion,
			HarnessCommit: p.Provenance.HarnessCommit, HarnessID: p.Provenance.HarnessID,
			HarnessVersion: p.Provenance.HarnessVersion,
		},
		Recipe: wireRecipe{ID: p.Recipe.ID, Version: p.Recipe.Version},
		Sources: wireSources{
			CoreToolSummariesJSON: string(p.Harness.CoreToolSummaries),
			HardcodedLiteralsJSON: string(p.Harness.Literals),
			Templates:             make(map[string]wireTemplate, len(p.Harness.Templates)),
		},
		ToolSchemas: make(map[string]json.RawMessage, len(p.ToolSchemas)),
	}
	if p.SkillsEnvOverrides != nil {
		w.SkillsEnvOverrides = &p.SkillsEnvOverrides
	}
	if p.Harness.SigConfig != nil {
		s := string(p.Harness.SigConfig)
		w.Sources.SigConfigJSON = &s
	}
	for name, text := range p.Harness.Templates {
		t := wireTemplate{Text: string(text)}
		if sig, ok := p.Harness.Sigs[name]; ok {
			s := string(sig)
			t.SigJSON = &s
		}
		w.Sources.Templates[name] = t
	}
	for name, schema := range p.ToolSchemas {
		w.ToolSchemas[name] = json.RawMessage(schema)
	}
	if p.RawContextFiles != nil {
		w.RawContextFiles = make(map[string]wireRawContext, len(p.RawContextFiles))
		for path, rc := range p.RawContextFiles {
			w.RawContextFiles[path] = wireRawContext{MaxChars: rc.MaxChars, RawContentHashB64u: b64u.Encode(rc.RawContentHash[:]), Truncated: rc.Truncated}
		}
	}
	if p.ReportSalts != nil {
		w.ReportSalts = make(map[string]string, len(p.ReportSalts))
		for sel, salt := range p.ReportSalts {
			w.ReportSalts[sel] = b64u.Encode(salt[:])
		}
	}
	out, err := jcs.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidInput, err)
	}
	if len(out) > maxPackSize {
		return nil, ferr("$", ErrTooLarge)
	}
	return out, nil
}

// validate checks what Encode cannot represent or Parse would refuse,
// without running the recipe.
func (p *Pack) validate() error {
	if err := knownRecipe(p.Recipe); err != nil {
		return err
	}
	pv := p.Provenance
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"$.provenance.builder_name", pv.BuilderName, 2 * maxIdentityLen},
		{"$.provenance.builder_version", pv.BuilderVersion, maxIdentityLen},
		{"$.provenance.harness_commit", pv.HarnessCommit, maxIdentityLen},
		{"$.provenance.harness_id", pv.HarnessID, maxIdentityLen},
		{"$.provenance.harness_version", pv.HarnessVersion, maxIdentityLen},
		{"$.prompt_mode", p.PromptMode, maxModeLen},
	} {
		if err := checkIdent(f.v, f.max); err != nil {
			return ferr(f.name, err)
		}
	}
	if !utf8.Valid(p.Params) {
		return ferr("$.params_json", fmt.Errorf("%w: invalid utf-8", errWrongType))
	}
	if p.Recipe.ID == openclawrelease.ID {
		return p.validateRelease()
	}
	h := p.Harness
	if len(h.Templates) == 0 {
		return ferr("$.sources.templates", errMissingField)
	}
	if len(h.Templates) > openclawsig.MaxTemplates {
		return ferr("$.sources.templates", ErrTooLarge)
	}
	for name, b := range h.Templates {
		if !utf8.ValidString(name) || name == "" {
			return ferr("$.sources.templates", fmt.Errorf("%w: template name", errWrongType))
		}
		if !utf8.Valid(b) {
			return ferr(jsonobj.Key("$.sources.templates", name)+".text", fmt.Errorf("%w: invalid utf-8", errWrongType))
		}
	}
	for name, b := range h.Sigs {
		if _, ok := h.Templates[name]; !ok {
			return ferr(jsonobj.Key("$.sources.templates", name), fmt.Errorf("%w: sig without template", errMissingField))
		}
		if !utf8.Valid(b) {
			return ferr(jsonobj.Key("$.sources.templates", name)+".sig_json", fmt.Errorf("%w: invalid utf-8", errWrongType))
		}
	}
	for field, b := range map[string][]byte{
		"$.sources.sig_config_json":          h.SigConfig,
		"$.sources.hardcoded_literals_json":  h.Literals,
		"$.sources.core_tool_summaries_json": h.CoreToolSummaries,
	} {
		if !utf8.Valid(b) {
			return ferr(field, fmt.Errorf("%w: invalid utf-8", errWrongType))
		}
	}
	if len(p.ToolSchemas) > maxToolSchemas {
		return ferr("$.tool_schemas", ErrTooLarge)
	}
	for name, s := range p.ToolSchemas {
		if !utf8.ValidString(name) {
			return ferr("$.tool_schemas", fmt.Errorf("%w: tool name", errWrongType))
		}
		if len(s) == 0 || s[0] != '{' {
			return ferr(jsonobj.Key("$.tool_schemas", name), fmt.Errorf("%w: not an object", errWrongType))
		}
	}
	if len(p.SkillsEnvOverrides) > maxEnvOverrides {
		return ferr("$.skills_env_overrides", ErrTooLarge)
	}
	for k, v := range p.SkillsEnvOverrides {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return ferr("$.skills_env_overrides", fmt.Errorf("%w: invalid utf-8", errWrongType))
		}
	}
	if p.RawContextFiles != nil && (len(p.RawContextFiles) == 0 || len(p.RawContextFiles) > maxRawContextFiles) {
		return ferr("$.raw_context_files", ErrTooLarge)
	}
	for path, rc := range p.RawContextFiles {
		if !utf8.ValidString(path) {
			return ferr("$.raw_context_files", fmt.Errorf("%w: path", errWrongType))
		}
		if rc.MaxChars != nil && (*rc.MaxChars < 0 || *rc.MaxChars > pohjson.MaxSafeInteger) {
			return ferr("$.raw_context_files", fmt.Errorf("%w: max_chars", errWrongType))
		}
	}
	if p.ReportSalts != nil && (len(p.ReportSalts) == 0 || len(p.ReportSalts) > maxReportInputs) {
		return ferr("$.report_salts", ErrTooLarge)
	}
	for sel := range p.ReportSalts {
		if _, _, err := ParseSelector(sel); err != nil {
			return ferr("$.report_salts", fmt.Errorf("%w: not a kind:id selector", errWrongType))
		}
	}
	return nil
}

func checkIdent(s string, max int) error {
	if s == "" {
		return errMissingField
	}
	if len(s) > max {
		return ErrTooLarge
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: invalid utf-8", errWrongType)
	}
	return nil
}

// id returns the pack id: "pack:" || b64u(SHA-256(label || 0x00 ||
// canonical bytes)).
func (p *Pack) id() (string, error) {
	b, err := p.Encode()
	if err != nil {
		return "", err
	}
	defer clear(b)
	return packID(b), nil
}

// packID returns the pack id of canonical pack bytes (it does not parse
// them).
func packID(canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(packIDLabel))
	h.Write([]byte{0})
	h.Write(canonical)
	return packIDPrefix + b64u.Encode(h.Sum(nil))
}

// ---- parsing ----

// Parse parses a pack strictly (docs/spec/promptpack-v1.md section 3.6):
// size limit, one JSON object, pack_version first checked, no unknown or
// missing member, exact types, a known recipe, and canonical bytes. It
// returns nothing on error. The returned pack does not alias data.
func Parse(data []byte) (_ *Pack, err error) {
	root, err := parseRoot(data)
	if err != nil {
		return nil, err
	}
	pp := &packParser{r: &jsonobj.Reader{}, p: &Pack{}, data: data}
	defer func() {
		if err != nil {
			pp.p.Wipe()
		}
	}()
	pp.top = pp.r.Object(root, jsonobj.Root, map[string]bool{
		"pack_version": true, "params_json": true, "prompt_mode": true, "provenance": true,
		"recipe": true, "sources": true, "tool_schemas": true,
		"raw_context_files": false, "skills_env_overrides": false, "report_salts": false,
	})
	// The recipe comes right after the version: an unknown recipe is
	// reported as such rather than as a consequence.
	if err := pp.readRecipe(); err != nil {
		return nil, err
	}
	for _, read := range []func(){
		pp.readHead,
		pp.readSources,
		pp.readToolSchemas,
		pp.readEnvOverrides,
		pp.readRawContextFiles,
		pp.readReportSalts,
	} {
		read()
	}
	if err := pp.r.Err(); err != nil {
		return nil, fieldErr(err)
	}
	if err := pp.p.validate(); err != nil {
		return nil, err
	}
	if err := checkCanonical(data); err != nil {
		return nil, err
	}
	return pp.p, nil
}

// parseRoot checks the size, parses the JSON object and checks the
// version, which decides everything else.
func parseRoot(data []byte) (*pohjson.Value, error) {
	if len(data) > maxPackSize {
		return nil, ferr("$", ErrTooLarge)
	}
	root, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: maxPackSize, AllowFloats: true})
	if err != nil {
		return nil, ferr("$", fmt.Errorf("%w: %w", errWrongType, err))
	}
	if root.Kind() != pohjson.Object {
		return nil, ferr("$", fmt.Errorf("%w: not an object", errWrongType))
	}
	if v, ok := root.GetString("pack_version"); !ok || v != packVersion {
		if !ok {
			return nil, fmt.Errorf("%w: no pack_version", ErrUnknownVersion)
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownVersion, safetext.Clip(v, 64))
	}
	return root, nil
}

// checkCanonical refuses pack bytes that are not their JCS form.
func checkCanonical(data []byte) error {
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return ferr("$", fmt.Errorf("%w: %v", errWrongType, err))
	}
	same := bytes.Equal(canon, data)
	clear(canon)
	if !same {
		return errNotCanonical
	}
	return nil
}

// requireJCS refuses, as class, data that is not in JCS canonical form, so
// that a hash of data is the hash of exactly the bytes received.
func requireJCS(data []byte, class error) error {
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return fmt.Errorf("%w: %v", class, err)
	}
	if !bytes.Equal(canon, data) {
		return fmt.Errorf("%w: not in JCS canonical form", class)
	}
	return nil
}

// packParser is the state of Parse: the reader that collects the first
// field error, the pack being filled, and the top-level members.
type packParser struct {
	r    *jsonobj.Reader
	p    *Pack
	top  map[string]*pohjson.Value
	data []byte
}

// readRecipe reads the recipe and refuses an unknown one.
func (pp *packParser) readRecipe() error {
	r, p := pp.r, pp.p
	rec := pp.top["recipe"]
	if rec == nil {
		return nil
	}
	f := r.Object(rec, "$.recipe", map[string]bool{"id": true, "version": true})
	p.Recipe.ID = r.Ident(f["id"], "$.recipe.id", maxRecipeIDLen)
	p.Recipe.Version = r.Ident(f["version"], "$.recipe.version", maxRecipeVer)
	if r.Err() == nil {
		return knownRecipe(p.Recipe)
	}
	return nil
}

// readHead reads the params, the prompt mode and the provenance.
func (pp *packParser) readHead() {
	r, p := pp.r, pp.p
	p.Params = r.Bytes(pp.top["params_json"], "$.params_json")
	p.PromptMode = r.Ident(pp.top["prompt_mode"], "$.prompt_mode", maxModeLen)
	if pv := pp.top["provenance"]; pv != nil {
		f := r.Object(pv, "$.provenance", map[string]bool{
			"builder_name": true, "builder_version": true, "harness_commit": true, "harness_id": true, "harness_version": true,
		})
		p.Provenance = Provenance{
			BuilderName:    r.Ident(f["builder_name"], "$.provenance.builder_name", 2*maxIdentityLen),
			BuilderVersion: r.Ident(f["builder_version"], "$.provenance.builder_version", maxIdentityLen),
			HarnessCommit:  r.Ident(f["harness_commit"], "$.provenance.harness_commit", maxIdentityLen),
			HarnessID:      r.Ident(f["harness_id"], "$.provenance.harness_id", maxIdentityLen),
			HarnessVersion: r.Ident(f["harness_version"], "$.provenance.harness_version", maxIdentityLen),
		}
	}
}

// readSources reads the harness sources: literals, core tool summaries,
// sig config and templates.
func (pp *packParser) readSources() {
	r, p := pp.r, pp.p
	src := pp.top["sources"]
	if src == nil {
		return
	}
	f := r.Object(src, "$.sources", map[string]bool{
		"templates": true, "hardcoded_literals_json": true, "core_tool_summaries_json": true, "sig_config_json": false,
	})
	p.Harness.Literals = r.Bytes(f["hardcoded_literals_json"], "$.sources.hardcoded_literals_json")
	p.Harness.CoreToolSummaries = r.Bytes(f["core_tool_summaries_json"], "$.sources.core_tool_summaries_json")
	if sc := f["sig_config_json"]; sc != nil {
		p.Harness.SigConfig = r.Bytes(sc, "$.sources.sig_config_json")
		if p.Harness.SigConfig == nil && r.Err() == nil {
			p.Harness.SigConfig = []byte{}
		}
	}
	t := f["templates"]
	if t == nil {
		return
	}
	// openclaw-sig packs need at least one (validate).
	ms := r.Members(t, "$.sources.templates", 0, openclawsig.MaxTemplates)
	p.Harness.Templates = make(map[string][]byte, len(ms))
	p.Harness.Sigs = make(map[string][]byte, len(ms))
	for _, m := range ms {
		path := jsonobj.Key("$.sources.templates", m.Key)
		if m.Key == "" {
			r.Fail(path, fmt.Errorf("%w: empty name", errWrongType))
		}
		tf := r.Object(m.Value, path, map[string]bool{"text": true, "sig_json": false})
		p.Harness.Templates[m.Key] = r.Bytes(tf["text"], path+".text")
		if s := tf["sig_json"]; s != nil {
			p.Harness.Sigs[m.Key] = r.Bytes(s, path+".sig_json")
		}
	}
}

// readToolSchemas reads the tool schemas as their raw canonical bytes.
func (pp *packParser) readToolSchemas() {
	r, p := pp.r, pp.p
	ts := pp.top["tool_schemas"]
	if ts == nil {
		return
	}
	ms := r.Members(ts, "$.tool_schemas", 0, maxToolSchemas)
	p.ToolSchemas = make(map[string][]byte, len(ms))
	if r.Err() != nil || len(ms) == 0 {
		return
	}
	// The raw canonical bytes of each schema: the input is checked
	// canonical by Parse, and a canonical document's sub-values are
	// canonical.
	var raw struct {
		ToolSchemas map[string]json.RawMessage `json:"tool_schemas"`
	}
	if err := json.Unmarshal(pp.data, &raw); err != nil {
		r.Fail("$.tool_schemas", fmt.Errorf("%w: %v", errWrongType, err))
	}
	for _, m := range ms {
		path := jsonobj.Key("$.tool_schemas", m.Key)
		if m.Value.Kind() != pohjson.Object {
			r.Fail(path, fmt.Errorf("%w: not an object", errWrongType))
			continue
		}
		b, ok := raw.ToolSchemas[m.Key]
		if !ok {
			r.Fail(path, errMissingField)
			continue
		}
		p.ToolSchemas[m.Key] = bytes.Clone(b)
	}
}

// readMap reads the optional top-level object member name, of min to max
// entries, into a map (nil when the member is absent). read returns the
// value of the entry key at path; it reports its errors on pp.r, and an
// entry it refuses (ok false) is left out.
func readMap[V any](pp *packParser, name string, min, max int, read func(path, key string, v *pohjson.Value) (V, bool)) map[string]V {
	v := pp.top[name]
	if v == nil {
		return nil
	}
	path := "$." + name
	ms := pp.r.Members(v, path, min, max)
	out := make(map[string]V, len(ms))
	for _, m := range ms {
		if e, ok := read(jsonobj.Key(path, m.Key), m.Key, m.Value); ok {
			out[m.Key] = e
		}
	}
	return out
}

// readEnvOverrides reads the skills environment overrides.
func (pp *packParser) readEnvOverrides() {
	r := pp.r
	pp.p.SkillsEnvOverrides = readMap(pp, "skills_env_overrides", 0, maxEnvOverrides, func(path, _ string, v *pohjson.Value) (string, bool) {
		s, ok := v.Str()
		if !ok {
			r.Fail(path, errWrongType)
		}
		return s, true
	})
}

// readRawContextFiles reads the raw context file entries.
func (pp *packParser) readRawContextFiles() {
	r := pp.r
	pp.p.RawContextFiles = readMap(pp, "raw_context_files", 1, maxRawContextFiles, func(path, _ string, v *pohjson.Value) (rawContextFile, bool) {
		f := r.Object(v, path, map[string]bool{"raw_content_hash_b64u": true, "truncated": true, "max_chars": false})
		var e rawContextFile
		if h := f["raw_content_hash_b64u"]; h != nil {
			s, _ := h.Str()
			d, err := b64u.DecodeHash(s)
			if err != nil {
				r.Fail(path+".raw_content_hash_b64u", fmt.Errorf("%w: not b64u of 32 bytes", errWrongType))
			}
			e.RawContentHash = d
		}
		if t := f["truncated"]; t != nil {
			b, ok := t.Bool()
			if !ok {
				r.Fail(path+".truncated", errWrongType)
			}
			e.Truncated = b
		}
		if mc := f["max_chars"]; mc != nil {
			n, ok := mc.Int()
			if !ok || n < 0 {
				r.Fail(path+".max_chars", errWrongType)
			}
			e.MaxChars = &n
		}
		return e, true
	})
}

// readReportSalts reads the report salts, keyed by kind:id selector.
func (pp *packParser) readReportSalts() {
	r := pp.r
	pp.p.ReportSalts = readMap(pp, "report_salts", 1, maxReportInputs, func(path, sel string, v *pohjson.Value) ([saltSize]byte, bool) {
		if _, _, err := ParseSelector(sel); err != nil {
			r.Fail(path, fmt.Errorf("%w: not a kind:id selector", errWrongType))
			return [saltSize]byte{}, false
		}
		b := r.B64u(v, path, saltSize)
		if b == nil {
			return [saltSize]byte{}, false
		}
		defer clear(b)
		return [saltSize]byte(b), true
	})
}
