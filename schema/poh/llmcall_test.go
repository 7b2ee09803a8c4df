package poh

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// llmCallMembers is the clawea_llm_calls payload the OpenClaw plugin writes
// for a call whose system text is the attested prompt followed by suffix.
func llmCallMembers(want PromptCommitments, suffix string) []pohjson.Member {
	h := func(s string) string { return b64u.SHA256([]byte(s)) }
	s := pohjson.NewString
	text := h("prompt" + suffix) // want.SystemPromptHashB64u is h("prompt")
	return []pohjson.Member{
		pohjson.M("llm_call_version", s("1")),
		pohjson.M("call_id", s("call_1")),
		pohjson.M("provider", s(want.Provider)),
		pohjson.M("model", s(want.Model)),
		pohjson.M("system_prompt_hash_b64u", s(want.SystemPromptHashB64u)),
		pohjson.M("system_prompt_report_hash_b64u", s(want.SystemPromptReportHashB64u)),
		pohjson.M("system_text_hash_b64u", s(text)),
		pohjson.M("attested_prefix", pohjson.NewBool(true)),
		pohjson.M("suffix_utf16_len", pohjson.NewInt(int64(len(suffix)))),
		pohjson.M("suffix_hash_b64u", s(h(suffix))),
	}
}

// llmCallFixture is commitFixture as an OpenClaw bundle: metadata.harness
// names OpenClaw and clawea_llm_calls carries payloads, by default the one
// of its llm_call event. edit changes the payload array before the event's
// payload hash is set from its first element (unless rehash is false).
func llmCallFixture(t *testing.T, suffix string, edit func(ps [][]pohjson.Member) [][]pohjson.Member, rehash bool) (*Bundle, PromptCommitments) {
	t.Helper()
	_, want := commitFixture(t, nil)
	ps := [][]pohjson.Member{llmCallMembers(want, suffix)}
	if edit != nil {
		ps = edit(ps)
	}
	vs := make([]*pohjson.Value, len(ps))
	for i, p := range ps {
		vs[i] = pohjson.NewObject(p...)
	}
	raw, err := pohjson.Stringify(pohjson.NewArray(vs...))
	if err != nil {
		t.Fatal(err)
	}
	b, want := commitFixture(t, func(md map[string]any) {
		md["harness"] = map[string]any{"id": harnessOpenClaw, "version": "2026.9.6", "runtime": "clawea"}
		md["clawea_llm_calls"] = json.RawMessage(raw)
	})
	b.Events[1].PayloadHashB64u = b64u.SHA256([]byte("not a payload"))
	if rehash && len(vs) > 0 {
		if b.Events[1].PayloadHashB64u, err = pohjson.Hash(vs[0]); err != nil {
			t.Fatal(err)
		}
	}
	return b, want
}

