// Package admission implements the admission policy (format
// clawea.dev/admission-policy/v1): the rules a prompt pack's inputs must
// satisfy before an attester starts a run with it or packctl writes it, and
// the sensitive mode that makes those rules strict and adds run-time
// obligations.
//
// The normative specification is docs/spec/admission-policy-v1.md. The flow
// is Parse (strict, errors name the JSON path), Hash (the
// admission_policy_hash_b64u an attestation carries), Admit (the pack's
// inputs) and, for a sensitive policy, checkRuntime (the attester's
// configuration). A refusal is a *RuleError naming the rule code and the
// input (a path hint, a skill or tool name, an index), never the content.
package admission

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// version is the value of "admission_policy_version". It sorts first among
// the members, so the canonical form begins with it.
const version = "clawea.dev/admission-policy/v1"

// Limits of format v1.
const (
	// MaxPolicySize bounds the policy document.
	MaxPolicySize = 1 << 20
	// maxList bounds every list and map of the policy.
	maxList = 1024
	// maxNameLen bounds a path hint, skill name, tool name or recipe
	// field, in bytes.
	maxNameLen = 1024
	// maxChars bounds the character limits (UTF-16 code units).
	maxChars = 1 << 30
)

// Modes of the enumerated members. The strictest choice of each is the
// one a sensitive policy requires.
const (
	nulRefuse = "refuse"
	nulStrip  = "strip"

	newlinesLF       = "lf"
	newlinesPreserve = "preserve"

	contentPinned = "pinned"
	contentAny    = "any"

	skillsNone      = "none"
	skillsAllowlist = "allowlist"
	skillsAll       = "all"

	envRefuse = "refuse"
	envPinned = "pinned"
	envAny    = "any"

	modeRefuse = "refuse"
	modeAllow  = "allow"

	schemasPinned = "pinned"
	schemasAny    = "any"

	namesAllowlist = "allowlist"
	namesAny       = "any"

	ownersNone = "none"
	ownersHMAC = "hmac"
	ownersAny  = "any"

	gatewayRequired = "required"
)

// Errors. Every Parse error is a *policyError that matches errMalformed
// and a more specific sentinel (errUnknownVersion, the jsonobj ones,
// errContradiction) with errors.Is.
var (
	// errMalformed: the document is not a v1 admission policy.
	errMalformed = errors.New("admission: malformed policy")
	// errUnknownVersion: admission_policy_version is missing or not
	// Version.
	errUnknownVersion = errors.New("admission: unknown policy version")
	// errContradiction: members that contradict each other, or a
	// sensitive policy with a relaxed choice.
	errContradiction = errors.New("contradictory policy")
)

// policyError reports where a policy was refused: the configuration error
// of every document read through schema/confdoc. Path() is a JSON path
// such as `$.skills.mode`; the error never quotes a value.
type policyError = confdoc.ConfigError

// recipeRef is one allowed recipe id and version.
type recipeRef struct {
	ID      string `conf:"id,required,min=1,max=64" json:"id"`
	Version string `conf:"version,required,min=1,max=32" json:"version"`
}

// bootstrapRules holds the bootstrap (context file) rules.
type bootstrapRules struct {
	AllowedPaths  []nameValue `conf:"allowed_paths,required,max=1024,unique" json:"allowed_paths"`
	MaxFileChars  int64       `conf:"max_file_chars,required,min=0,max=1073741824" json:"max_file_chars"`   // UTF-16 code units
	MaxTotalChars int64       `conf:"max_total_chars,required,min=0,max=1073741824" json:"max_total_chars"` // UTF-16 code units
	Nul           string      `conf:"nul,required,enum=refuse|strip" json:"nul"`
	Newlines      string      `conf:"newlines,required,enum=lf|preserve" json:"newlines"`
	Content       string      `conf:"content,required,enum=pinned|any" json:"content"`
	// PinnedContent maps a path hint to the allowed b64u SHA-256 hashes
	// of its content; present only when Content is contentPinned.
	PinnedContent map[string]hashList `conf:"pinned_content_b64u,max=1024" json:"pinned_content_b64u"`
}

// skillRule is one allowlisted skill entry.
type skillRule struct {
	Name      nameValue `conf:"name,required" json:"name"`
	EntryHash hashValue `conf:"entry_hash_b64u,required" json:"entry_hash_b64u"` // of the exact <skill>...</skill> bytes
}

