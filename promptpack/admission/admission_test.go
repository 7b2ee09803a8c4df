package admission

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/schemas"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	return testfile.Read(t, filepath.Join("testdata", name))
}

func loadPolicy(t *testing.T, name string) *Policy {
	t.Helper()
	p, err := Parse(readTestdata(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func decodeMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// testPack builds the pack of the admission vectors: base params with the
// top-level members of set replaced, and the pack members of packSet
// replaced (null removes an optional one).
func testPack(t testing.TB, set, packSet map[string]any) *promptpack.Pack {
	t.Helper()
	params := decodeMap(t, readTestdata(t, "base.params.json"))
	for k, v := range set {
		params[k] = v
	}
	pack := &promptpack.Pack{
		Recipe:      promptpack.RecipeRef{ID: openclawsig.ID, Version: openclawsig.Version},
		PromptMode:  "full",
		Params:      testjson.Marshal(t, params),
		ToolSchemas: map[string][]byte{},
	}
	schemasDoc := decodeMap(t, readTestdata(t, "base.tool_schemas.json"))
	env := map[string]string{}
	if err := json.Unmarshal(readTestdata(t, "base.skills_env.json"), &env); err != nil {
		t.Fatal(err)
	}
	pack.SkillsEnvOverrides = env
	for k, v := range packSet {
		switch k {
		case "recipe":
			m := v.(map[string]any)
			pack.Recipe = promptpack.RecipeRef{ID: m["id"].(string), Version: m["version"].(string)}
		case "prompt_mode":
			pack.PromptMode = v.(string)
		case "tool_schemas":
			schemasDoc = v.(map[string]any)
		case "skills_env_overrides":
			if v == nil {
				pack.SkillsEnvOverrides = nil
				continue
			}
			pack.SkillsEnvOverrides = map[string]string{}
			for ek, ev := range v.(map[string]any) {
				pack.SkillsEnvOverrides[ek] = ev.(string)
			}
		default:
			t.Fatalf("unknown pack member %q", k)
		}
	}
	for name, s := range schemasDoc {
		c, err := jcs.Canonicalize(testjson.Marshal(t, s))
		if err != nil {
			t.Fatal(err)
		}
		pack.ToolSchemas[name] = c
	}
	return pack
}

func TestAdmitVectors(t *testing.T) {
	vectors := packtest.AdmitVectors(t)
	if len(vectors) < 30 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	rules := map[string]bool{}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			pol := loadPolicy(t, v.Policy)
			pack := testPack(t, v.Set, v.Pack)
			err := pol.Admit(pack)
			if v.Rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			rules[v.Rule] = true
			re, ok := errors.AsType[*RuleError](err)
			if !ok {
				t.Fatalf("got %v, want rule %s", err, v.Rule)
			}
			if re.Rule != v.Rule || re.Input != v.Input {
				t.Fatalf("got %s %q, want %s %q", re.Rule, re.Input, v.Rule, v.Input)
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatal("RuleError does not match ErrRefused")
			}
			// The error names the input, never its content.
			params := decodeMap(t, pack.Params)
			for _, key := range []string{"extraSystemPrompt", "skillsPrompt"} {
				if s, _ := params[key].(string); len(s) > 8 && strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes %s", key)
				}
			}
			if files, ok := params["contextFiles"].([]any); ok {
				for _, f := range files {
					c := f.(map[string]any)["content"].(string)
					if len(c) > 2 && strings.Contains(err.Error(), c) {
						t.Fatalf("error quotes file content: %v", err)
					}
				}
			}
			if strings.Contains(err.Error(), "+1555") {
				t.Fatalf("error quotes an owner: %v", err)
			}
		})
	}
	// Every pack rule has a failing vector.
	for _, r := range []string{
		ruleRecipeNotAllowed, rulePromptModeNotAllowed, ruleBootstrapPath, ruleBootstrapDuplicate,
		ruleBootstrapFileTooLarge, ruleBootstrapTotalTooBig, ruleBootstrapBinary, ruleBootstrapNul,
		ruleBootstrapNewlines, ruleBootstrapNotPinned, ruleSkillsRefused, ruleSkillsMalformed,
		ruleSkillsPreamble, ruleSkillNotAllowed, ruleSkillNotPinned, ruleSkillWorkspace,
		ruleSkillsEnvRefused, ruleSkillsEnvNotPinned, ruleExtraSystemPrompt, ruleToolSchemasNotPinned,
		ruleToolSummaryRefused, ruleToolNameNotAllowed, ruleOwnersRefused, ruleOwnerNotHMAC,
	} {
		if !rules[r] {
			t.Errorf("no vector for rule %s", r)
		}
	}
}

