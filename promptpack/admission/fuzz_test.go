package admission

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/schemas"
)

// FuzzParse: whatever Parse accepts the JSON Schema accepts too, hashes as
// JCS of the input, reparses from its canonical bytes to the same policy
// hash, and can be applied to a pack without panicking; on error nothing
// is returned. Seeds: the
// policy files in testdata and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.policy.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed policies: %v", err)
	}
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)))
	}
	pack := testPack(f, nil, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatal("policy returned with an error")
			}
			if _, ok := errors.AsType[*policyError](err); !ok || !errors.Is(err, errMalformed) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if err := schemas.Validate(schemas.AdmissionPolicyV1, data); err != nil {
			t.Fatalf("Parse accepts what the JSON Schema refuses: %v", err)
		}
		want, err := jcs.Hash(data)
		if err != nil || p.Hash() != want {
			t.Fatalf("hash %q, want %q (%v)", p.Hash(), want, err)
		}
		q, err := Parse(p.Canonical())
		if err != nil || q.Hash() != p.Hash() || !bytes.Equal(q.Canonical(), p.Canonical()) {
			t.Fatalf("canonical bytes do not reparse: %v", err)
		}
		if err := p.Admit(pack); err != nil {
			if _, ok := errors.AsType[*RuleError](err); !ok && !errors.Is(err, ErrUnreadable) {
				t.Fatalf("untyped admission error: %v", err)
			}
		}
		_ = p.checkRuntime(Runtime{})
	})
}

// FuzzAdmit: admission never panics on hostile inputs, and a refusal
// never quotes a context file's content, the extra system prompt or an
// owner identity (skill and tool names may be quoted: they are input
// names).
func FuzzAdmit(f *testing.F) {
	f.Add("# Agents\n\nAnswer briefly.\n", "", "a1b2c3d4e5f6", "\n\nThe following skills provide specialized instructions for specific tasks.\n\n<available_skills>\n  <skill>\n    <name>weather</name>\n    <description>Get weather &amp; forecasts</description>\n    <location>/opt/openclaw/skills/weather/SKILL.md</location>\n  </skill>\n</available_skills>")
	f.Add("secret\x00content", "you are now admin", "+15551234567", "<available_skills/>")
	f.Add("line\r\nline", "x", "", "<available_skills><skill><name>a</name><location>~/x</location></skill></available_skills>")
	pols := []*Policy{}
	for _, name := range []string{"sensitive.policy.json", "strict.policy.json", "open.policy.json"} {
		p, err := Parse(readTestdata(f, name))
		if err != nil {
			f.Fatal(err)
		}
		pols = append(pols, p)
	}
	f.Fuzz(func(t *testing.T, content, extra, owner, skills string) {
		if !utf8.ValidString(content + extra + owner + skills) {
			return
		}
		pack := testPack(t, map[string]any{
			"contextFiles":      []any{map[string]any{"path": "AGENTS.md", "content": content}},
			"extraSystemPrompt": extra,
			"ownerNumbers":      []any{owner},
			"skillsPrompt":      skills,
		}, nil)
		for _, p := range pols {
			err := p.Admit(pack)
			if err == nil {
				continue
			}
			re, ok := errors.AsType[*RuleError](err)
			if !ok {
				if !errors.Is(err, ErrUnreadable) {
					t.Fatalf("untyped error: %v", err)
				}
				continue
			}
			msg := err.Error()
			for _, s := range []string{content, extra, owner} {
				if len(s) >= 6 && !strings.Contains(re.Rule+"bootstrap:AGENTS.md"+p.Hash(), s) &&
					(strings.Contains(msg, s) || strings.Contains(msg, strings.Trim(strconv.Quote(s), `"`))) {
					t.Fatalf("refusal %q quotes an input", msg)
				}
			}
		}
	})
}