// skillsRules holds the skills rules.
type skillsRules struct {
	Mode            string      `conf:"mode,required,enum=none|allowlist|all" json:"mode"`
	PreambleHashes  hashList    `conf:"preamble_hashes_b64u" json:"preamble_hashes_b64u,omitempty"` // allowlist mode
	Allowed         []skillRule `conf:"allowed,min=1,max=1024" json:"allowed,omitempty"`            // allowlist mode
	EnvOverrides    string      `conf:"env_overrides,required,enum=refuse|pinned|any" json:"env_overrides"`
	EnvOverrideHash hashList    `conf:"env_overrides_hashes_b64u" json:"env_overrides_hashes_b64u,omitempty"` // pinned mode
}

// toolsRules holds the tool rules.
type toolsRules struct {
	Schemas         string      `conf:"schemas,required,enum=pinned|any" json:"schemas"`
	SchemaPackHash  hashList    `conf:"schema_pack_hashes_b64u" json:"schema_pack_hashes_b64u,omitempty"` // pinned mode
	PluginSummaries string      `conf:"plugin_summaries,required,enum=refuse|allow" json:"plugin_summaries"`
	Names           string      `conf:"names,required,enum=allowlist|any" json:"names"`
	AllowedNames    []nameValue `conf:"allowed_names,min=1,max=1024,unique" json:"allowed_names,omitempty"` // allowlist mode; lowercase, trimmed
}

// ownersRules holds the owner-identity rule.
type ownersRules struct {
	Display    string   `conf:"display,required,enum=none|hmac|any" json:"display"`
	HMACValues []string `conf:"hmac_values,min=1,max=1024,unique" json:"hmac_values,omitempty"` // hmac mode; lowercase hex
}

// policyDoc declares the document (section 4.2): every member is required
// except the lists that a mode needs, which CheckConf requires exactly
// with their mode. Format v1 has no defaults. The numbers in the tags are
// maxList (1024), maxNameLen (1024) and maxChars (2^30);
// TestDeclaredLimits keeps them equal. Parse checks
// admission_policy_version before the document is decoded. The json tags
// are the same names for Suggest, which writes this declaration in its
// member order (section 4.2); the lists a mode needs are omitted when empty.
type policyDoc struct {
	Version     string         `conf:"admission_policy_version,required" json:"admission_policy_version"`
	Sensitive   bool           `conf:"sensitive,required" json:"sensitive"`
	Recipes     []recipeRef    `conf:"recipes,required,min=1,max=1024,unique" json:"recipes"`
	PromptModes []string       `conf:"prompt_modes,required,min=1,max=3,unique" json:"prompt_modes"`
	Bootstrap   bootstrapRules `conf:"bootstrap,required" json:"bootstrap"`
	Skills      skillsRules    `conf:"skills,required" json:"skills"`
	Extra       string         `conf:"extra_system_prompt,required,enum=refuse|allow" json:"extra_system_prompt"`
	Tools       toolsRules     `conf:"tools,required" json:"tools"`
	Owners      ownersRules    `conf:"owners,required" json:"owners"`
	// ModelGateway (OPTIONAL, absent means gatewayOptional) says whether
	// every model call of an admitted run must go through the attester's
	// model gateway (section 7.1).
	ModelGateway string `conf:"model_gateway,enum=required|optional" json:"model_gateway,omitempty"`
}

// nameValue is a path hint, skill name or tool name (the schema's "name"):
// 1 to maxNameLen bytes.
type nameValue string

func (n *nameValue) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	s, ok := v.Str()
	switch {
	case !ok:
		d.Fail(path, jsonobj.ErrWrongType, "not a string")
	case s == "":
		d.Fail(path, jsonobj.ErrMissingField, "is empty")
	case len(s) > maxNameLen:
		d.Fail(path, jsonobj.ErrTooLarge, "more than %d bytes long", maxNameLen)
	}
	*n = nameValue(s)
}

// hashValue is a b64u SHA-256 hash (the schema's "b64u_hash"): 43
// characters that decode to 32 bytes, padding bits zero.
type hashValue string

func (h *hashValue) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	s, ok := v.Str()
	if _, err := b64u.DecodeHash(s); !ok || err != nil {
		d.Fail(path, jsonobj.ErrWrongType, "not b64u of 32 bytes")
	}
	*h = hashValue(s)
}

// hashList is 1 to maxList distinct hashes (the schema's "hash_list"). It
// reads its own limits because it is also the value type of a map, whose
// values carry no tag.
type hashList []string

