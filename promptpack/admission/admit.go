package admission

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

// Admit checks a parsed pack's inputs against the policy (section 6) and
// returns nil, a *RuleError for the first rule the pack breaks (rules are
// checked in the order of section 6), or an error wrapping ErrUnreadable
// when the inputs cannot be checked. It reads only the pack: no clock, no
// file, no network. Errors never contain input content.
func (p *Policy) Admit(pack *promptpack.Pack) error {
	if p == nil || pack == nil {
		return fmt.Errorf("%w: nil policy or pack", ErrUnreadable)
	}
	if !slices.Contains(p.recipes, recipeRef{ID: pack.Recipe.ID, Version: pack.Recipe.Version}) {
		return refuse(ruleRecipeNotAllowed, "recipe", pack.Recipe.ID+"/"+pack.Recipe.Version)
	}
	if !slices.Contains(p.promptModes, pack.PromptMode) {
		return refuse(rulePromptModeNotAllowed, "prompt_mode", pack.PromptMode)
	}
	// The recipe decides where each input lives in the params; only
	// recipes this package knows are checked, the others refused.
	if pack.Recipe.ID != openclawsig.ID || pack.Recipe.Version != openclawsig.Version {
		return fmt.Errorf("%w: recipe %q version %q has no admission mapping", ErrUnreadable, pack.Recipe.ID, pack.Recipe.Version)
	}
	params, err := openclawsig.ParseParams(pack.Params)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	for _, check := range []func(*promptpack.Pack, *openclawsig.Params) error{
		p.admitBootstrap, p.admitSkills, p.admitSkillsEnv, p.admitExtra, p.admitTools, p.admitOwners,
	} {
		if err := check(pack, params); err != nil {
			return err
		}
	}
	return nil
}

func (p *Policy) admitBootstrap(_ *promptpack.Pack, params *openclawsig.Params) error {
	b := &p.bootstrap
	seen := make(map[string]bool, len(params.ContextFiles))
	var total int64
	for _, f := range params.ContextFiles {
		if !p.paths[f.Path] {
			return refuse(ruleBootstrapPath, "bootstrap", f.Path)
		}
		if seen[f.Path] {
			return refuse(ruleBootstrapDuplicate, "bootstrap", f.Path)
		}
		seen[f.Path] = true
		if rule := contentRule(f.Content, b.Newlines); rule != "" {
			return refuse(rule, "bootstrap", f.Path)
		}
		n := int64(jsstr.Len(f.Content))
		if n > b.MaxFileChars {
			return refuse(ruleBootstrapFileTooLarge, "bootstrap", f.Path)
		}
		if total += n; total > b.MaxTotalChars {
			return refuse(ruleBootstrapTotalTooBig, "bootstrap", f.Path)
		}
	}
	if b.Content != contentPinned {
		return nil
	}
	for _, f := range params.ContextFiles {
		if !p.pinned[f.Path][b64u.SHA256([]byte(f.Content))] {
			return refuse(ruleBootstrapNotPinned, "bootstrap", f.Path)
		}
	}
	return nil
}

// contentRule returns the rule a context file's text breaks, or "". A NUL
// is always refused: admission cannot rewrite committed bytes, so a
// declared "strip" means the producer stripped them (section 6.3). Binary
// content is recognised by what a text file does not hold: C0 controls
// other than TAB, LF and CR, DEL, C1 controls, and U+FFFD (the mark of a
// lossy decode). The params parser already refuses invalid UTF-8 and
// unpaired surrogates.
func contentRule(s, newlines string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return ruleBootstrapNul
	}
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f, r == 0xfffd:
			return ruleBootstrapBinary
		}
	}
	if newlines == newlinesLF && strings.IndexByte(s, '\r') >= 0 {
		return ruleBootstrapNewlines
	}
	return ""
}

func (p *Policy) admitSkills(_ *promptpack.Pack, params *openclawsig.Params) error {
	s := &p.skills
	prompt := jsstr.Trim(params.SkillsPrompt)
	switch s.Mode {
	case skillsAll:
		return nil
	case skillsNone:
		if prompt != "" {
			return refuse(ruleSkillsRefused, "skills_prompt", "")
		}
		return nil
	}
	if prompt == "" {
		return nil
	}
	sp, err := parseSkillsPrompt(prompt)
	if err != nil {
		return refuse(ruleSkillsMalformed, "skills_prompt", "")
	}
	if !slices.Contains(s.PreambleHashes, b64u.SHA256([]byte(sp.preamble))) {
		return refuse(ruleSkillsPreamble, "skills_prompt", "")
	}
	for _, e := range sp.entries {
		pin, ok := p.skillPins[e.name]
		if !ok {
			return refuse(ruleSkillNotAllowed, "skill", e.name)
		}
		if pin != b64u.SHA256([]byte(e.raw)) {
			return refuse(ruleSkillNotPinned, "skill", e.name)
		}
		if p.sensitive && isWorkspaceSkill(e, params) {
			return refuse(ruleSkillWorkspace, "skill", e.name)
		}
	}
	return nil
}

