package openclawsig

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
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
		{"unknown top-level", `{"workspaceDir":"/w","ownerDisplay":"raw"}`, errUnknownField, "ownerDisplay"},
		{"key case differs", `{"WorkspaceDir":"/w"}`, errUnknownField, "WorkspaceDir"},
		{"unknown runtime", `{"workspaceDir":"/w","runtimeInfo":{"shell":"bash"}}`, errUnknownField, "runtimeInfo.shell"},
		{"unknown sandbox", `{"workspaceDir":"/w","sandboxInfo":{"containerWorkspaceDir":"/c"}}`, errUnknownField, "sandboxInfo.containerWorkspaceDir"},
		{"unknown elevated", `{"workspaceDir":"/w","sandboxInfo":{"elevated":{"x":1}}}`, errUnknownField, "sandboxInfo.elevated.x"},
		{"unknown context file key", `{"workspaceDir":"/w","contextFiles":[{"path":"a","content":"b","size":1}]}`, errUnknownField, "contextFiles[0].size"},
		{"unknown reaction key", `{"workspaceDir":"/w","reactionGuidance":{"channel":"c","emoji":"x"}}`, errUnknownField, "reactionGuidance.emoji"},
		{"long unknown key truncated", `{"workspaceDir":"/w","` + strings.Repeat("k", 100) + `":1}`, errUnknownField, strings.Repeat("k", 64) + "..."},
		{"duplicate top-level", `{"workspaceDir":"/a","workspaceDir":"/b"}`, errDuplicateField, "workspaceDir"},
		{"duplicate summary key", `{"workspaceDir":"/w","toolSummaries":{"a":"1","a":"2"}}`, errDuplicateField, "toolSummaries.a"},
		{"missing workspaceDir", `{}`, errMissingField, "workspaceDir"},
		{"null workspaceDir", `{"workspaceDir":null}`, errMissingField, "workspaceDir"},
		{"empty reactionGuidance", `{"workspaceDir":"/w","reactionGuidance":{}}`, errMissingField, "reactionGuidance.channel"},
		{"null reaction channel", `{"workspaceDir":"/w","reactionGuidance":{"level":"minimal","channel":null}}`, errMissingField, "reactionGuidance.channel"},
		{"elevated without level", `{"workspaceDir":"/w","sandboxInfo":{"enabled":true,"elevated":{"allowed":true}}}`, errMissingField, "sandboxInfo.elevated.defaultLevel"},
		{"context file without content", `{"workspaceDir":"/w","contextFiles":[{"path":"a"}]}`, errMissingField, "contextFiles[0].content"},
		{"context file null path", `{"workspaceDir":"/w","contextFiles":[{"path":null,"content":""}]}`, errMissingField, "contextFiles[0].path"},
		{"context file null", `{"workspaceDir":"/w","contextFiles":[null]}`, errMissingField, "contextFiles[0]"},
		{"number workspaceDir", `{"workspaceDir":1}`, errWrongType, "workspaceDir"},
		{"number capability", `{"workspaceDir":"/w","runtimeInfo":{"capabilities":["a",7]}}`, errWrongType, "runtimeInfo.capabilities[1]"},
		{"null tool name", `{"workspaceDir":"/w","toolNames":["a",null]}`, errMissingField, "toolNames[1]"},
		{"string bool", `{"workspaceDir":"/w","reasoningTagHint":"true"}`, errWrongType, "reasoningTagHint"},
		{"object for array", `{"workspaceDir":"/w","toolNames":{}}`, errWrongType, "toolNames"},
		{"array summaries", `{"workspaceDir":"/w","toolSummaries":[]}`, errWrongType, "toolSummaries"},
		{"number summary", `{"workspaceDir":"/w","toolSummaries":{"a":1}}`, errWrongType, "toolSummaries.a"},
		{"top-level array", `[]`, errWrongType, ""},
		{"top-level null", `null`, errWrongType, ""},
		{"empty input", ``, errMalformedJSON, ""},
		{"truncated", `{"workspaceDir":"/w"`, errMalformedJSON, ""},
		{"trailing value", `{"workspaceDir":"/w"}{}`, errMalformedJSON, ""},
		{"trailing garbage", `{"workspaceDir":"/w"} x`, errMalformedJSON, ""},
		{"invalid utf-8", "{\"workspaceDir\":\"\xff\"}", errMalformedJSON, ""},
		{"lone high surrogate", `{"workspaceDir":"\ud800"}`, errMalformedJSON, ""},
		{"lone low surrogate", `{"workspaceDir":"\udc00x"}`, errMalformedJSON, ""},
		{"reversed surrogates", `{"workspaceDir":"\ude00\ud83d"}`, errMalformedJSON, ""},
		{"surrogate in key", `{"\ud800":"x","workspaceDir":"/w"}`, errMalformedJSON, ""},
		{"too large", `{"workspaceDir":"` + strings.Repeat("a", MaxParamsSize) + `"}`, errTooLarge, ""},
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
			pe, ok := errors.AsType[*paramsError](err)
			if !ok {
				t.Fatalf("err %T is not *ParamsError", err)
			}
			if tc.path != "" && pe.Path != tc.path && !strings.HasPrefix(pe.Path, tc.path) {
				t.Errorf("Path = %q, want %q", pe.Path, tc.path)
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

// FuzzParseParams: ParseParams never panics, refuses with a *paramsError
// and no value, and whatever it accepts renders without error or panic to
// valid UTF-8, the same bytes twice.
func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"workspaceDir":"/w"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseParams(data)
		if err != nil {
			if _, ok := errors.AsType[*paramsError](err); p != nil || !ok || !errors.Is(err, ErrInvalidParams) {
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