func TestCheckLLMCalls(t *testing.T) {
	const suffix = "\n<!-- OPENCLAW_CACHE_BOUNDARY -->\nCurrent model identity: anthropic/claude."
	for _, sfx := range []string{suffix, ""} {
		b, want := llmCallFixture(t, sfx, nil, true)
		if err := CheckPromptCommitments(b, want); err != nil {
			t.Fatalf("suffix %q: valid payload refused: %v", sfx, err)
		}
	}

	// One payload member replaced.
	set := func(k string, v *pohjson.Value) func(ps [][]pohjson.Member) [][]pohjson.Member {
		return func(ps [][]pohjson.Member) [][]pohjson.Member {
			i := slices.IndexFunc(ps[0], func(m pohjson.Member) bool { return m.Key == k })
			ps[0][i].Value = v
			return ps
		}
	}
	s, n := pohjson.NewString, pohjson.NewInt
	h := func(x string) string { return b64u.SHA256([]byte(x)) }
	const lf = "payload.metadata.clawea_llm_calls"
	for _, tc := range []struct {
		name   string
		suffix string
		edit   func(ps [][]pohjson.Member) [][]pohjson.Member
		rehash bool
		code   Code
		field  string
	}{
		{"no payload for the event", suffix, func([][]pohjson.Member) [][]pohjson.Member { return nil }, true, PromptCommitmentMismatch, "payload.event_chain[1]"},
		{"payload without event", suffix, func(ps [][]pohjson.Member) [][]pohjson.Member { return append(ps, ps[0]) }, true, PromptCommitmentMismatch, lf + "[1]"},
		{"payload of another event", suffix, nil, false, HashMismatch, lf + "[0]"},
		{"not an object", suffix, func([][]pohjson.Member) [][]pohjson.Member { return [][]pohjson.Member{nil} }, true, MissingRequiredField, lf + "[0].llm_call_version"},
		{"missing member", suffix, func(ps [][]pohjson.Member) [][]pohjson.Member { ps[0] = ps[0][:9]; return ps }, true, MissingRequiredField, lf + "[0].suffix_hash_b64u"},
		{"missing middle member", suffix, func(ps [][]pohjson.Member) [][]pohjson.Member { ps[0] = slices.Delete(ps[0], 1, 2); return ps }, true, MissingRequiredField, lf + "[0].call_id"},
		{"unknown member", suffix, func(ps [][]pohjson.Member) [][]pohjson.Member {
			ps[0] = append(ps[0], pohjson.M("note", s("x")))
			return ps
		}, true, SchemaValidationFailed, lf + "[0].note"},
		{"key order", suffix, func(ps [][]pohjson.Member) [][]pohjson.Member {
			ps[0][2], ps[0][3] = ps[0][3], ps[0][2]
			return ps
		}, true, SchemaValidationFailed, lf + "[0].model"},
		{"version", suffix, set("llm_call_version", s("2")), true, SchemaValidationFailed, lf + "[0].llm_call_version"},
		{"call_id type", suffix, set("call_id", n(1)), true, SchemaValidationFailed, lf + "[0].call_id"},
		{"malformed text hash", suffix, set("system_text_hash_b64u", s("abc")), true, SchemaValidationFailed, lf + "[0].system_text_hash_b64u"},
		{"malformed suffix hash", suffix, set("suffix_hash_b64u", s(h(suffix)+"A")), true, SchemaValidationFailed, lf + "[0].suffix_hash_b64u"},
		{"another model", suffix, set("model", s("other")), true, EvidenceMismatch, lf + "[0].model"},
		{"another prompt", suffix, set("system_prompt_hash_b64u", s(h("other"))), true, PromptCommitmentMismatch, lf + "[0].system_prompt_hash_b64u"},
		{"another report", suffix, set("system_prompt_report_hash_b64u", s(h("other"))), true, PromptCommitmentMismatch, lf + "[0].system_prompt_report_hash_b64u"},
		{"not an attested prefix", suffix, set("attested_prefix", pohjson.NewBool(false)), true, PromptCommitmentMismatch, lf + "[0].attested_prefix"},
		{"attested_prefix type", suffix, set("attested_prefix", s("true")), true, SchemaValidationFailed, lf + "[0].attested_prefix"},
		{"negative length", suffix, set("suffix_utf16_len", n(-1)), true, SchemaValidationFailed, lf + "[0].suffix_utf16_len"},
		{"null length", suffix, set("suffix_utf16_len", pohjson.NewNull()), true, SchemaValidationFailed, lf + "[0].suffix_utf16_len"},
		{"empty suffix, non-empty hash", "", set("suffix_hash_b64u", s(h("x"))), true, HashMismatch, lf + "[0].suffix_hash_b64u"},
		{"non-empty suffix, empty hash", suffix, set("suffix_hash_b64u", s(h(""))), true, HashMismatch, lf + "[0].suffix_hash_b64u"},
		{"empty suffix, other text", "", set("system_text_hash_b64u", s(h("prompt and more"))), true, HashMismatch, lf + "[0].system_text_hash_b64u"},
		{"non-empty suffix, text is the prompt", suffix, set("system_text_hash_b64u", s(h("prompt"))), true, HashMismatch, lf + "[0].system_text_hash_b64u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, want := llmCallFixture(t, tc.suffix, tc.edit, tc.rehash)
			err := CheckPromptCommitments(b, want)
			pe, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, tc.code) || pe.Field != tc.field {
				t.Fatalf("err = %v, want %s at %s", err, tc.code, tc.field)
			}
		})
	}

	// The shape of the member itself, and the fail-closed rule: a bundle
	// naming the OpenClaw harness must carry it; one naming no harness and
	// carrying none (the demo agent's) is not held to it.
	for _, tc := range []struct {
		name string
		edit func(md map[string]any)
		code Code
	}{
		{"OpenClaw bundle without payloads", func(md map[string]any) { md["harness"] = map[string]any{"id": harnessOpenClaw} }, MissingRequiredField},
		{"not an array", func(md map[string]any) { md["clawea_llm_calls"] = map[string]any{} }, SchemaValidationFailed},
		{"element not an object", func(md map[string]any) { md["clawea_llm_calls"] = []any{"x"} }, SchemaValidationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, want := commitFixture(t, tc.edit)
			err := CheckPromptCommitments(b, want)
			pe, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, tc.code) || !strings.HasPrefix(pe.Field, lf) {
				t.Fatalf("err = %v, want %s at %s", err, tc.code, lf)
			}
		})
	}
	b, want := commitFixture(t, func(md map[string]any) { md["harness"] = map[string]any{"id": "other"} })
	if err := CheckPromptCommitments(b, want); err != nil {
		t.Fatalf("a bundle of another harness without payloads: %v", err)
	}
	// An attestation that names OpenClaw holds the bundle to the rule even
	// when the bundle itself names no harness (or another one): the claim
	// cannot escape the check by leaving metadata.harness out.
	for name, edit := range map[string]func(md map[string]any){
		"no harness":      nil,
		"another harness": func(md map[string]any) { md["harness"] = map[string]any{"id": "other"} },
	} {
		b, want := commitFixture(t, edit)
		want.HarnessID = harnessOpenClaw
		err := CheckPromptCommitments(b, want)
		if !errors.Is(err, MissingRequiredField) {
			t.Errorf("attestation naming OpenClaw, bundle with %s and no payloads: err = %v, want %s", name, err, MissingRequiredField)
		}
	}
}
