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