// TestRelaxedChoicesAdmit shows that each rule is a policy choice: the
// open (non-sensitive) policy admits what the sensitive one refuses, apart
// from the rules every policy keeps (paths, NUL, binary, limits).
func TestRelaxedChoicesAdmit(t *testing.T) {
	open := loadPolicy(t, "open.policy.json")
	sens := loadPolicy(t, "sensitive.policy.json")
	notes := "<skill>\n    <name>notes</name>\n    <location>/home/agent/workspace/skills/notes/SKILL.md</location>\n  </skill>"
	for name, c := range map[string]struct {
		set, pack map[string]any
	}{
		"crlf":            {set: map[string]any{"contextFiles": []any{map[string]any{"path": "AGENTS.md", "content": "a\r\nb"}}}},
		"workspace-skill": {set: map[string]any{"skillsPrompt": "<available_skills>\n  " + notes + "\n</available_skills>"}},
		"extra":           {set: map[string]any{"extraSystemPrompt": "group context"}},
		"summary":         {set: map[string]any{"toolSummaries": map[string]any{"x": "y"}}},
		"tool-name":       {set: map[string]any{"toolNames": []any{"gateway"}}},
		"raw-owner":       {set: map[string]any{"ownerNumbers": []any{"+15551234567"}}},
		"minimal":         {set: map[string]any{"promptMode": "minimal"}, pack: map[string]any{"prompt_mode": "minimal"}},
		"env":             {pack: map[string]any{"skills_env_overrides": map[string]any{"A": "b"}}},
		"schemas":         {pack: map[string]any{"tool_schemas": map[string]any{}}},
	} {
		pack := testPack(t, c.set, c.pack)
		if err := open.Admit(pack); err != nil {
			t.Errorf("%s: open policy refused: %v", name, err)
		}
		if err := sens.Admit(pack); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: sensitive policy: got %v, want a refusal", name, err)
		}
	}
	for name, set := range map[string]map[string]any{
		"nul":    {"contextFiles": []any{map[string]any{"path": "AGENTS.md", "content": "a\x00"}}},
		"binary": {"contextFiles": []any{map[string]any{"path": "AGENTS.md", "content": "a\x07"}}},
		"path":   {"contextFiles": []any{map[string]any{"path": "secrets.env", "content": "a"}}},
	} {
		if err := open.Admit(testPack(t, set, nil)); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: open policy: got %v, want a refusal", name, err)
		}
	}
}

func TestAdmitUnreadable(t *testing.T) {
	pol := loadPolicy(t, "sensitive.policy.json")
	pack := testPack(t, nil, nil)
	pack.Params = []byte(`{"workspaceDir":"/w","unknownParam":1}`)
	err := pol.Admit(pack)
	if !errors.Is(err, ErrUnreadable) || errors.Is(err, ErrRefused) {
		t.Fatalf("got %v, want ErrUnreadable", err)
	}
	// A recipe the policy allows but admission cannot read: refused.
	doc := decodeMap(t, readTestdata(t, "open.policy.json"))
	doc["recipes"] = []any{map[string]any{"id": "other", "version": "1"}}
	other, err := Parse(testjson.Marshal(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	pack = testPack(t, nil, map[string]any{"recipe": map[string]any{"id": "other", "version": "1"}})
	if err := other.Admit(pack); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("got %v, want ErrUnreadable", err)
	}
	if err := pol.Admit(nil); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("nil pack: %v", err)
	}
}

