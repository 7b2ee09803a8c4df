// Package admission implements the admission policy (format
// clawea.dev/admission-policy/v1): the rules a prompt pack's inputs must
// satisfy before an attester starts a run with it or packctl writes it, and
// the sensitive mode that makes those rules strict and adds run-time
// obligations.
//
// The normative specification is docs/spec/admission-policy-v1.md. The flow
// is Parse (strict, errors name the JSON path), Hash (the
// admission_policy_hash_b64u an attestation carries), Admit (the pack's
// inputs) and, for a sensitive policy, CheckRuntime (the attester's
// configuration). A refusal is a *RuleError naming the rule code and the
// input (a path hint, a skill or tool name, an index), never the content.
package admission

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/schema/schemas"
)

// Version is the value of "admission_policy_version". It sorts first among
// the members, so the canonical form begins with it.
const Version = "clawea.dev/admission-policy/v1"

// Limits of format v1.
const (
	// MaxPolicySize bounds the policy document.
	MaxPolicySize = 1 << 20
	// MaxList bounds every list and map of the policy.
	MaxList = 1024
	// MaxNameLen bounds a path hint, skill name, tool name or recipe
	// field, in bytes.
	MaxNameLen = 1024
	// MaxChars bounds the character limits (UTF-16 code units).
	MaxChars = 1 << 30
)

// Modes of the enumerated members. The strictest choice of each is the
// one a sensitive policy requires.
const (
	NulRefuse = "refuse"
	NulStrip  = "strip"

	NewlinesLF       = "lf"
	NewlinesPreserve = "preserve"

	ContentPinned = "pinned"
	ContentAny    = "any"

	SkillsNone      = "none"
	SkillsAllowlist = "allowlist"
	SkillsAll       = "all"

	EnvRefuse = "refuse"
	EnvPinned = "pinned"
	EnvAny    = "any"

	Refuse = "refuse"
	Allow  = "allow"

	SchemasPinned = "pinned"
	SchemasAny    = "any"

	NamesAllowlist = "allowlist"
	NamesAny       = "any"

	OwnersNone = "none"
	OwnersHMAC = "hmac"
	OwnersAny  = "any"
)

// Errors. Parse errors are *PolicyError values that match ErrMalformed and
// a more specific sentinel (the jsonobj ones, ErrContradiction) with
// errors.Is.
var (
	// ErrMalformed: the document is not a v1 admission policy.
	ErrMalformed = errors.New("admission: malformed policy")
	// ErrUnknownVersion: admission_policy_version is missing or not
	// Version.
	ErrUnknownVersion = errors.New("admission: unknown policy version")
	// ErrContradiction: members that contradict each other, or a
	// sensitive policy with a relaxed choice.
	ErrContradiction = errors.New("contradictory policy")
)

// PolicyError reports where a policy was refused. Path is a JSON path such
// as `$.skills.mode`; it never holds a value.
type PolicyError struct {
	Path string
	Err  error
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("admission: malformed policy: %s: %v", e.Path, e.Err)
}

