package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

// Suggest returns the strictest policy document (indented JSON) that
// admits pack: every input it carries is pinned or allowlisted, every
// input it lacks is refused. With sensitive, the document is a sensitive
// policy, and a pack that no sensitive policy admits gives the *RuleError
// of the first input in the way. Without it, inputs that cannot be pinned
// get the relaxed choice. The result is checked: it parses, and it admits
// pack. It is a starting point for an operator, who reviews what it pins.
func Suggest(pack *promptpack.Pack, sensitive bool) ([]byte, error) {
	if pack == nil {
		return nil, fmt.Errorf("%w: nil pack", ErrUnreadable)
	}
	if pack.Recipe.ID != openclawsig.ID || pack.Recipe.Version != openclawsig.Version {
		return nil, fmt.Errorf("%w: recipe %q version %q has no admission mapping", ErrUnreadable, pack.Recipe.ID, pack.Recipe.Version)
	}
	params, err := openclawsig.ParseParams(pack.Params)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	sg := &suggester{pack: pack, params: params, sensitive: sensitive, doc: policyDoc{
		Version:     version,
		Sensitive:   sensitive,
		Recipes:     []recipeRef{{ID: pack.Recipe.ID, Version: pack.Recipe.Version}},
		PromptModes: []string{pack.PromptMode},
		Extra:       modeRefuse,
	}}
	for _, step := range []func() error{
		sg.bootstrap,
		sg.skills,
		sg.extra,
		sg.tools,
		sg.owners,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return sg.encode()
}

// suggester is the state of Suggest: the pack, its params, and the policy
// document each step fills in.
type suggester struct {
	pack      *promptpack.Pack
	params    *openclawsig.Params
	sensitive bool
	doc       policyDoc
}

// relax returns the relaxed choice, or the refusal a sensitive policy
// cannot avoid.
func (sg *suggester) relax(choice string, refusal error) (string, error) {
	if sg.sensitive {
		return "", refusal
	}
	return choice, nil
}

// bootstrap pins each context file's content and sizes.
func (sg *suggester) bootstrap() error {
	b := &sg.doc.Bootstrap
	b.AllowedPaths, b.Nul, b.Newlines, b.Content = []nameValue{}, nulRefuse, newlinesLF, contentPinned
	b.PinnedContent = map[string]hashList{}
	for _, f := range sg.params.ContextFiles {
		switch {
		case f.Path == "" || len(f.Path) > maxNameLen:
			return refuse(ruleBootstrapPath, "bootstrap", f.Path)
		case slices.Contains(b.AllowedPaths, nameValue(f.Path)):
			return refuse(ruleBootstrapDuplicate, "bootstrap", f.Path)
		}
		switch rule := contentRule(f.Content, newlinesPreserve); rule {
		case "":
		default:
			return refuse(rule, "bootstrap", f.Path)
		}
		if contentRule(f.Content, newlinesLF) != "" {
			b.Newlines = newlinesPreserve
		}
		n := int64(jsstr.Len(f.Content))
		b.MaxFileChars = max(b.MaxFileChars, n)
		b.MaxTotalChars += n
		b.AllowedPaths = append(b.AllowedPaths, nameValue(f.Path))
		b.PinnedContent[f.Path] = hashList{b64u.SHA256([]byte(f.Content))}
	}
	if b.MaxFileChars > maxChars || b.MaxTotalChars > maxChars {
		return refuse(ruleBootstrapTotalTooBig, "bootstrap", "")
	}
	return nil
}

// skills sets the skills mode and pins the skills environment overrides.
func (sg *suggester) skills() error {
	var err error
	s := &sg.doc.Skills
	s.Mode = skillsNone
	if prompt := jsstr.Trim(sg.params.SkillsPrompt); prompt != "" {
		if s.Mode, err = suggestSkills(s, prompt, sg.params, sg.sensitive); err != nil {
			return err
		}
	}
	s.EnvOverrides = envRefuse
	if len(sg.pack.SkillsEnvOverrides) > 0 {
		h, _, err := sg.pack.SkillsEnvOverridesHash()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		s.EnvOverrides, s.EnvOverrideHash = envPinned, hashList{h}
	}
	return nil
}

// extra allows an extra system prompt, unless sensitive.
func (sg *suggester) extra() error {
	var err error
	if jsstr.Trim(sg.params.ExtraSystemPrompt) != "" {
		sg.doc.Extra, err = sg.relax(modeAllow, refuse(ruleExtraSystemPrompt, "extra_system_prompt", ""))
	}
	return err
}

// tools pins the tool schemas and allowlists the tool names.
func (sg *suggester) tools() error {
	t := &sg.doc.Tools
	h, err := sg.pack.ToolSchemasHash()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	t.Schemas, t.SchemaPackHash, t.PluginSummaries, t.Names = schemasPinned, hashList{h}, modeRefuse, namesAny
	for _, sum := range sg.params.ToolSummaries {
		if jsstr.Trim(sum.Summary) != "" {
			if t.PluginSummaries, err = sg.relax(modeAllow, refuse(ruleToolSummaryRefused, "tool", sum.Name)); err != nil {
				return err
			}
			break
		}
	}
	for _, n := range sg.params.ToolNames {
		if k := nameValue(toolKey(n)); k != "" && len(k) <= maxNameLen && !slices.Contains(t.AllowedNames, k) {
			t.AllowedNames = append(t.AllowedNames, k)
		}
	}
	if len(t.AllowedNames) > 0 {
		t.Names = namesAllowlist
	}
	return nil
}

// owners pins the owner numbers when every one is an HMAC; otherwise it
// allows any, unless sensitive.
func (sg *suggester) owners() error {
	o := &sg.doc.Owners
	o.Display = ownersNone
	for i, n := range sg.params.OwnerNumbers {
		if n = jsstr.Trim(n); n == "" {
			continue
		}
		if !isLowerHex(n) || len(n) < 12 || len(n) > 64 {
			if _, err := sg.relax(ownersAny, &RuleError{Rule: ruleOwnerNotHMAC, Input: "owner[" + strconv.Itoa(i) + "]"}); err != nil {
				return err
			}
			o.Display, o.HMACValues = ownersAny, nil
			break
		}
		o.Display = ownersHMAC
		if !slices.Contains(o.HMACValues, n) {
			o.HMACValues = append(o.HMACValues, n)
		}
	}
	return nil
}

// encode returns the document as indented JSON, checked to be a valid
// policy that admits the pack.
func (sg *suggester) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sg.doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	out := buf.Bytes()
	// The suggestion is only useful if it is a valid policy admitting the
	// pack; anything else is a bug, refused rather than printed.
	p, err := Parse(out)
	if err != nil {
		return nil, fmt.Errorf("admission: suggested policy does not parse: %w", err)
	}
	if err := p.Admit(sg.pack); err != nil {
		return nil, fmt.Errorf("admission: suggested policy does not admit the pack: %w", err)
	}
	return out, nil
}

