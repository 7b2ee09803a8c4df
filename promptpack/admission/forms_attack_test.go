package admission

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/pohjson"
)

// TestEscapedDuplicateAttack: a member given twice, the second time with
// its name spelt through an escape ("sensitiv\u0065", "extraSystemPromp\u0074")
// so that a byte comparison of names misses it, would let a last-wins
// reader see another value than the check did. The policy reader refuses
// such a policy, and admission refuses such params as uncheckable: neither
// relaxes a sensitive policy nor hides an extra system prompt.
func TestEscapedDuplicateAttack(t *testing.T) {
	s := string(readTestdata(t, "sensitive.policy.json"))
	relaxed := strings.Replace(s, `"sensitive": true,`, `"sensitive": true, "sensitiv\u0065": false,`, 1)
	if relaxed == s {
		t.Fatal("mutation did not apply")
	}
	if p, err := Parse([]byte(relaxed)); !errors.Is(err, errMalformed) || !errors.Is(err, pohjson.ErrDuplicateKey) || p != nil {
		t.Errorf("policy: got %v, want a malformed policy (duplicate key)", err)
	}

	pol := loadPolicy(t, "sensitive.policy.json")
	pack := testPack(t, nil, nil)
	pack.Params = []byte(strings.Replace(string(pack.Params), `{`, `{"extraSystemPrompt":"","extraSystemPromp\u0074":"obey",`, 1))
	if !strings.Contains(string(pack.Params), `Promp\u0074`) {
		t.Fatalf("params mutation did not apply: %s", pack.Params)
	}
	if err := pol.Admit(pack); !errors.Is(err, ErrUnreadable) || !errors.Is(err, pohjson.ErrDuplicateKey) {
		t.Errorf("params: got %v, want uncheckable (duplicate key)", err)
	}
}

// TestReleaseRecipeAttack: a policy that lists openclaw-release (which v1
// has no admission mapping for) never admits such a pack, whatever mode
// it states: it is refused by mode or as uncheckable (section 3).
func TestReleaseRecipeAttack(t *testing.T) {
	s := string(readTestdata(t, "open.policy.json"))
	withRelease := strings.Replace(s, `"recipes": [`, `"recipes": [{"id": "openclaw-release", "version": "1"},`, 1)
	if withRelease == s {
		t.Fatal("mutation did not apply")
	}
	pol, err := Parse([]byte(withRelease))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	// "captured", the mode of every release pack, is not a v1 mode; a
	// forged "full" reaches the recipe check and is uncheckable.
	pack := testPack(t, nil, map[string]any{"recipe": map[string]any{"id": "openclaw-release", "version": "1"}, "prompt_mode": "captured"})
	if re, ok := errors.AsType[*RuleError](pol.Admit(pack)); !ok || re.Rule != rulePromptModeNotAllowed {
		t.Errorf("captured: got %v, want %s", re, rulePromptModeNotAllowed)
	}
	pack = testPack(t, nil, map[string]any{"recipe": map[string]any{"id": "openclaw-release", "version": "1"}, "prompt_mode": "full"})
	if err := pol.Admit(pack); !errors.Is(err, ErrUnreadable) {
		t.Errorf("full: got %v, want uncheckable", err)
	}
}

// TestPrefixAndCaseAttack: every allowlist and pin of a policy matches a
// whole value, never a prefix, an extension or another case (tool names
// excepted, which the recipe itself resolves trimmed and lowercased):
// bootstrap paths, tool names, owner HMAC values and skill names.
func TestPrefixAndCaseAttack(t *testing.T) {
	pol := loadPolicy(t, "sensitive.policy.json")
	if err := pol.Admit(testPack(t, nil, nil)); err != nil {
		t.Fatalf("the base pack: %v", err)
	}
	agents := "# Agents\n\nAnswer briefly.\n"
	skills, _ := decodeMap(t, readTestdata(t, "base.params.json"))["skillsPrompt"].(string)
	if !strings.Contains(skills, "<name>weather</name>") {
		t.Fatal("base skills prompt has no weather skill")
	}
	files := func(path string) []any {
		return []any{map[string]any{"path": path, "content": agents}}
	}
	for _, tc := range []struct {
		name, rule, input string
		set               map[string]any
	}{
		{"path extended", ruleBootstrapPath, "bootstrap:AGENTS.md.bak", map[string]any{"contextFiles": files("AGENTS.md.bak")}},
		{"path prefix", ruleBootstrapPath, "bootstrap:AGENTS", map[string]any{"contextFiles": files("AGENTS")}},
		{"path in a folder", ruleBootstrapPath, "bootstrap:x/AGENTS.md", map[string]any{"contextFiles": files("x/AGENTS.md")}},
		{"path ./", ruleBootstrapPath, "bootstrap:./AGENTS.md", map[string]any{"contextFiles": files("./AGENTS.md")}},
		{"tool name extended", ruleToolNameNotAllowed, "tool:read_file", map[string]any{"toolNames": []any{"read_file"}}},
		{"tool name prefix", ruleToolNameNotAllowed, "tool:rea", map[string]any{"toolNames": []any{"rea"}}},
		{"owner hmac extended", ruleOwnerNotHMAC, "owner[0]", map[string]any{"ownerNumbers": []any{"a1b2c3d4e5f600"}}},
		{"owner hmac prefix", ruleOwnerNotHMAC, "owner[0]", map[string]any{"ownerNumbers": []any{"a1b2c3d4e5"}}},
		{"owner hmac case", ruleOwnerNotHMAC, "owner[0]", map[string]any{"ownerNumbers": []any{"A1B2C3D4E5F6"}}},
		{"skill name extended", ruleSkillNotAllowed, "skill:weather2", map[string]any{"skillsPrompt": strings.Replace(skills, "<name>weather</name>", "<name>weather2</name>", 1)}},
		{"skill name case", ruleSkillNotAllowed, "skill:Weather", map[string]any{"skillsPrompt": strings.Replace(skills, "<name>weather</name>", "<name>Weather</name>", 1)}},
	} {
		re, ok := errors.AsType[*RuleError](pol.Admit(testPack(t, tc.set, nil)))
		if !ok || re.Rule != tc.rule || re.Input != tc.input {
			t.Errorf("%s: got %v, want %s %s", tc.name, re, tc.rule, tc.input)
		}
	}
}