// Unwrap returns ErrMalformed and the specific reason.
func (e *PolicyError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// recipeRef is one allowed recipe id and version.
type recipeRef struct{ ID, Version string }

// bootstrapRules holds the bootstrap (context file) rules.
type bootstrapRules struct {
	AllowedPaths  []string
	MaxFileChars  int64 // UTF-16 code units
	MaxTotalChars int64 // UTF-16 code units
	Nul           string
	Newlines      string
	Content       string
	// PinnedContent maps a path hint to the allowed b64u SHA-256 hashes
	// of its content; set only when Content is ContentPinned.
	PinnedContent map[string][]string
}

// skillRule is one allowlisted skill entry.
type skillRule struct {
	Name      string
	EntryHash string // b64u SHA-256 of the exact <skill>...</skill> bytes
}

// skillsRules holds the skills rules.
type skillsRules struct {
	Mode            string
	PreambleHashes  []string    // allowlist mode
	Allowed         []skillRule // allowlist mode
	EnvOverrides    string
	EnvOverrideHash []string // pinned mode
}

// toolsRules holds the tool rules.
type toolsRules struct {
	Schemas         string
	SchemaPackHash  []string // pinned mode
	PluginSummaries string
	Names           string
	AllowedNames    []string // allowlist mode; lowercase, trimmed
}

// ownersRules holds the owner-identity rule.
type ownersRules struct {
	Display    string
	HMACValues []string // hmac mode; lowercase hex
}

// Policy is a parsed admission policy. Its rules are not exported: what
// Admit enforces is exactly what Hash names, and no caller can change one
// without the other.
type Policy struct {
	sensitive         bool
	recipes           []recipeRef
	promptModes       []string
	bootstrap         bootstrapRules
	skills            skillsRules
	extraSystemPrompt string
	tools             toolsRules
	owners            ownersRules

	// Lookup sets of the lists Admit checks per input, so that admission
	// stays linear in the pack's size.
	paths     map[string]bool
	pinned    map[string]map[string]bool
	skillPins map[string]string
	toolNames map[string]bool
	hmacs     map[string]bool

	canonical []byte
	hash      string
}

// index builds the lookup sets.
func (p *Policy) index() {
	set := func(ss []string) map[string]bool {
		m := make(map[string]bool, len(ss))
		for _, s := range ss {
			m[s] = true
		}
		return m
	}
	p.paths = set(p.bootstrap.AllowedPaths)
	p.pinned = make(map[string]map[string]bool, len(p.bootstrap.PinnedContent))
	for path, hs := range p.bootstrap.PinnedContent {
		p.pinned[path] = set(hs)
	}
	p.skillPins = make(map[string]string, len(p.skills.Allowed))
	for _, sk := range p.skills.Allowed {
		p.skillPins[sk.Name] = sk.EntryHash
	}
	p.toolNames = set(p.tools.AllowedNames)
	p.hmacs = set(p.owners.HMACValues)
}

// Sensitive reports whether the policy is sensitive (section 5): the run
// has obligations (CheckRuntime) and its attestation says so.
func (p *Policy) Sensitive() bool { return p.sensitive }

// Hash returns admission_policy_hash_b64u: b64u(SHA-256(JCS(policy))).
func (p *Policy) Hash() string { return p.hash }

// Canonical returns a copy of the policy's JCS bytes.
func (p *Policy) Canonical() []byte { return bytes.Clone(p.canonical) }

func perr(path string, err error) error { return &PolicyError{Path: path, Err: err} }

// Parse parses an admission policy strictly (docs/spec/admission-policy-v1.md
// section 4): size limit, one JSON object, the version checked first, no
// unknown or missing member, exact types and enumerations, no
// contradiction, and the JSON Schema. It returns nothing on error.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxPolicySize {
		return nil, perr(jsonobj.Root, jsonobj.ErrTooLarge)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxPolicySize})
	if err != nil {
		if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
			return nil, perr(pe.Path, pe.Err)
		}
		return nil, perr(jsonobj.Root, err)
	}
	if v, ok := root.GetString("admission_policy_version"); !ok || v != Version {
		if !ok {
			return nil, fmt.Errorf("%w: no admission_policy_version", ErrUnknownVersion)
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownVersion, safetext.Clip(v, 64))
	}
	r := &jsonobj.Reader{}
	p := &Policy{}
	top := r.Object(root, jsonobj.Root, map[string]bool{
		"admission_policy_version": true, "sensitive": true, "recipes": true, "prompt_modes": true,
		"bootstrap": true, "skills": true, "extra_system_prompt": true, "tools": true, "owners": true,
	})
	if v := top["sensitive"]; v != nil {
		p.sensitive = r.Bool(v, "$.sensitive")
	}
	if v := top["recipes"]; v != nil {
		for i, e := range r.Array(v, "$.recipes", 1, MaxList) {
			path := jsonobj.Index("$.recipes", i)
			f := r.Object(e, path, map[string]bool{"id": true, "version": true})
			p.recipes = append(p.recipes, recipeRef{
				ID:      r.Ident(f["id"], path+".id", 64),
				Version: r.Ident(f["version"], path+".version", 32),
			})
		}
	}
	if v := top["prompt_modes"]; v != nil {
		p.promptModes = r.Strings(v, "$.prompt_modes", 1, 3, 0)
		for i, m := range p.promptModes {
			enum(r, m, jsonobj.Index("$.prompt_modes", i), "full", "minimal", "none")
		}
	}
	if v := top["bootstrap"]; v != nil {
		p.bootstrap = readBootstrap(r, v)
	}
	if v := top["skills"]; v != nil {
		p.skills = readSkills(r, v)
	}
	if v := top["extra_system_prompt"]; v != nil {
		p.extraSystemPrompt = enumValue(r, v, "$.extra_system_prompt", Refuse, Allow)
	}
	if v := top["tools"]; v != nil {
		p.tools = readTools(r, v)
	}
	if v := top["owners"]; v != nil {
		p.owners = readOwners(r, v)
	}
	if err := r.Err(); err != nil {
		if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
			return nil, perr(pe.Path, pe.Err)
		}
		return nil, perr(jsonobj.Root, err)
	}
	if err := p.checkConsistent(); err != nil {
		return nil, err
	}
	// The schema states the same rules; a disagreement is a bug, and the
	// document is refused either way.
	if err := schemas.Validate(schemas.AdmissionPolicyV1, data); err != nil {
		return nil, perr(jsonobj.Root, fmt.Errorf("%w: %w", jsonobj.ErrWrongType, err))
	}
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return nil, perr(jsonobj.Root, fmt.Errorf("%w: %w", jsonobj.ErrSyntax, err))
	}
	p.canonical = canon
	p.hash = b64u.SHA256(canon)
	p.index()
	return p, nil
}