// suggestSkills fills s for a non-empty skills prompt and returns the mode.
func suggestSkills(s *skillsRules, prompt string, params *openclawsig.Params, sensitive bool) (string, error) {
	sp, err := parseSkillsPrompt(prompt)
	if err != nil {
		if sensitive {
			return "", refuse(ruleSkillsMalformed, "skills_prompt", "")
		}
		return skillsAll, nil
	}
	allowed := []skillRule{}
	for _, e := range sp.entries {
		if len(e.name) > maxNameLen {
			return "", refuse(ruleSkillNotAllowed, "skill", e.name)
		}
		name, h := nameValue(e.name), hashValue(b64u.SHA256([]byte(e.raw)))
		if i := slices.IndexFunc(allowed, func(a skillRule) bool { return a.Name == name }); i >= 0 {
			if allowed[i].EntryHash == h {
				continue
			}
			// Two different entries under one name: one pin per name.
			if sensitive {
				return "", refuse(ruleSkillNotPinned, "skill", e.name)
			}
			return skillsAll, nil
		}
		if sensitive && isWorkspaceSkill(e, params) {
			return "", refuse(ruleSkillWorkspace, "skill", e.name)
		}
		allowed = append(allowed, skillRule{Name: name, EntryHash: h})
	}
	if len(allowed) == 0 {
		// "<available_skills/>" alone: an allowlist needs one entry, and
		// "none" would refuse the non-empty prompt.
		if sensitive {
			return "", refuse(ruleSkillsRefused, "skills_prompt", "")
		}
		return skillsAll, nil
	}
	s.PreambleHashes = hashList{b64u.SHA256([]byte(sp.preamble))}
	s.Allowed = allowed
	return skillsAllowlist, nil
}
