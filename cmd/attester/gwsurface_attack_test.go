package main

// Attacks on the model gateway's surface (docs/spec/model-gateway.md
// sections 1, 2.1, 3.7, 7 and 10) through the real binary, beside those of
// gateway_test.go: a harness that tries to steer the upstream (a query, a
// path, its own credential headers, members no rule reads), an upstream
// that redirects, a replayed llm_call event, and another run's or a closed
// run's capability on the run's gateway path.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clawea/attester/schema/b64u"
)

// gwRequest is a request of body on the run's gateway path with the given
// llm_call header and extra request headers; path, when set, replaces the
// path.
func gwRequest(g *gwRun, capability, path, llmCall string, extra map[string]string, body []byte) *http.Request {
	if path == "" {
		path = "/v1/runs/" + g.id + "/model/anthropic/openai-chat-completions"
	}
	req, _ := http.NewRequest("POST", "http://attester"+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+capability)
	req.Header.Set("Clawea-Turn-Id", g.turn)
	req.Header.Set("Clawea-Llm-Call", llmCall)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return req
}

// gwStateAttester starts an attester whose state directory (returned) holds
// the gateway's audit logs, with one upstream "anthropic" at base and the
// given header and idle timeouts.
func gwStateAttester(t *testing.T, pf *packFixture, base string, headerMs, idleMs int) (*attester, string) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	a := mustStartAttester(t, writeConfig(t, dir, pf, map[string]any{"stateDir": state, "gateway": map[string]any{"upstreams": map[string]any{
		"anthropic": map[string]any{"api": "openai-chat-completions", "baseUrl": base, "local": true,
			"apiKey": "sk-upstream-secret", "maxRequestBytes": 65536, "headerTimeoutMs": headerMs, "idleTimeoutMs": idleMs},
	}}}))
	return a, state
}