func enum(r *jsonobj.Reader, s, path string, allowed ...string) {
	if !slices.Contains(allowed, s) {
		r.Failf(path, jsonobj.ErrWrongType, "not one of %s", strings.Join(allowed, ", "))
	}
}

func enumValue(r *jsonobj.Reader, v *pohjson.Value, path string, allowed ...string) string {
	s, ok := r.Str(v, path)
	if ok {
		enum(r, s, path, allowed...)
	}
	return s
}

// names reads a list of distinct non-empty names.
func names(r *jsonobj.Reader, v *pohjson.Value, path string, min int) []string {
	ss := r.Strings(v, path, min, MaxList, MaxNameLen)
	seen := make(map[string]bool, len(ss))
	for i, s := range ss {
		p := jsonobj.Index(path, i)
		switch {
		case s == "":
			r.Fail(p, jsonobj.ErrMissingField)
		case seen[s]:
			r.Failf(p, jsonobj.ErrWrongType, "duplicate entry")
		}
		seen[s] = true
	}
	return ss
}

// hashes reads a list of 1..MaxList distinct b64u SHA-256 hashes.
func hashes(r *jsonobj.Reader, v *pohjson.Value, path string) []string {
	ss := names(r, v, path, 1)
	for i, s := range ss {
		if _, err := b64u.DecodeHash(s); err != nil {
			r.Failf(jsonobj.Index(path, i), jsonobj.ErrWrongType, "not b64u of 32 bytes")
		}
	}
	return ss
}

// onlyWhen reads the list member key of f, which must be present exactly
// when on is true.
func onlyWhen(r *jsonobj.Reader, f map[string]*pohjson.Value, path, key string, on bool, read func(*pohjson.Value, string)) {
	v := f[key]
	p := jsonobj.Key(path, key)
	switch {
	case on && v == nil:
		r.Fail(p, jsonobj.ErrMissingField)
	case !on && v != nil:
		r.Fail(p, fmt.Errorf("%w: not allowed with this mode", ErrContradiction))
	case on:
		read(v, p)
	}
}