func TestWorkspaceSkill(t *testing.T) {
	params, err := openclawsig.ParseParams([]byte(`{"workspaceDir":"/home/agent/workspace/",` +
		`"runtimeInfo":{"repoRoot":"/srv/repo"},` +
		`"sandboxInfo":{"workspaceDir":"/sandbox/ws","agentWorkspaceMount":"/agent"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for loc, want := range map[string]bool{
		"/opt/openclaw/skills/a/SKILL.md":         false,
		"/home/agent/workspace2/skills/SKILL.md":  false,
		"/home/agent/workspace/skills/a/SKILL.md": true,
		"/home/agent/workspace":                   true,
		"/srv/repo/skills/a/SKILL.md":             true,
		"/sandbox/ws/a/SKILL.md":                  true,
		"/agent/skills/a/SKILL.md":                true,
		"/opt/x/.pi/skills/a/SKILL.md":            true,
		"/opt/x/.agents/skills/a/SKILL.md":        true,
		"/opt/../home/agent/workspace/SKILL.md":   true,
		"/opt/./x/SKILL.md":                       true,
		"~/skills/a/SKILL.md":                     true,
		"skills/a/SKILL.md":                       true,
		"/opt\\x/SKILL.md":                        true,
	} {
		if got := isWorkspaceSkill(skillEntry{location: loc, hasLocation: true}, params); got != want {
			t.Errorf("%q: got %v, want %v", loc, got, want)
		}
	}
	if !isWorkspaceSkill(skillEntry{}, params) {
		t.Error("a skill without location is not refused")
	}
	for _, ws := range []string{"/", "~/.openclaw/workspace", "workspace"} {
		p := &openclawsig.Params{WorkspaceDir: ws}
		if !isWorkspaceSkill(skillEntry{location: "/opt/s/SKILL.md", hasLocation: true}, p) {
			t.Errorf("workspace %q: an outside skill is admitted although the workspace is unknown", ws)
		}
	}
}

func TestCheckRuntime(t *testing.T) {
	sens := loadPolicy(t, "sensitive.policy.json")
	open := loadPolicy(t, "open.policy.json")
	all := Runtime{MemoryLocked: true, NoDevelopmentOptions: true, FailModeDeny: true, VerificationEnforced: true}
	if err := sens.checkRuntime(all); err != nil {
		t.Fatal(err)
	}
	if err := open.checkRuntime(Runtime{}); err != nil {
		t.Fatalf("non-sensitive: %v", err)
	}
	for rule, rt := range map[string]Runtime{
		ruleRuntimeMemoryUnlocked: {NoDevelopmentOptions: true, FailModeDeny: true, VerificationEnforced: true},
		ruleRuntimeDevelopment:    {MemoryLocked: true, FailModeDeny: true, VerificationEnforced: true},
		ruleRuntimeFailMode:       {MemoryLocked: true, NoDevelopmentOptions: true, VerificationEnforced: true},
		ruleRuntimeVerification:   {MemoryLocked: true, NoDevelopmentOptions: true, FailModeDeny: true},
	} {
		re, ok := errors.AsType[*RuleError](sens.checkRuntime(rt))
		if !ok || re.Rule != rule {
			t.Errorf("%s: got %v", rule, re)
		}
	}
	if _, ok := errors.AsType[*RuleError](sens.checkRuntime(Runtime{})); !ok {
		t.Error("zero Runtime passes a sensitive policy")
	}
}

// setPointer sets or deletes (del) the member at a JSON pointer.
func setPointer(t *testing.T, doc map[string]any, ptr string, v any, del bool) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			t.Fatalf("pointer %s: %s is not an object", ptr, p)
		}
		m = next
	}
	last := parts[len(parts)-1]
	if del {
		if _, ok := m[last]; !ok {
			t.Fatalf("pointer %s: nothing to delete", ptr)
		}
		delete(m, last)
		return
	}
	m[last] = v
}

// codeOnly are the policy vectors whose rule JSON Schema cannot state
// (docs/spec/admission-policy-v1.md section 4): Parse refuses them, the
// schema does not.
var codeOnly = map[string]bool{
	"pinned-hash-padding-bits": true, // b64u padding bits
	"total-below-file":         true, // a relation between two members
	"pinned-path-not-allowed":  true, // keys of one member in another
	"skill-duplicate":          true, // uniqueness of one field
	"tool-name-not-lowercase":  true, // JavaScript toLowerCase
	"tool-name-untrimmed":      true, // JavaScript trim
}

// policyVector is one vector of policy-vectors.json, its document built.
type policyVector struct {
	Name  string
	Data  []byte
	Raw   bool   // the document is written out, not a base with changes
	Path  string // the JSON path the error names
	Error string // the error class
}

func policyVectors(t *testing.T) []policyVector {
	t.Helper()
	var doc struct {
		Vectors []struct {
			Name string  `json:"name"`
			Raw  *string `json:"raw"`
			Base string  `json:"base"`
			Set  []struct {
				Ptr   string `json:"ptr"`
				Value any    `json:"value"`
			} `json:"set"`
			Delete []string `json:"delete"`
			Path   string   `json:"path"`
			Error  string   `json:"error"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(readTestdata(t, "policy-vectors.json"), &doc); err != nil {
		t.Fatal(err)
	}
	out := make([]policyVector, 0, len(doc.Vectors))
	for _, v := range doc.Vectors {
		pv := policyVector{Name: v.Name, Raw: v.Raw != nil, Path: v.Path, Error: v.Error}
		if v.Raw != nil {
			pv.Data = []byte(*v.Raw)
		} else {
			m := decodeMap(t, readTestdata(t, v.Base))
			for _, s := range v.Set {
				setPointer(t, m, s.Ptr, s.Value, false)
			}
			for _, d := range v.Delete {
				setPointer(t, m, d, nil, true)
			}
			pv.Data = testjson.Marshal(t, m)
		}
		out = append(out, pv)
	}
	return out
}

func TestPolicyVectors(t *testing.T) {
	sentinels := map[string]error{
		"syntax": jsonobj.ErrSyntax, "unknown_version": errUnknownVersion, "unknown_field": jsonobj.ErrUnknownField,
		"missing_field": jsonobj.ErrMissingField, "wrong_type": jsonobj.ErrWrongType, "too_large": jsonobj.ErrTooLarge,
		"contradiction": errContradiction,
	}
	for _, v := range policyVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			data := v.Data
			p, err := Parse(data)
			if p != nil || err == nil {
				t.Fatalf("accepted")
			}
			want, ok := sentinels[v.Error]
			if !ok {
				t.Fatalf("unknown error class %q", v.Error)
			}
			if !errors.Is(err, want) {
				t.Fatalf("got %v, want %s", err, v.Error)
			}
			if v.Error == "unknown_version" {
				return
			}
			pe, ok := errors.AsType[*policyError](err)
			if !ok || !errors.Is(err, errMalformed) {
				t.Fatalf("got %T %v, want a *PolicyError", err, err)
			}
			if pe.Path() != v.Path {
				t.Fatalf("path %q, want %q (%v)", pe.Path(), v.Path, err)
			}
			// The schema refuses what the strict reader refuses, except
			// what JSON Schema cannot say (duplicate keys, padding bits).
			if !v.Raw && !codeOnly[v.Name] {
				if err := schemas.Validate(schemas.AdmissionPolicyV1, data); err == nil {
					t.Fatalf("the JSON Schema accepts it")
				}
			}
		})
	}
}