func (l *hashList) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	es := v.Elems()
	switch {
	case v.Kind() != pohjson.Array:
		d.Fail(path, jsonobj.ErrWrongType, "not an array")
	case len(es) > maxList:
		d.Fail(path, jsonobj.ErrTooLarge, "more than %d entries", maxList)
	case len(es) == 0:
		d.Fail(path, jsonobj.ErrMissingField, "fewer than 1 entries")
	}
	out := make(hashList, 0, len(es))
	seen := make(map[hashValue]bool, len(es))
	for i, e := range es {
		var h hashValue
		ep := jsonobj.Index(path, i)
		d.Decode(e, ep, &h)
		if d.Failed() {
			return
		}
		if seen[h] {
			d.Fail(ep, jsonobj.ErrWrongType, "duplicate entry")
			return
		}
		seen[h] = true
		out = append(out, string(h))
	}
	*l = out
}

// CheckConf applies the rules that span members (section 4.3, rules 3 to
// 5), in this order: entry formats the tags cannot state, the lists a mode
// needs (present exactly with it), the relations between members, and the
// strict choices of a sensitive policy (section 5).
func (doc *policyDoc) CheckConf(d *confdoc.Decoder, _ string) {
	b, s, t, o := &doc.Bootstrap, &doc.Skills, &doc.Tools, &doc.Owners

	for i, m := range doc.PromptModes {
		if !slices.Contains([]string{"full", "minimal", "none"}, m) {
			d.Fail(jsonobj.Index("$.prompt_modes", i), jsonobj.ErrWrongType, "must be one of full, minimal, none")
		}
	}
	seen := make(map[nameValue]bool, len(s.Allowed))
	for i, sk := range s.Allowed {
		if seen[sk.Name] {
			d.Fail(jsonobj.Index("$.skills.allowed", i)+".name", jsonobj.ErrWrongType, "duplicate entry")
		}
		seen[sk.Name] = true
	}
	for i, n := range t.AllowedNames {
		if toolKey(string(n)) != string(n) {
			d.Fail(jsonobj.Index("$.tools.allowed_names", i), jsonobj.ErrWrongType, "not a lowercase, trimmed tool name")
		}
	}
	for i, h := range o.HMACValues {
		if !isLowerHex(h) || len(h) < 12 || len(h) > 64 {
			d.Fail(jsonobj.Index("$.owners.hmac_values", i), jsonobj.ErrWrongType, "not 12 to 64 lowercase hex digits")
		}
	}

	// confdoc leaves a member nil exactly when it is absent: a present
	// list has at least one entry, a present map is made even when empty.
	for _, m := range []struct {
		path          string
		present, mode bool
	}{
		{"$.bootstrap.pinned_content_b64u", b.PinnedContent != nil, b.Content == contentPinned},
		{"$.skills.preamble_hashes_b64u", s.PreambleHashes != nil, s.Mode == skillsAllowlist},
		{"$.skills.allowed", s.Allowed != nil, s.Mode == skillsAllowlist},
		{"$.skills.env_overrides_hashes_b64u", s.EnvOverrideHash != nil, s.EnvOverrides == envPinned},
		{"$.tools.schema_pack_hashes_b64u", t.SchemaPackHash != nil, t.Schemas == schemasPinned},
		{"$.tools.allowed_names", t.AllowedNames != nil, t.Names == namesAllowlist},
		{"$.owners.hmac_values", o.HMACValues != nil, o.Display == ownersHMAC},
	} {
		switch {
		case m.mode && !m.present:
			d.Fail(m.path, jsonobj.ErrMissingField, "is required with this mode")
		case !m.mode && m.present:
			d.Fail(m.path, errContradiction, "not allowed with this mode")
		}
	}

	if b.MaxTotalChars < b.MaxFileChars {
		d.Fail("$.bootstrap.max_total_chars", errContradiction, "below max_file_chars")
	}
	for _, path := range slices.Sorted(maps.Keys(b.PinnedContent)) {
		if !slices.Contains(b.AllowedPaths, nameValue(path)) {
			d.Fail(jsonobj.Key("$.bootstrap.pinned_content_b64u", path), errContradiction, "path not in allowed_paths")
		}
	}

	if !doc.Sensitive {
		return
	}
	for _, c := range []struct {
		path, got string
		want      []string
	}{
		{"$.bootstrap.nul", b.Nul, []string{nulRefuse}},
		{"$.bootstrap.content", b.Content, []string{contentPinned}},
		{"$.skills.mode", s.Mode, []string{skillsNone, skillsAllowlist}},
		{"$.skills.env_overrides", s.EnvOverrides, []string{envRefuse, envPinned}},
		{"$.extra_system_prompt", doc.Extra, []string{modeRefuse}},
		{"$.tools.schemas", t.Schemas, []string{schemasPinned}},
		{"$.tools.plugin_summaries", t.PluginSummaries, []string{modeRefuse}},
		{"$.owners.display", o.Display, []string{ownersNone, ownersHMAC}},
	} {
		if !slices.Contains(c.want, c.got) {
			d.Fail(c.path, errContradiction, "a sensitive policy requires %s", quoteList(c.want))
		}
	}
}