func readBootstrap(r *jsonobj.Reader, v *pohjson.Value) bootstrapRules {
	const path = "$.bootstrap"
	f := r.Object(v, path, map[string]bool{
		"allowed_paths": true, "max_file_chars": true, "max_total_chars": true, "nul": true,
		"newlines": true, "content": true, "pinned_content_b64u": false,
	})
	var b bootstrapRules
	if f["allowed_paths"] != nil {
		b.AllowedPaths = names(r, f["allowed_paths"], path+".allowed_paths", 0)
	}
	if f["max_file_chars"] != nil {
		b.MaxFileChars = r.Int(f["max_file_chars"], path+".max_file_chars", 0, MaxChars)
	}
	if f["max_total_chars"] != nil {
		b.MaxTotalChars = r.Int(f["max_total_chars"], path+".max_total_chars", 0, MaxChars)
	}
	if f["nul"] != nil {
		b.Nul = enumValue(r, f["nul"], path+".nul", NulRefuse, NulStrip)
	}
	if f["newlines"] != nil {
		b.Newlines = enumValue(r, f["newlines"], path+".newlines", NewlinesLF, NewlinesPreserve)
	}
	if f["content"] != nil {
		b.Content = enumValue(r, f["content"], path+".content", ContentPinned, ContentAny)
	}
	if r.Err() != nil {
		return b
	}
	onlyWhen(r, f, path, "pinned_content_b64u", b.Content == ContentPinned, func(v *pohjson.Value, p string) {
		ms := r.Members(v, p, 0, MaxList)
		b.PinnedContent = make(map[string][]string, len(ms))
		for _, m := range ms {
			mp := jsonobj.Key(p, m.Key)
			if !slices.Contains(b.AllowedPaths, m.Key) {
				r.Fail(mp, fmt.Errorf("%w: path not in allowed_paths", ErrContradiction))
			}
			b.PinnedContent[m.Key] = hashes(r, m.Value, mp)
		}
	})
	return b
}

func readSkills(r *jsonobj.Reader, v *pohjson.Value) skillsRules {
	const path = "$.skills"
	f := r.Object(v, path, map[string]bool{
		"mode": true, "preamble_hashes_b64u": false, "allowed": false,
		"env_overrides": true, "env_overrides_hashes_b64u": false,
	})
	var s skillsRules
	if f["mode"] != nil {
		s.Mode = enumValue(r, f["mode"], path+".mode", SkillsNone, SkillsAllowlist, SkillsAll)
	}
	if f["env_overrides"] != nil {
		s.EnvOverrides = enumValue(r, f["env_overrides"], path+".env_overrides", EnvRefuse, EnvPinned, EnvAny)
	}
	if r.Err() != nil {
		return s
	}
	allow := s.Mode == SkillsAllowlist
	onlyWhen(r, f, path, "preamble_hashes_b64u", allow, func(v *pohjson.Value, p string) {
		s.PreambleHashes = hashes(r, v, p)
	})
	onlyWhen(r, f, path, "allowed", allow, func(v *pohjson.Value, p string) {
		seen := map[string]bool{}
		for i, e := range r.Array(v, p, 1, MaxList) {
			ep := jsonobj.Index(p, i)
			ef := r.Object(e, ep, map[string]bool{"name": true, "entry_hash_b64u": true})
			sk := skillRule{Name: r.Ident(ef["name"], ep+".name", MaxNameLen)}
			if h := ef["entry_hash_b64u"]; h != nil {
				if b := r.B64u(h, ep+".entry_hash_b64u", 32); b != nil {
					sk.EntryHash = b64u.Encode(b)
				}
			}
			if seen[sk.Name] {
				r.Failf(ep+".name", jsonobj.ErrWrongType, "duplicate entry")
			}
			seen[sk.Name] = true
			s.Allowed = append(s.Allowed, sk)
		}
	})
	onlyWhen(r, f, path, "env_overrides_hashes_b64u", s.EnvOverrides == EnvPinned, func(v *pohjson.Value, p string) {
		s.EnvOverrideHash = hashes(r, v, p)
	})
	return s
}

