package promptpack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

// releasePromptMode is the prompt_mode of an openclaw-release pack: the
// recipe reproduces what OpenClaw sent, it does not resolve OpenClaw's
// prompt mode (docs/spec/recipe-openclaw-release.md section 5.1).
const releasePromptMode = "captured"

// ReleaseTrust returns the trusted-list entry (the attester's
// attester.trustedTemplates, packctl --trusted) that admits openclaw-release
// packs of rel: releaseTrustName(rel.OpenClawVersion) -> releaseTrustHash(rel).
func ReleaseTrust(rel *openclawrelease.Release) (map[string]string, error) {
	h, err := releaseTrustHash(rel)
	if err != nil {
		return nil, err
	}
	return map[string]string{releaseTrustName(rel.OpenClawVersion): h}, nil
}

// releaseTrustName is the name under which a trusted list admits
// openclaw-release packs of one OpenClaw version.
func releaseTrustName(version string) string { return openclawrelease.ID + ":" + version }

// releaseTrustHash is the trusted-list value for a release: its fragment
// table's SHA-256 as "sha256:<hex>".
func releaseTrustHash(rel *openclawrelease.Release) (string, error) {
	d, err := b64u.DecodeHash(rel.TableSHA256)
	if err != nil {
		return "", fmt.Errorf("%w: fragment table hash: %v", ErrInvalidReport, err)
	}
	return fmt.Sprintf("sha256:%x", d), nil
}

// releaseProvenance is the only provenance an openclaw-release pack may
// state: the release's version, and its fragment table's hash standing for
// the build (npm ships no commit).
func releaseProvenance(rel *openclawrelease.Release) Provenance {
	return Provenance{
		HarnessID:      "openclaw",
		HarnessVersion: rel.OpenClawVersion,
		HarnessCommit:  "fragtable:" + rel.TableSHA256,
		BuilderName:    openclawrelease.ID,
		BuilderVersion: openclawrelease.ID + "/" + openclawrelease.Version,
	}
}

// BuildRelease makes an openclaw-release pack from a capture that the
// fixed text of its OpenClaw release, read from the install at installDir,
// reproduces (openclawrelease.Reproduce, which passes its progress lines to
// logf), and checks that the pack rebuilds.
func BuildRelease(c *openclawrelease.Capture, installDir string, logf func(format string, args ...any)) (*Pack, error) {
	rel, doc, err := openclawrelease.Reproduce(c, installDir, logf)
	if err != nil {
		return nil, fmt.Errorf("promptpack: build: %w", err)
	}
	p := &Pack{
		Recipe:      RecipeRef{ID: openclawrelease.ID, Version: openclawrelease.Version},
		Provenance:  releaseProvenance(rel),
		PromptMode:  releasePromptMode,
		Params:      doc,
		ToolSchemas: map[string][]byte{},
	}
	self, err := p.SigHashes()
	if err != nil {
		p.Wipe()
		return nil, err
	}
	rb, err := p.Rebuild(self)
	if err != nil {
		p.Wipe()
		return nil, err
	}
	rb.Wipe()
	return p, nil
}

// validateRelease checks the parts of an openclaw-release pack that do not
// need the recipe: it carries its document in params_json and nothing of
// the openclaw-sig form.
func (p *Pack) validateRelease() error {
	h := p.Harness
	switch {
	case len(h.Templates) != 0 || len(h.Sigs) != 0 || h.SigConfig != nil:
		return ferr("$.sources.templates", fmt.Errorf("%w: an %s pack carries no templates", errWrongType, openclawrelease.ID))
	case len(h.Literals) != 0 || len(h.CoreToolSummaries) != 0:
		return ferr("$.sources", fmt.Errorf("%w: an %s pack carries no literals or summaries", errWrongType, openclawrelease.ID))
	case len(p.ToolSchemas) != 0:
		return ferr("$.tool_schemas", fmt.Errorf("%w: an %s pack carries its tools in its document", errWrongType, openclawrelease.ID))
	case p.SkillsEnvOverrides != nil:
		return ferr("$.skills_env_overrides", fmt.Errorf("%w: not in an %s pack", errUnknownField, openclawrelease.ID))
	case p.RawContextFiles != nil:
		return ferr("$.raw_context_files", fmt.Errorf("%w: not in an %s pack", errUnknownField, openclawrelease.ID))
	case p.ReportSalts != nil:
		return ferr("$.report_salts", fmt.Errorf("%w: an %s pack produces SystemPromptReport.v1 only", errUnknownField, openclawrelease.ID))
	}
	return nil
}

