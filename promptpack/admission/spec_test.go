package admission

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestSpecExamples checks the worked examples of
// docs/spec/admission-policy-v1.md section 10: each policy parses, its hash
// is the one printed after it, and the refusal text is what Admit returns.
func TestSpecExamples(t *testing.T) {
	spec := testfile.Read(t, filepath.Join("..", "..", "docs", "spec", "admission-policy-v1.md"))
	ex := regexp.MustCompile("(?s)<!-- example: ([a-z-]+) -->\n```json\n(.*?)\n```\nadmission_policy_hash_b64u: ([A-Za-z0-9_-]+)\n")
	ms := ex.FindAllSubmatch(spec, -1)
	if len(ms) != 2 {
		t.Fatalf("found %d policy examples, want 2", len(ms))
	}
	policies := map[string]*Policy{}
	for _, m := range ms {
		name := string(m[1])
		p, err := Parse(m[2])
		if err != nil {
			t.Fatalf("example %s: %v", name, err)
		}
		if p.Hash() != string(m[3]) {
			t.Fatalf("example %s: hash %s, the spec says %s", name, p.Hash(), m[3])
		}
		// The examples are the test policies of the same name, reformatted.
		if q := loadPolicy(t, name+".policy.json"); !bytes.Equal(q.Canonical(), p.Canonical()) {
			t.Fatalf("example %s differs from testdata/%s.policy.json", name, name)
		}
		policies[name] = p
	}
	ref := regexp.MustCompile("(?s)<!-- example-refusal: strict bootstrap-path -->\n```\n(.*?)\n```\n")
	m := ref.FindSubmatch(spec)
	if m == nil {
		t.Fatal("refusal example not found")
	}
	params := decodeMap(t, readTestdata(t, "base.params.json"))
	files := append(params["contextFiles"].([]any), map[string]any{"path": "EVIL.md", "content": "x"})
	err := policies["strict"].Admit(testPack(t, map[string]any{"contextFiles": files}, nil))
	if err == nil || err.Error() != string(m[1]) {
		t.Fatalf("refusal %v, the spec says %s", err, m[1])
	}
}