func TestPolicyFilesValidateAndHash(t *testing.T) {
	for _, name := range []string{"sensitive.policy.json", "strict.policy.json", "open.policy.json"} {
		raw := readTestdata(t, name)
		if err := schemas.Validate(schemas.AdmissionPolicyV1, raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := loadPolicy(t, name)
		want, err := jcs.Hash(raw)
		if err != nil {
			t.Fatal(err)
		}
		if p.Hash() != want || len(p.Hash()) != 43 {
			t.Fatalf("%s: hash %q, want %q", name, p.Hash(), want)
		}
		if !strings.HasPrefix(string(p.Canonical()), `{"admission_policy_version":"clawea.dev/admission-policy/v1",`) {
			t.Fatalf("%s: canonical form does not start with the version", name)
		}
		// Reformatting does not change the hash; a changed value does.
		q, err := Parse(p.Canonical())
		if err != nil || q.Hash() != p.Hash() {
			t.Fatalf("%s: canonical bytes reparse to %v, %v", name, q, err)
		}
	}
	if loadPolicy(t, "sensitive.policy.json").Hash() == loadPolicy(t, "strict.policy.json").Hash() {
		t.Fatal("different policies share a hash")
	}
}

func TestParseTooLarge(t *testing.T) {
	big := make([]byte, MaxPolicySize+1)
	if _, err := Parse(big); !errors.Is(err, jsonobj.ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
}

// TestZeroPolicyRefuses: a Policy not made by Parse admits nothing.
func TestZeroPolicyRefuses(t *testing.T) {
	var p Policy
	if err := p.Admit(testPack(t, nil, nil)); !errors.Is(err, ErrRefused) {
		t.Fatalf("zero policy: %v", err)
	}
}

// TestSuggest: for every vector pack, the suggested policy parses and
// admits the pack, or Suggest names the input no policy (or no sensitive
// policy) admits; a suggested policy pins what it saw.
func TestSuggest(t *testing.T) {
	vectors := packtest.AdmitVectors(t)
	never := []string{ruleBootstrapNul, ruleBootstrapBinary, ruleBootstrapDuplicate, ruleBootstrapPath}
	suggested := map[bool]int{}
	for _, v := range vectors {
		if _, ok := v.Pack["recipe"]; ok {
			continue
		}
		pack := testPack(t, v.Set, v.Pack)
		for _, sensitive := range []bool{false, true} {
			out, err := Suggest(pack, sensitive)
			if err != nil {
				re, ok := errors.AsType[*RuleError](err)
				if !ok {
					t.Fatalf("%s sensitive=%v: %v", v.Name, sensitive, err)
				}
				if !sensitive && !slices.Contains(never, re.Rule) {
					t.Fatalf("%s: a non-sensitive suggestion refused with %s", v.Name, re.Rule)
				}
				continue
			}
			p, err := Parse(out)
			if err != nil || p.Sensitive() != sensitive {
				t.Fatalf("%s: %v", v.Name, err)
			}
			if err := p.Admit(pack); err != nil {
				t.Fatalf("%s: the suggestion refuses its pack: %v", v.Name, err)
			}
			suggested[sensitive]++
		}
	}
	if suggested[false] < 25 || suggested[true] < 15 {
		t.Fatalf("suggestions: %v", suggested)
	}
	base := testPack(t, nil, nil)
	out, err := Suggest(base, true)
	if err != nil {
		t.Fatalf("base pack, sensitive: %v", err)
	}
	p, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]map[string]any{
		ruleBootstrapNotPinned: {"contextFiles": []any{map[string]any{"path": "AGENTS.md", "content": "# Agents\n\nchanged\n"}, map[string]any{"path": "SOUL.md", "content": "Be kind."}}},
		ruleSkillsPreamble:     {"skillsPrompt": "Obey.\n<available_skills/>"},
		ruleToolNameNotAllowed: {"toolNames": []any{"read", "exec", "gateway"}},
		ruleOwnerNotHMAC:       {"ownerNumbers": []any{"0123456789ab"}},
	} {
		re, ok := errors.AsType[*RuleError](p.Admit(testPack(t, set, nil)))
		if !ok || re.Rule != name {
			t.Errorf("suggested policy: got %v, want %s", re, name)
		}
	}
	// A pack no sensitive policy admits names the input in the way.
	_, err = Suggest(testPack(t, map[string]any{"extraSystemPrompt": "x"}, nil), true)
	if re, ok := errors.AsType[*RuleError](err); !ok || re.Rule != ruleExtraSystemPrompt {
		t.Fatalf("got %v", err)
	}
}

func TestAdmitRun(t *testing.T) {
	sens := loadPolicy(t, "sensitive.policy.json")
	ok := Runtime{MemoryLocked: true, NoDevelopmentOptions: true, FailModeDeny: true, VerificationEnforced: true}
	if err := sens.AdmitRun(testPack(t, nil, nil), ok); err != nil {
		t.Fatal(err)
	}
	bad := testPack(t, map[string]any{"extraSystemPrompt": "x"}, nil)
	if re, isRule := errors.AsType[*RuleError](sens.AdmitRun(bad, ok)); !isRule || re.Rule != ruleExtraSystemPrompt {
		t.Fatalf("got %v", re)
	}
	if re, isRule := errors.AsType[*RuleError](sens.AdmitRun(testPack(t, nil, nil), Runtime{})); !isRule || re.Rule != ruleRuntimeMemoryUnlocked {
		t.Fatalf("got %v", re)
	}
}
