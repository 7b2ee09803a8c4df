package openclawsig

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

func TestParseParamsAccepts(t *testing.T) {
	p, err := ParseParams([]byte(`{
		"workspaceDir": "/w ",
		"defaultThinkLevel": null,
		"reasoningLevel": "",
		"toolNames": ["b", "A"],
		"toolSummaries": {"x": "1", "9": null, "0": "zero"},
		"runtimeInfo": {"channel": " T ", "capabilities": ["a"], "os": null},
		"sandboxInfo": {"enabled": true, "hostBrowserAllowed": null, "elevated": {"allowed": true, "defaultLevel": ""}},
		"reactionGuidance": {"channel": "c"},
		"contextFiles": [{"content": "", "path": ""}],
		"extraSystemPrompt": "a\u2028b \ud83d\ude00",
		"userTime": "ignored", "userTimeFormat": "24"
	}`))
	if err != nil {
		t.Fatalf("ParseParams: %v", err)
	}
	if p.WorkspaceDir != "/w " || p.DefaultThinkLevel != nil || p.ReasoningLevel == nil || *p.ReasoningLevel != "" {
		t.Errorf("scalars: %+v", p)
	}
	if len(p.ToolSummaries) != 2 || p.ToolSummaries[0].Name != "x" || p.ToolSummaries[1].Name != "0" {
		t.Errorf("toolSummaries (document order, nulls dropped) = %+v", p.ToolSummaries)
	}
	if p.RuntimeInfo == nil || p.RuntimeInfo.Channel != " T " || p.SandboxInfo.HostBrowserAllowed != nil ||
		p.SandboxInfo.Elevated == nil || !p.SandboxInfo.Elevated.Allowed {
		t.Errorf("objects: %+v %+v", p.RuntimeInfo, p.SandboxInfo)
	}
	if p.ExtraSystemPrompt != "a\u2028b 😀" {
		t.Errorf("extraSystemPrompt = %+q", p.ExtraSystemPrompt)
	}
	// Null objects are absent.
	p, err = ParseParams([]byte(`{"workspaceDir":"","runtimeInfo":null,"sandboxInfo":null,"reactionGuidance":null,"toolNames":null}`))
	if err != nil || p.RuntimeInfo != nil || p.SandboxInfo != nil || p.ReactionGuidance != nil {
		t.Errorf("null objects: %+v, %v", p, err)
	}
	// An escaped backslash before "ud800" is not a surrogate escape.
	if _, err := ParseParams([]byte(`{"workspaceDir":"\\ud800"}`)); err != nil {
		t.Errorf("escaped backslash refused: %v", err)
	}
}

func TestParseParamsRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		path     string
	}{
		{"unknown top-level", `{"workspaceDir":"/w","ownerDisplay":"raw"}`, jsonobj.ErrUnknownField, "ownerDisplay"},
		{"key case differs", `{"WorkspaceDir":"/w"}`, jsonobj.ErrUnknownField, "WorkspaceDir"},
		{"unknown runtime", `{"workspaceDir":"/w","runtimeInfo":{"shell":"bash"}}`, jsonobj.ErrUnknownField, "runtimeInfo.shell"},
		{"unknown sandbox", `{"workspaceDir":"/w","sandboxInfo":{"containerWorkspaceDir":"/c"}}`, jsonobj.ErrUnknownField, "sandboxInfo.containerWorkspaceDir"},
		{"unknown elevated", `{"workspaceDir":"/w","sandboxInfo":{"elevated":{"x":1}}}`, jsonobj.ErrUnknownField, "sandboxInfo.elevated.x"},
		{"unknown context file key", `{"workspaceDir":"/w","contextFiles":[{"path":"a","content":"b","size":1}]}`, jsonobj.ErrUnknownField, "contextFiles[0].size"},
		{"unknown reaction key", `{"workspaceDir":"/w","reactionGuidance":{"channel":"c","emoji":"x"}}`, jsonobj.ErrUnknownField, "reactionGuidance.emoji"},
		{"long unknown key truncated", `{"workspaceDir":"/w","` + strings.Repeat("k", 100) + `":1}`, jsonobj.ErrUnknownField, `["` + strings.Repeat("k", 64) + `..."]`},
		{"duplicate top-level", `{"workspaceDir":"/a","workspaceDir":"/b"}`, pohjson.ErrDuplicateKey, "workspaceDir"},
		{"duplicate summary key", `{"workspaceDir":"/w","toolSummaries":{"a":"1","a":"2"}}`, pohjson.ErrDuplicateKey, "toolSummaries.a"},
		{"missing workspaceDir", `{}`, jsonobj.ErrMissingField, "workspaceDir"},
		{"null workspaceDir", `{"workspaceDir":null}`, jsonobj.ErrMissingField, "workspaceDir"},
		{"empty reactionGuidance", `{"workspaceDir":"/w","reactionGuidance":{}}`, jsonobj.ErrMissingField, "reactionGuidance.channel"},
		{"null reaction channel", `{"workspaceDir":"/w","reactionGuidance":{"level":"minimal","channel":null}}`, jsonobj.ErrMissingField, "reactionGuidance.channel"},
		{"elevated without level", `{"workspaceDir":"/w","sandboxInfo":{"enabled":true,"elevated":{"allowed":true}}}`, jsonobj.ErrMissingField, "sandboxInfo.elevated.defaultLevel"},
		{"context file without content", `{"workspaceDir":"/w","contextFiles":[{"path":"a"}]}`, jsonobj.ErrMissingField, "contextFiles[0].content"},
		{"context file null path", `{"workspaceDir":"/w","contextFiles":[{"path":null,"content":""}]}`, jsonobj.ErrMissingField, "contextFiles[0].path"},
		{"context file null", `{"workspaceDir":"/w","contextFiles":[null]}`, jsonobj.ErrMissingField, "contextFiles[0]"},
		{"number workspaceDir", `{"workspaceDir":1}`, jsonobj.ErrWrongType, "workspaceDir"},
		{"number capability", `{"workspaceDir":"/w","runtimeInfo":{"capabilities":["a",7]}}`, jsonobj.ErrWrongType, "runtimeInfo.capabilities[1]"},
		{"null tool name", `{"workspaceDir":"/w","toolNames":["a",null]}`, jsonobj.ErrMissingField, "toolNames[1]"},
		{"string bool", `{"workspaceDir":"/w","reasoningTagHint":"true"}`, jsonobj.ErrWrongType, "reasoningTagHint"},
		{"object for array", `{"workspaceDir":"/w","toolNames":{}}`, jsonobj.ErrWrongType, "toolNames"},
		{"array summaries", `{"workspaceDir":"/w","toolSummaries":[]}`, jsonobj.ErrWrongType, "toolSummaries"},
		{"number summary", `{"workspaceDir":"/w","toolSummaries":{"a":1}}`, jsonobj.ErrWrongType, "toolSummaries.a"},
		{"top-level array", `[]`, jsonobj.ErrWrongType, ""},
		{"top-level null", `null`, jsonobj.ErrWrongType, ""},
		{"empty input", ``, jsonobj.ErrSyntax, ""},
		{"truncated", `{"workspaceDir":"/w"`, jsonobj.ErrSyntax, ""},
		{"trailing value", `{"workspaceDir":"/w"}{}`, jsonobj.ErrSyntax, ""},
		{"trailing garbage", `{"workspaceDir":"/w"} x`, jsonobj.ErrSyntax, ""},
		{"invalid utf-8", "{\"workspaceDir\":\"\xff\"}", jsonobj.ErrSyntax, ""},
		{"lone high surrogate", `{"workspaceDir":"\ud800"}`, jsonobj.ErrSyntax, ""},
		{"lone low surrogate", `{"workspaceDir":"\udc00x"}`, jsonobj.ErrSyntax, ""},
		{"reversed surrogates", `{"workspaceDir":"\ude00\ud83d"}`, jsonobj.ErrSyntax, ""},
		{"surrogate in key", `{"\ud800":"x","workspaceDir":"/w"}`, jsonobj.ErrSyntax, ""},
		{"too large", `{"workspaceDir":"` + strings.Repeat("a", MaxParamsSize) + `"}`, jsonobj.ErrTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseParams([]byte(tc.in))
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if p != nil {
				t.Error("params returned with an error")
			}
			if !errors.Is(err, ErrInvalidParams) || !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			pe, ok := errors.AsType[*confdoc.ConfigError](err)
			if !ok {
				t.Fatalf("err %T is not *confdoc.ConfigError", err)
			}
			if tc.path != "" && pe.Key != tc.path && !strings.HasPrefix(pe.Key, tc.path) {
				t.Errorf("Path = %q, want %q", pe.Key, tc.path)
			}
		})
	}
}

// TestParamsErrorsHoldNoValues: values (possibly secret prompt text) never
// appear in errors.
func TestParamsErrorsHoldNoValues(t *testing.T) {
	const secret = "s3cr3t-prompt-text"
	for _, in := range []string{
		`{"workspaceDir":"` + secret + `","bogus":1}`,
		`{"workspaceDir":"/w","toolNames":["` + secret + `",1]}`,
		`{"workspaceDir":"/w","reasoningTagHint":"` + secret + `"}`,
		`{"workspaceDir":"` + secret + `"`,
	} {
		_, err := ParseParams([]byte(in))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("error %v for %s", err, in)
		}
	}
}

var (
	fuzzHarnessOnce sync.Once
	fuzzHarness     *Harness
)

// FuzzParseParams: ParseParams never panics, refuses with a *confdoc.ConfigError
// and no value, and whatever it accepts renders without error or panic to
// valid UTF-8, the same bytes twice.
func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"workspaceDir":"/w"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseParams(data)
		if err != nil {
			if _, ok := errors.AsType[*confdoc.ConfigError](err); p != nil || !ok || !errors.Is(err, ErrInvalidParams) {
				t.Fatalf("bad refusal: %v, %v", p, err)
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("accepted invalid UTF-8")
		}
		fuzzHarnessOnce.Do(func() {
			h, err := LoadHarnessDir(conformanceDir)
			if err != nil {
				return
			}
			trusted := map[string]string{}
			for _, n := range h.TemplateNames() {
				s, _ := h.Sig(n)
				trusted[n] = s.Hash
			}
			if h.checkTemplates(trusted) == nil {
				fuzzHarness = h
			}
		})
		if fuzzHarness == nil {
			return
		}
		r1, err := renderChecked(fuzzHarness, p)
		if err != nil {
			t.Fatalf("Render of accepted params: %v", err)
		}
		r2, _ := renderChecked(fuzzHarness, p)
		if !bytes.Equal(r1.Prompt, r2.Prompt) || !utf8.Valid(r1.Prompt) {
			t.Fatal("Render not deterministic or not UTF-8")
		}
	})
}