func readTools(r *jsonobj.Reader, v *pohjson.Value) toolsRules {
	const path = "$.tools"
	f := r.Object(v, path, map[string]bool{
		"schemas": true, "schema_pack_hashes_b64u": false, "plugin_summaries": true,
		"names": true, "allowed_names": false,
	})
	var t toolsRules
	if f["schemas"] != nil {
		t.Schemas = enumValue(r, f["schemas"], path+".schemas", SchemasPinned, SchemasAny)
	}
	if f["plugin_summaries"] != nil {
		t.PluginSummaries = enumValue(r, f["plugin_summaries"], path+".plugin_summaries", Refuse, Allow)
	}
	if f["names"] != nil {
		t.Names = enumValue(r, f["names"], path+".names", NamesAllowlist, NamesAny)
	}
	if r.Err() != nil {
		return t
	}
	onlyWhen(r, f, path, "schema_pack_hashes_b64u", t.Schemas == SchemasPinned, func(v *pohjson.Value, p string) {
		t.SchemaPackHash = hashes(r, v, p)
	})
	onlyWhen(r, f, path, "allowed_names", t.Names == NamesAllowlist, func(v *pohjson.Value, p string) {
		t.AllowedNames = names(r, v, p, 1)
		for i, n := range t.AllowedNames {
			if toolKey(n) != n {
				r.Failf(jsonobj.Index(p, i), jsonobj.ErrWrongType, "not a lowercase, trimmed tool name")
			}
		}
	})
	return t
}

func readOwners(r *jsonobj.Reader, v *pohjson.Value) ownersRules {
	const path = "$.owners"
	f := r.Object(v, path, map[string]bool{"display": true, "hmac_values": false})
	var o ownersRules
	if f["display"] != nil {
		o.Display = enumValue(r, f["display"], path+".display", OwnersNone, OwnersHMAC, OwnersAny)
	}
	if r.Err() != nil {
		return o
	}
	onlyWhen(r, f, path, "hmac_values", o.Display == OwnersHMAC, func(v *pohjson.Value, p string) {
		o.HMACValues = names(r, v, p, 1)
		for i, h := range o.HMACValues {
			if !isLowerHex(h) || len(h) < 12 || len(h) > 64 {
				r.Failf(jsonobj.Index(p, i), jsonobj.ErrWrongType, "not 12 to 64 lowercase hex digits")
			}
		}
	})
	return o
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkConsistent refuses contradictions the per-member reads cannot see:
// duplicate recipes and modes, a total limit below the file limit, and a
// sensitive policy with any relaxed choice (section 5).
func (p *Policy) checkConsistent() error {
	seen := map[recipeRef]bool{}
	for i, rc := range p.recipes {
		if seen[rc] {
			return perr(jsonobj.Index("$.recipes", i), fmt.Errorf("%w: duplicate entry", jsonobj.ErrWrongType))
		}
		seen[rc] = true
	}
	for i, m := range p.promptModes {
		if slices.Index(p.promptModes, m) != i {
			return perr(jsonobj.Index("$.prompt_modes", i), fmt.Errorf("%w: duplicate entry", jsonobj.ErrWrongType))
		}
	}
	if p.bootstrap.MaxTotalChars < p.bootstrap.MaxFileChars {
		return perr("$.bootstrap.max_total_chars", fmt.Errorf("%w: below max_file_chars", ErrContradiction))
	}
	if !p.sensitive {
		return nil
	}
	for _, c := range []struct {
		path, got, want string
	}{
		{"$.bootstrap.nul", p.bootstrap.Nul, NulRefuse},
		{"$.bootstrap.content", p.bootstrap.Content, ContentPinned},
		{"$.extra_system_prompt", p.extraSystemPrompt, Refuse},
		{"$.tools.schemas", p.tools.Schemas, SchemasPinned},
		{"$.tools.plugin_summaries", p.tools.PluginSummaries, Refuse},
	} {
		if c.got != c.want {
			return perr(c.path, fmt.Errorf("%w: a sensitive policy requires %q", ErrContradiction, c.want))
		}
	}
	if p.skills.Mode == SkillsAll {
		return perr("$.skills.mode", fmt.Errorf("%w: a sensitive policy refuses \"all\"", ErrContradiction))
	}
	if p.skills.EnvOverrides == EnvAny {
		return perr("$.skills.env_overrides", fmt.Errorf("%w: a sensitive policy refuses \"any\"", ErrContradiction))
	}
	if p.owners.Display == OwnersAny {
		return perr("$.owners.display", fmt.Errorf("%w: a sensitive policy refuses \"any\"", ErrContradiction))
	}
	return nil
}
