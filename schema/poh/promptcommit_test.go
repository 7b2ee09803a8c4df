package poh

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// commitFixture is a bundle whose metadata commits to want.
func commitFixture(t *testing.T, edit func(md map[string]any)) (*Bundle, PromptCommitments) {
	t.Helper()
	h := func(s string) string { return b64u.SHA256([]byte(s)) }
	want := PromptCommitments{
		RunID: "run_1", AgentDID: "did:key:z6MkneMkZqwqRiU5mJzSG3kDwzt9P8C59N4NGTfBLfSGE7c7",
		SystemPromptHashB64u: h("prompt"), SystemPromptReportHashB64u: h("report"),
		PromptPackCiphertextHashB64u: h("pack"), Provider: "anthropic", Model: "claude",
	}
	events := []Event{
		{EventHeader: EventHeader{EventID: "e1", EventType: PromptCommittedEventType}, EventHashB64u: h("e1")},
		{EventHeader: EventHeader{EventID: "e2", EventType: EventTypeLLMCall}, EventHashB64u: h("e2")},
	}
	entries := []PromptPackEntry{{EntryID: "AGENTS.md", ContentHashB64u: h("a")}, {EntryID: "SOUL.md", ContentHashB64u: h("s")}}
	root, err := PromptRootHash(entries)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]any{
		"clawea": map[string]any{"system_prompt_report_hash_b64u": want.SystemPromptReportHashB64u, "prompt_pack_ciphertext_hash_b64u": want.PromptPackCiphertextHashB64u},
		"system_prompt_report": map[string]any{
			"system_prompt_report_version": "1", "report_id": "spr_1", "run_id": want.RunID, "agent_did": want.AgentDID,
			"issued_at": "2026-06-01T12:00:00.000Z", "hash_algorithm": "SHA-256", "prompt_root_hash_b64u": root,
			"calls": []any{map[string]any{"event_id": "e2", "event_hash_b64u": h("e2"), "provider": "anthropic", "model": "claude", "rendered_system_prompt_hash_b64u": want.SystemPromptHashB64u}},
		},
		"prompt_pack": map[string]any{
			"prompt_pack_version": "1", "hash_algorithm": "SHA-256", "prompt_root_hash_b64u": root,
			"entries": []any{
				map[string]any{"entry_id": "AGENTS.md", "content_hash_b64u": h("a")},
				map[string]any{"entry_id": "SOUL.md", "content_hash_b64u": h("s")},
			},
		},
	}
	if edit != nil {
		edit(md)
	}
	v, err := pohjson.FromGo(md)
	if err != nil {
		t.Fatal(err)
	}
	b := &Bundle{RunID: want.RunID, AgentDID: want.AgentDID, Events: events, Metadata: v}
	commitFirst(t, b, want)
	return b, want
}

// commitFirst makes the bundle's first event the prompt_committed event the
// attester issues for want.
func commitFirst(t *testing.T, b *Bundle, want PromptCommitments) {
	t.Helper()
	ph, err := PromptCommittedPayloadHash(want.SystemPromptReportHashB64u, want.SystemPromptHashB64u, want.PromptPackCiphertextHashB64u)
	if err != nil {
		t.Fatal(err)
	}
	b.Events[0].PayloadHashB64u = ph
}

func TestCheckPromptCommitments(t *testing.T) {
	b, want := commitFixture(t, nil)
	if err := CheckPromptCommitments(b, want); err != nil {
		t.Fatalf("valid commitments refused: %v", err)
	}
	spr := func(md map[string]any) map[string]any { return md["system_prompt_report"].(map[string]any) }
	call := func(md map[string]any) map[string]any { return spr(md)["calls"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		name  string
		edit  func(md map[string]any)
		want  func(w *PromptCommitments)
		code  Code
		field string
	}{
		// The metadata cases below keep the first event the run's
		// prompt_committed event (as the attester issued it for the edited
		// want), so they reach the metadata rule they name.
		{"no clawea", func(md map[string]any) { delete(md, "clawea") }, nil, MissingRequiredField, "payload.metadata.clawea"},
		{"clawea extra member", func(md map[string]any) { md["clawea"].(map[string]any)["x"] = "y" }, nil, SchemaValidationFailed, "payload.metadata.clawea"},
		{"clawea wrong type", func(md map[string]any) { md["clawea"].(map[string]any)["prompt_pack_ciphertext_hash_b64u"] = 1 }, nil, SchemaValidationFailed, "payload.metadata.clawea.prompt_pack_ciphertext_hash_b64u"},
		{"another report", nil, func(w *PromptCommitments) { w.SystemPromptReportHashB64u = "x" }, PromptCommitmentMismatch, "payload.metadata.clawea.system_prompt_report_hash_b64u"},
		{"another pack", nil, func(w *PromptCommitments) { w.PromptPackCiphertextHashB64u = "x" }, PromptCommitmentMismatch, "payload.metadata.clawea.prompt_pack_ciphertext_hash_b64u"},
		{"no report", func(md map[string]any) { delete(md, "system_prompt_report") }, nil, MissingRequiredField, "payload.metadata.system_prompt_report"},
		{"report schema", func(md map[string]any) { spr(md)["extra"] = 1 }, nil, SchemaValidationFailed, "payload.metadata.system_prompt_report"},
		{"report of another run", nil, func(w *PromptCommitments) { w.RunID = "run_2" }, PromptCommitmentMismatch, "payload.metadata.system_prompt_report.run_id"},
		{"another prompt", nil, func(w *PromptCommitments) { w.SystemPromptHashB64u = "x" }, PromptCommitmentMismatch, "payload.metadata.system_prompt_report.calls[0].rendered_system_prompt_hash_b64u"},
		{"call names no llm_call", func(md map[string]any) { call(md)["event_id"] = "e1" }, nil, EvidenceMismatch, "payload.metadata.system_prompt_report.calls[0].event_id"},
		{"call event hash", func(md map[string]any) { call(md)["event_hash_b64u"] = b64u.SHA256([]byte("other")) }, nil, EvidenceMismatch, "payload.metadata.system_prompt_report.calls[0].event_hash_b64u"},
		{"call model", nil, func(w *PromptCommitments) { w.Model = "other" }, EvidenceMismatch, "payload.metadata.system_prompt_report.calls[0].model"},
		{"pack root", func(md map[string]any) {
			md["prompt_pack"].(map[string]any)["prompt_root_hash_b64u"] = b64u.SHA256([]byte("x"))
		}, nil, PromptCommitmentMismatch, "payload.metadata.prompt_pack.prompt_root_hash_b64u"},
		{"expected root missing", func(md map[string]any) { delete(md, "prompt_pack"); delete(spr(md), "prompt_root_hash_b64u") }, func(w *PromptCommitments) { w.PromptRootHashB64u = "r" }, MissingRequiredField, "payload.metadata.prompt_pack"},
		{"expected root differs", nil, func(w *PromptCommitments) { w.PromptRootHashB64u = "r" }, PromptCommitmentMismatch, "payload.metadata.prompt_pack.prompt_root_hash_b64u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, w := commitFixture(t, tc.edit)
			if tc.want != nil {
				tc.want(&w)
				commitFirst(t, b, w)
			}
			err := CheckPromptCommitments(b, w)
			pe, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, tc.code) || !strings.HasPrefix(pe.Field, tc.field) {
				t.Fatalf("err = %v, want %s at %s", err, tc.code, tc.field)
			}
		})
	}
	// An llm_call without a commitment.
	b, want = commitFixture(t, nil)
	b.Events = append(b.Events, Event{EventHeader: EventHeader{EventID: "e3", EventType: EventTypeLLMCall}})
	if err := CheckPromptCommitments(b, want); !errors.Is(err, PromptCommitmentMismatch) {
		t.Fatalf("uncovered llm_call: %v", err)
	}
}