func (p *Policy) admitSkillsEnv(pack *promptpack.Pack, _ *openclawsig.Params) error {
	switch p.skills.EnvOverrides {
	case envAny:
		return nil
	case envRefuse:
		if len(pack.SkillsEnvOverrides) > 0 {
			return refuse(ruleSkillsEnvRefused, "skills_env_overrides", "")
		}
		return nil
	}
	h, ok, err := pack.SkillsEnvOverridesHash()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if ok && !slices.Contains(p.skills.EnvOverrideHash, h) {
		return refuse(ruleSkillsEnvNotPinned, "skills_env_overrides", "")
	}
	return nil
}

func (p *Policy) admitExtra(_ *promptpack.Pack, params *openclawsig.Params) error {
	if p.extraSystemPrompt == modeRefuse && jsstr.Trim(params.ExtraSystemPrompt) != "" {
		return refuse(ruleExtraSystemPrompt, "extra_system_prompt", "")
	}
	return nil
}

func (p *Policy) admitTools(pack *promptpack.Pack, params *openclawsig.Params) error {
	t := &p.tools
	if t.Schemas == schemasPinned {
		h, err := pack.ToolSchemasHash()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		if !slices.Contains(t.SchemaPackHash, h) {
			return refuse(ruleToolSchemasNotPinned, "tool_schemas", "")
		}
	}
	if t.PluginSummaries == modeRefuse {
		for _, s := range params.ToolSummaries {
			if jsstr.Trim(s.Summary) != "" {
				return refuse(ruleToolSummaryRefused, "tool", s.Name)
			}
		}
	}
	if t.Names == namesAllowlist {
		for _, n := range params.ToolNames {
			if k := toolKey(n); k != "" && !p.toolNames[k] {
				return refuse(ruleToolNameNotAllowed, "tool", n)
			}
		}
	}
	return nil
}

// toolKey is the name the recipe resolves a tool by: trimmed, lowercased.
func toolKey(n string) string { return jsstr.ToLower(jsstr.Trim(n)) }

func (p *Policy) admitOwners(_ *promptpack.Pack, params *openclawsig.Params) error {
	o := &p.owners
	if o.Display == ownersAny {
		return nil
	}
	for i, n := range params.OwnerNumbers {
		n = jsstr.Trim(n)
		if n == "" {
			continue // the recipe drops it
		}
		// Owners are named by index: the value is an identity.
		in := "owner[" + strconv.Itoa(i) + "]"
		if o.Display == ownersNone {
			return &RuleError{Rule: ruleOwnersRefused, Input: in}
		}
		if !p.hmacs[n] {
			return &RuleError{Rule: ruleOwnerNotHMAC, Input: in}
		}
	}
	return nil
}

// Runtime states the attester's run-time configuration that a sensitive
// policy obliges (section 7). The zero value fails every obligation.
type Runtime struct {
	// MemoryLocked: the pack is opened in locked, non-dumpable sealed
	// memory (no --allow-unlocked or equivalent).
	MemoryLocked bool
	// NoDevelopmentOptions: no development option is on (for example the
	// gate's development mode that accepts http webhooks).
	NoDevelopmentOptions bool
	// FailModeDeny: every external verifier's failMode resolves to deny.
	FailModeDeny bool
	// VerificationEnforced: the gate enforces the turn-scoped
	// verification gate for the run.
	VerificationEnforced bool
}

// checkRuntime returns nil for a policy that is not sensitive, and
// otherwise a *RuleError for the first obligation rt does not meet.
func (p *Policy) checkRuntime(rt Runtime) error {
	if p == nil {
		return fmt.Errorf("%w: nil policy", ErrUnreadable)
	}
	if !p.sensitive {
		return nil
	}
	switch {
	case !rt.MemoryLocked:
		return &RuleError{Rule: ruleRuntimeMemoryUnlocked, Input: "runtime"}
	case !rt.NoDevelopmentOptions:
		return &RuleError{Rule: ruleRuntimeDevelopment, Input: "runtime"}
	case !rt.FailModeDeny:
		return &RuleError{Rule: ruleRuntimeFailMode, Input: "runtime"}
	case !rt.VerificationEnforced:
		return &RuleError{Rule: ruleRuntimeVerification, Input: "runtime"}
	}
	return nil
}

// AdmitRun is what an attester calls when a run is created (section 9):
// Admit on the opened, rebuilt pack, then checkRuntime with its own
// configuration. It returns the first refusal (a *RuleError, HTTP 422) or
// an error wrapping ErrUnreadable (also 422: the pack is not admitted).
func (p *Policy) AdmitRun(pack *promptpack.Pack, rt Runtime) error {
	if err := p.Admit(pack); err != nil {
		return err
	}
	return p.checkRuntime(rt)
}