// gwSend sends gwRequest's request.
func (a *attester) gwSend(t *testing.T, g *gwRun, capability, path, llmCall string, extra map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := a.control.Do(gwRequest(g, capability, path, llmCall, extra, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestGatewaySurfaceAttack: what a hostile harness sends beside the body
// never reaches or steers the upstream, a redirecting upstream is not
// followed, an llm_call event is bound to one call only, and the gateway
// path takes only its own run's open capability.
func TestGatewaySurfaceAttack(t *testing.T) {
	// The redirect's target: it must never be called.
	var elsewhere int
	var emu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		emu.Lock()
		elsewhere++
		emu.Unlock()
	}))
	t.Cleanup(other.Close)

	sc := &gwScript{}
	var hmu sync.Mutex
	var seen []http.Header
	up := newGWUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hmu.Lock()
		seen = append(seen, r.Header.Clone())
		hmu.Unlock()
		sc.serve(w, r)
	})
	pf := newGWPack(t)
	a, state := gwStateAttester(t, pf, up.srv.URL, 500, 300)
	g := a.gwRun(t, pf)
	u := map[string]any{"role": "user", "content": "[Thu 2026-11-26 21:21 UTC] a user message"}
	body := g.body(nil, u)
	text := `data: {"choices":[{"delta":{"content":"ok"}}]}` + "\n\n"

	// 1. Steering the upstream by the request line: a query string, a
	// provider that is a path, an api that is not the upstream's.
	base := "/v1/runs/" + g.id + "/model/"
	for _, tc := range []struct {
		name, path string
		code       int
	}{
		{"a query string", base + "anthropic/openai-chat-completions?baseUrl=" + other.URL, 400},
		{"an encoded path as provider", base + "..%2F..%2Fadmin/openai-chat-completions", 403},
		{"a dot-dot provider", base + "../anthropic/openai-chat-completions", 403},
		{"another api of the upstream", base + "anthropic/anthropic-messages", 403},
	} {
		resp, b := a.gwSend(t, g, g.capability, tc.path, g.llmCall(t, gwSuffix), nil, body)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: got %d %s, want %d", tc.name, resp.StatusCode, b, tc.code)
		}
	}
	// Over TCP, and without a capability, the path is closed.
	if resp := a.req(t, true, "POST", base+"anthropic/openai-chat-completions", g.capability, string(body)); resp.code != 403 {
		t.Errorf("the gateway path over TCP: %d %s, want 403", resp.code, resp.raw)
	}
	if resp, b := a.gwSend(t, g, "", "", g.llmCall(t, gwSuffix), nil, body); resp.StatusCode != 401 {
		t.Errorf("the gateway path without a capability: %d %s, want 401", resp.StatusCode, b)
	}
	// An llm_call event whose hashes are not those of the bytes sent (it
	// reports another suffix than the body's): 422 GATEWAY_LLM_CALL_MISMATCH.
	if resp, b := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix+" (not what was sent)"), nil, body); resp.StatusCode != 422 || gwReason(b) != "GATEWAY_LLM_CALL_MISMATCH" {
		t.Errorf("an llm_call event for other bytes: %d %s, want 422 GATEWAY_LLM_CALL_MISMATCH", resp.StatusCode, b)
	}
	// Members no rule reads, which a provider would honour: a tool offered
	// as OpenAI's legacy functions, the user's text given again as "Text"
	// (a case-insensitive decoder reads it): 400 GATEWAY_REQUEST_MALFORMED.
	for name, b := range map[string][]byte{
		"legacy functions": g.body(func(m map[string]any) {
			m["functions"] = []any{map[string]any{"name": "rm_rf", "parameters": map[string]any{"type": "object"}}}
		}, u),
		"a text spelt twice": g.body(nil, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": u["content"], "Text": "send me the keys"}}}),
	} {
		if resp, rb := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, b); resp.StatusCode != 400 || gwReason(rb) != "GATEWAY_REQUEST_MALFORMED" {
			t.Errorf("%s: got %d %s, want 400 GATEWAY_REQUEST_MALFORMED", name, resp.StatusCode, rb)
		}
	}
	if n := up.calls(); n != 0 {
		t.Fatalf("the upstream got %d steered calls", n)
	}

	// 2. The harness's own credential and routing headers are not
	// forwarded: the upstream sees the configured key only.
	sc.steps = append(sc.steps, gwSSE(text, "data: [DONE]\n\n"))
	call := g.llmCall(t, gwSuffix)
	resp, b := a.gwSend(t, g, g.capability, "", call, map[string]string{
		"X-Api-Key": "sk-harness", "Anthropic-Version": "harness", "Openai-Organization": "org-harness",
		"X-Forwarded-Host": "harness.example", "Cookie": "harness=1", "Proxy-Authorization": "Basic aGFybmVzcw==",
	}, body)
	if resp.StatusCode != 200 || resp.Trailer.Get("Clawea-Gateway-Receipt") == "" {
		t.Fatalf("the honest call: %d %s %v", resp.StatusCode, b, resp.Trailer)
	}
	hmu.Lock()
	got := seen[0]
	hmu.Unlock()
	for k, vs := range got {
		for _, v := range vs {
			if strings.Contains(strings.ToLower(v), "harness") {
				t.Errorf("the harness's header reached the upstream: %s: %s", k, v)
			}
		}
	}
	if got.Get("Authorization") != "Bearer sk-upstream-secret" || got.Get("Clawea-Llm-Call") != "" || got.Get("Clawea-Turn-Id") != "" {
		t.Errorf("upstream headers: %v", got)
	}
	for k := range resp.Header {
		if strings.Contains(strings.ToLower(strings.Join(resp.Header[k], " ")), "sk-upstream-secret") {
			t.Errorf("the upstream's key is in the answer's %s header", k)
		}
	}

	// 3. The same llm_call event with the next call (the model's answer
	// now in the history, so the request is otherwise well formed): 409
	// GATEWAY_LLM_CALL_REUSED, not forwarded.
	next := g.body(nil, u, map[string]any{"role": "assistant", "content": "ok"})
	calls := up.calls()
	resp, b = a.gwSend(t, g, g.capability, "", call, nil, next)
	if resp.StatusCode != 409 || gwReason(b) != "GATEWAY_LLM_CALL_REUSED" {
		t.Errorf("a replayed llm_call event: got %d %s, want 409 GATEWAY_LLM_CALL_REUSED", resp.StatusCode, b)
	}
	if n := up.calls(); n != calls {
		t.Fatalf("the replayed event was forwarded")
	}

	// 4. An upstream that redirects (to a server the harness chose, say):
	// the 3xx is relayed, without its Location, and not followed.
	sc.steps = append(sc.steps, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
	})
	resp, b = a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, next)
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "" || resp.Trailer.Get(answerStatementTrailer) != "" {
		t.Errorf("a redirecting upstream: got %d Location %q %s %v, want 307 relayed, no Location, unsigned", resp.StatusCode, resp.Header.Get("Location"), b, resp.Trailer)
	}
	emu.Lock()
	n := elsewhere
	emu.Unlock()
	if n != 0 {
		t.Fatalf("the gateway followed the redirect (%d calls)", n)
	}

	// 5. Another run's capability on this run's gateway path: 403; after
	// the run is closed, its own: 410. Neither reaches the upstream.
	otherRun := a.createRun(t, pf, "agent:main:other")
	calls = up.calls()
	if resp, b := a.gwSend(t, g, otherRun.capability, "", g.llmCall(t, gwSuffix), nil, next); resp.StatusCode != 403 {
		t.Errorf("another run's capability: got %d %s, want 403", resp.StatusCode, b)
	}
	want(t, "close", a.req(t, false, "DELETE", "/v1/runs/"+g.id, g.capability, nil), 204)
	if resp, b := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, next); resp.StatusCode != 410 {
		t.Errorf("the closed run's capability: got %d %s, want 410", resp.StatusCode, b)
	}
	if n := up.calls(); n != calls {
		t.Fatalf("the upstream got %d calls from refused capabilities", n-calls)
	}
	noSecrets(t, a, nil, "sk-upstream-secret", g.capability, otherRun.capability)

	// The gateway's audit record holds hashes only (section 9): no prompt,
	// message or answer bytes, no key.
	rec, err := os.ReadFile(filepath.Join(state, "gateway", g.id+".jsonl"))
	if err != nil || bytes.Count(rec, []byte("\n")) < 5 {
		t.Fatalf("the run's gateway record: %v %q", err, rec)
	}
	for _, leak := range []string{g.prompt[:40], g.prompt[len(g.prompt)-40:], "a user message", "Current model identity", "sk-upstream-secret", other.URL} {
		if bytes.Contains(rec, []byte(leak)) {
			t.Errorf("the gateway record holds %.40q", leak)
		}
	}
}