// TestCheckPromptCommitted: the chain starts with the run's
// prompt_committed event, whose payload hash commits to the run's report,
// prompt and pack hashes and, when the attester names it, whose event hash
// is the one it issued.
func TestCheckPromptCommitted(t *testing.T) {
	const field = "payload.event_chain[0]"
	b, want := commitFixture(t, nil)
	want.PromptCommittedEventHashB64u = b.Events[0].EventHashB64u
	if err := CheckPromptCommitments(b, want); err != nil {
		t.Fatalf("the run's prompt_committed event refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(b *Bundle, w *PromptCommitments)
		field string
	}{
		{"first event is another type", func(b *Bundle, w *PromptCommitments) { b.Events[0].EventType = "run_start" }, field},
		{"first event missing", func(b *Bundle, w *PromptCommitments) { b.Events = b.Events[1:] }, field},
		{"no events", func(b *Bundle, w *PromptCommitments) { b.Events = nil }, field},
		{"payload commits to another prompt", func(b *Bundle, w *PromptCommitments) {
			b.Events[0].PayloadHashB64u = b64u.SHA256([]byte("another commitment"))
		}, field + ".payload_hash_b64u"},
		{"payload commits to another report", func(b *Bundle, w *PromptCommitments) {
			w2 := *w
			w2.SystemPromptReportHashB64u = b64u.SHA256([]byte("another report"))
			commitFirst(t, b, w2)
		}, field + ".payload_hash_b64u"},
		{"payload commits to another pack", func(b *Bundle, w *PromptCommitments) {
			w2 := *w
			w2.PromptPackCiphertextHashB64u = b64u.SHA256([]byte("another pack"))
			commitFirst(t, b, w2)
		}, field + ".payload_hash_b64u"},
		{"another event than the one issued", func(b *Bundle, w *PromptCommitments) {
			w.PromptCommittedEventHashB64u = b64u.SHA256([]byte("another event"))
		}, field + ".event_hash_b64u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, w := commitFixture(t, nil)
			w.PromptCommittedEventHashB64u = b.Events[0].EventHashB64u
			tc.edit(b, &w)
			err := CheckPromptCommitments(b, w)
			pe, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, PromptCommitmentMismatch) || pe.Field != tc.field {
				t.Fatalf("err = %v, want %s at %s", err, PromptCommitmentMismatch, tc.field)
			}
		})
	}
	// A verifier has no attested copy of the event: without an expected
	// event hash only the type and the payload hash are checked.
	b, want = commitFixture(t, nil)
	b.Events[0].EventHashB64u = b64u.SHA256([]byte("any event"))
	if err := CheckPromptCommitments(b, want); err != nil {
		t.Fatalf("verifier-side check refused the run's commitment: %v", err)
	}
}

func TestCheckBundleRun(t *testing.T) {
	b := &Bundle{AgentDID: "did:key:a", RunID: "run_1"}
	if err := CheckBundleRun(b, "did:key:a", "run_1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, run string
		bundleRun  string
		code       Code
	}{
		{"did:key:b", "run_1", "run_1", EvidenceMismatch},
		{"did:key:a", "run_1", "", MissingRequiredField},
		{"did:key:a", "run_2", "run_1", EvidenceMismatch},
	} {
		b := &Bundle{AgentDID: "did:key:a", RunID: tc.bundleRun}
		if err := CheckBundleRun(b, tc.agent, tc.run); !errors.Is(err, tc.code) {
			t.Errorf("%+v: err = %v, want %s", tc, err, tc.code)
		}
	}
}