// quoteList writes want as `"a"` or `"a" or "b"`.
func quoteList(want []string) string {
	out := fmt.Sprintf("%q", want[0])
	for _, w := range want[1:] {
		out += fmt.Sprintf(" or %q", w)
	}
	return out
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
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
	modelGateway      bool

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

// set returns the entries of ss as a lookup set.
func set[S ~[]E, E ~string](ss S) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[string(s)] = true
	}
	return m
}

// index builds the lookup sets.
func (p *Policy) index() {
	p.paths = set(p.bootstrap.AllowedPaths)
	p.pinned = make(map[string]map[string]bool, len(p.bootstrap.PinnedContent))
	for path, hs := range p.bootstrap.PinnedContent {
		p.pinned[path] = set(hs)
	}
	p.skillPins = make(map[string]string, len(p.skills.Allowed))
	for _, sk := range p.skills.Allowed {
		p.skillPins[string(sk.Name)] = string(sk.EntryHash)
	}
	p.toolNames = set(p.tools.AllowedNames)
	p.hmacs = set(p.owners.HMACValues)
}

// Sensitive reports whether the policy is sensitive (section 5): the run
// has obligations (checkRuntime) and its attestation says so.
func (p *Policy) Sensitive() bool { return p.sensitive }

// RequiresGateway reports whether every model call of a run admitted under
// the policy must go through the attester's model gateway (section 7.1):
// the attester then refuses to attest a run with an llm_call its gateway
// did not receipt.
func (p *Policy) RequiresGateway() bool { return p.modelGateway }

// Hash returns admission_policy_hash_b64u: b64u(SHA-256(JCS(policy))).
func (p *Policy) Hash() string { return p.hash }

// Canonical returns a copy of the policy's JCS bytes.
func (p *Policy) Canonical() []byte { return bytes.Clone(p.canonical) }

// Parse parses an admission policy strictly (docs/spec/admission-policy-v1.md
// section 4): size limit, one JSON object, the version checked first, then
// the declaration policyDoc (no unknown or missing member, exact types,
// ranges and enumerations) and its CheckConf (modes, relations, sensitive
// mode). It refuses every document the JSON Schema refuses, and more
// (TestDecoderAgreesWithSchema), so the schema is not run again. It
// returns nothing on error.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxPolicySize {
		return nil, &policyError{Doc: errMalformed, Err: jsonobj.ErrTooLarge, Msg: fmt.Sprintf("more than %d bytes", MaxPolicySize)}
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxPolicySize})
	if err != nil {
		return nil, confdoc.FromPathError(errMalformed, err)
	}
	if v, ok := root.GetString("admission_policy_version"); !ok || v != version {
		return nil, &policyError{Doc: errMalformed, Key: "admission_policy_version", Err: errUnknownVersion, Msg: fmt.Sprintf("missing or unsupported, want %q", version)}
	}
	var doc policyDoc
	if err := confdoc.Decode(root, &doc, confdoc.Options{Doc: errMalformed}); err != nil {
		return nil, err
	}
	canon, err := jcs.Canonicalize(data)
	if err != nil {
		return nil, &policyError{Doc: errMalformed, Err: jsonobj.ErrSyntax, Msg: err.Error()}
	}
	p := &Policy{
		sensitive: doc.Sensitive, recipes: doc.Recipes, promptModes: doc.PromptModes,
		bootstrap: doc.Bootstrap, skills: doc.Skills, extraSystemPrompt: doc.Extra,
		tools: doc.Tools, owners: doc.Owners, modelGateway: doc.ModelGateway == gatewayRequired,
		canonical: canon, hash: b64u.SHA256(canon),
	}
	p.index()
	return p, nil
}