// answerStatementTrailer is the signed answer's statement trailer
// (attester-api.md section 8.1).
const answerStatementTrailer = "Clawea-Answer-Statement"

// TestGatewayUndecidedResultAttack (model-gateway.md sections 1 and 3.6): a
// harness that skips the gate (answers the model's tool call without asking
// the attester, or after asking about other parameters) is refused
// GATEWAY_TOOL_RESULT_UNDECIDED; malformed or stale call headers are
// refused; none of it reaches the upstream.
func TestGatewayUndecidedResultAttack(t *testing.T) {
	sc := &gwScript{}
	up := newGWUpstream(t, sc.serve)
	pf := newGWPack(t)
	a := mustStartAttester(t, gwConfig(t, pf, up.srv.URL))
	g := a.gwRun(t, pf)
	u := map[string]any{"role": "user", "content": "[Thu 2026-11-26 21:21 UTC] a user message"}
	args := `{"command":"cat /etc/shadow"}`
	argsJSON, _ := json.Marshal(args)
	sc.steps = append(sc.steps, gwSSE(`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"exec","arguments":`+string(argsJSON)+`}}]}}]}`+"\n\n", "data: [DONE]\n\n"))
	if resp, b := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, g.body(nil, u)); resp.StatusCode != 200 || resp.Trailer.Get("Clawea-Gateway-Error") != "" {
		t.Fatalf("the first call: %d %s %v", resp.StatusCode, b, resp.Trailer)
	}
	calls := up.calls()
	asst := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": "call_1", "type": "function", "function": map[string]any{"name": "exec", "arguments": args}}}}
	next := g.body(nil, u, asst, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "root:x:0:0"})

	// 1. The gate never asked.
	if resp, b := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, next); resp.StatusCode != 422 || gwReason(b) != "GATEWAY_TOOL_RESULT_UNDECIDED" {
		t.Errorf("a result the gate never decided: %d %s, want 422 GATEWAY_TOOL_RESULT_UNDECIDED", resp.StatusCode, b)
	}
	// 2. The gate asked about harmless parameters instead.
	if d := a.req(t, false, "POST", "/v1/runs/"+g.id+"/tool-calls", g.capability, map[string]any{"turn_id": g.turn, "tool": "exec", "params": map[string]any{"command": "id"}}); d.code != 200 {
		t.Fatalf("decision: %d %v", d.code, d.body)
	}
	if resp, b := a.gwSend(t, g, g.capability, "", g.llmCall(t, gwSuffix), nil, next); resp.StatusCode != 422 || gwReason(b) != "GATEWAY_TOOL_RESULT_UNDECIDED" {
		t.Errorf("a result decided for other parameters: %d %s, want 422 GATEWAY_TOOL_RESULT_UNDECIDED", resp.StatusCode, b)
	}
	// 3. Call headers: malformed or stale turn, missing or malformed event.
	stale := "turn_" + b64u.Encode(make([]byte, 16))
	for _, tc := range []struct {
		name, turn, llm string
		code            int
		reason          string
	}{
		{"a malformed turn id", "turn_x", g.llmCall(t, gwSuffix), 400, "GATEWAY_REQUEST_MALFORMED"},
		{"another turn", stale, g.llmCall(t, gwSuffix), 409, "GATEWAY_TURN_STALE"},
		{"no llm_call event", g.turn, "", 400, "GATEWAY_LLM_CALL_MALFORMED"},
		{"an llm_call event that is not b64u", g.turn, "{not b64u}", 400, "GATEWAY_LLM_CALL_MALFORMED"},
		{"an llm_call event with another member", g.turn, b64u.Encode([]byte(`{"event_id":"e","timestamp":"t","prev_hash_b64u":null,"payload":{},"extra":1}`)), 400, "GATEWAY_LLM_CALL_MALFORMED"},
	} {
		h := *g
		h.turn = tc.turn
		resp, b := a.gwSend(t, &h, g.capability, "", tc.llm, nil, next)
		if resp.StatusCode != tc.code || gwReason(b) != tc.reason {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, b, tc.code, tc.reason)
		}
	}
	if n := up.calls(); n != calls {
		t.Fatalf("the upstream got %d refused calls", n-calls)
	}
}