// rebuildRelease is Rebuild for an openclaw-release pack
// (docs/spec/recipe-openclaw-release.md section 6.1): openclawrelease.Rebuild
// asks whether the document's release is trusted (trusted[releaseTrustName]
// == releaseTrustHash) before it checks the layout against the release's
// fragment table compiled into this module and re-renders it; then the
// pack's provenance and prompt mode must be the ones the recipe states, and
// the SystemPromptReport.v1 commits the pinned files, the fragment table,
// the document, the tools, the bootstrap files and the slot values.
func (p *Pack) rebuildRelease(trusted map[string]string, packID string) (*Rebuilt, error) {
	// The opener must trust this release by name and table hash, as it
	// trusts openclaw-sig templates by name and sig hash.
	r, err := openclawrelease.Rebuild(p.Params, func(rel *openclawrelease.Release) error {
		name := releaseTrustName(rel.OpenClawVersion)
		want, err := releaseTrustHash(rel)
		if err != nil {
			return err
		}
		if got, ok := trusted[name]; !ok || got != want {
			return &openclawsig.TemplateError{Name: name, Err: openclawsig.ErrTemplateUntrusted}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("promptpack: rebuild: %w", err)
	}
	defer r.Capture.Wipe()
	if p.Provenance != releaseProvenance(r.Release) {
		return nil, ferr("$.provenance", fmt.Errorf("%w: not the provenance of an %s pack of OpenClaw %s", errWrongType, openclawrelease.ID, r.Release.OpenClawVersion))
	}
	if p.PromptMode != releasePromptMode {
		return nil, fmt.Errorf("%w: an %s pack states %q", ErrModeMismatch, openclawrelease.ID, releasePromptMode)
	}
	rep, err := p.releaseReport(r)
	if err != nil {
		return nil, err
	}
	c, err := rep.canonical()
	if err == nil {
		err = validateReport(c)
	}
	if err != nil {
		return nil, err
	}
	rb := &Rebuilt{Prompt: bytes.Clone(r.Capture.SystemPrompt), Mode: releasePromptMode, Report: rep, ReportJCS: c, ReportHash: sha(c), PackID: packID}
	rb.entries = p.releasePoHEntries(r.Release, rep)
	return rb, nil
}

// releaseReport maps a rebuilt release document onto SystemPromptReport.v1
// (docs/spec/recipe-openclaw-release.md section 6.2).
func (p *Pack) releaseReport(r *openclawrelease.Rebuilt) (*Report, error) {
	c, rel := r.Capture, r.Release
	rep := &Report{
		ReportVersion: reportVersion,
		Harness:       reportHarness{ID: p.Provenance.HarnessID, Version: p.Provenance.HarnessVersion, Commit: p.Provenance.HarnessCommit},
		PromptMode:    releasePromptMode,
		Builder:       reportBuilder{Name: p.Provenance.BuilderName, BuilderVersion: p.Provenance.BuilderVersion},
		Recipe:        reportRecipe{ID: p.Recipe.ID, Version: p.Recipe.Version},
		Final:         reportFinal{SystemPromptHashB64u: b64u.SHA256(c.SystemPrompt), SystemPromptChars: jsstr.Len(string(c.SystemPrompt))},
	}
	in := &rep.Inputs
	in.ParamsHashB64u = b64u.SHA256(p.Params)
	in.HardcodedLiteralsHashB64u = rel.TableSHA256
	in.Templates = make([]reportTemplate, 0, len(rel.Files))
	for _, f := range rel.Files {
		d, err := b64u.DecodeHash(f.SHA256)
		if err != nil {
			return nil, fmt.Errorf("%w: pinned file hash: %v", ErrInvalidReport, err)
		}
		in.Templates = append(in.Templates, reportTemplate{Name: f.Path, Hash: fmt.Sprintf("sha256:%x", d)})
	}
	names := make([]string, 0, len(c.Tools))
	schemas := make(map[string]json.RawMessage, len(c.Tools))
	type summary struct {
		Name    string `json:"name"`
		Summary string `json:"summary"`
	}
	sums := make([]summary, 0, len(c.Tools))
	for _, t := range c.Tools {
		names = append(names, t.Name)
		schemas[t.Name] = json.RawMessage(t.SchemaJCS)
		sums = append(sums, summary{Name: t.Name, Summary: t.Description})
	}
	var err error
	if in.ResolvedToolNamesHashB64u, err = hashJCS(names); err != nil {
		return nil, err
	}
	if in.ToolSchemasHashB64u, err = hashJCS(schemas); err != nil {
		return nil, err
	}
	if in.ToolSummariesHashB64u, err = hashJCS(sums); err != nil {
		return nil, err
	}
	if len(r.Files) > maxRawContextFiles {
		return nil, fmt.Errorf("%w: more than %d context files", ErrInvalidReport, maxRawContextFiles)
	}
	in.Bootstrap = make([]bootstrapEntry, 0, len(r.Files))
	for _, f := range r.Files {
		e := bootstrapEntry{ContentHashB64u: f.ContentHashB64u, RawContentHashB64u: f.RawContentHashB64u, Chars: f.Chars}
		if n := utf8.RuneCountInString(f.Path); n >= 1 && n <= 1024 {
			e.PathHint = f.Path
		} else {
			e.PathHashB64u = b64u.SHA256([]byte(f.Path))
		}
		in.Bootstrap = append(in.Bootstrap, e)
	}
	in.SkillsPromptHashB64u, in.RuntimeLineHashB64u, in.TimeContextHashB64u = r.SkillsHashB64u, r.RuntimeHashB64u, r.TimeHashB64u
	return rep, nil
}

// releasePoHEntries lists the prompt_pack.v1 entries of an openclaw-release
// rebuild: the document, the fragment table, each pinned file, the tool
// schemas and each bootstrap file in the prompt.
func (p *Pack) releasePoHEntries(rel *openclawrelease.Release, rep *Report) []pohEntry {
	es := []pohEntry{
		sized("params.json", p.Params),
		{EntryID: "release:fragment-table", ContentHashB64u: rel.TableSHA256},
		{EntryID: "tools:schemas", ContentHashB64u: rep.Inputs.ToolSchemasHashB64u},
	}
	for _, f := range rel.Files {
		es = append(es, pohEntry{EntryID: "release:" + f.Path, ContentHashB64u: f.SHA256})
	}
	for i, b := range rep.Inputs.Bootstrap {
		es = append(es, pohEntry{EntryID: fmt.Sprintf("bootstrap:%03d", i), ContentHashB64u: b.ContentHashB64u})
	}
	return es
}
