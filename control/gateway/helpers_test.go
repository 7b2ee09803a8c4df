package gateway

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// The run the tests' requests belong to.
const (
	tRunID   = "run_test"
	tTurnID  = "turn_AAAAAAAAAAAAAAAAAAAAAA"
	tModel   = "gpt-test"
	tProv    = "prov"
	tPrompt  = "You are the attested assistant.\nFollow the rules."
	tSuffix  = "\n\nCurrent model identity: prov/gpt-test. If asked what model you are, answer with this value for the current run."
	tMessage = "hello there"
)

// tSchemas are the committed tool schemas (name -> JSON Schema text).
var tSchemas = map[string]string{
	"read": `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
	"exec": `{"type":"object","properties":{"command":{"type":"string"}}}`,
}

func schemasHash(t testing.TB) [32]byte {
	t.Helper()
	ms := []pohjson.Member{}
	for n, s := range tSchemas {
		v, err := pohjson.ParseWith([]byte(s), pohjson.ParseOptions{AllowFloats: true})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, pohjson.M(n, v))
	}
	h, err := canonHash(pohjson.NewObject(ms...))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func want() poh.PromptCommitments {
	return poh.PromptCommitments{
		RunID: tRunID, SystemPromptHashB64u: b64u.SHA256([]byte(tPrompt)),
		SystemPromptReportHashB64u: b64u.SHA256([]byte("report")), Provider: tProv, Model: tModel,
	}
}

// facts is a run's facts for the tests; decisions may be added.
func facts(t testing.TB, decisions ...Decision) *Facts {
	_, key, _ := ed25519.GenerateKey(nil)
	return &Facts{
		Want: want(), AgentID: "main", SessionKey: "agent:main:main", TurnID: tTurnID,
		TurnContent: sha256.Sum256([]byte(tMessage)), Decisions: decisions, ToolSchemasHash: schemasHash(t),
		WithPrompt: func(f func([]byte) error) error { return f([]byte(tPrompt)) },
		Sign: func(status int, h [32]byte) ([]byte, []byte, error) {
			st := []byte(`{"status":` + jsonInt(status) + `,"response_hash_b64u":"` + b64u.Encode(h[:]) + `"}`)
			return st, ed25519.Sign(key, st), nil
		},
		Receipt: func(c *Call) ([]byte, error) { return SignReceipt(*c, key) },
		Record: func(env []byte) error {
			_, _, err := poh.ChainGatewayReceipt("", 0, env)
			return err
		},
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// llmCallHeader is the plugin's Clawea-Llm-Call value for a call whose
// system text is system (the attested prompt then suffix).
func llmCallHeader(t testing.TB, n int, system, suffix string) string {
	t.Helper()
	w := want()
	p := pohjson.NewObject(
		pohjson.M("llm_call_version", pohjson.NewString("1")),
		pohjson.M("call_id", pohjson.NewString("call-"+jsonInt(n))),
		pohjson.M("provider", pohjson.NewString(tProv)),
		pohjson.M("model", pohjson.NewString(tModel)),
		pohjson.M("system_prompt_hash_b64u", pohjson.NewString(w.SystemPromptHashB64u)),
		pohjson.M("system_prompt_report_hash_b64u", pohjson.NewString(w.SystemPromptReportHashB64u)),
		pohjson.M("system_text_hash_b64u", pohjson.NewString(b64u.SHA256([]byte(system)))),
		pohjson.M("attested_prefix", pohjson.NewBool(true)),
		pohjson.M("suffix_utf16_len", pohjson.NewInt(int64(jsstr.Len(suffix)))),
		pohjson.M("suffix_hash_b64u", pohjson.NewString(b64u.SHA256([]byte(suffix)))),
	)
	ev := pohjson.NewObject(
		pohjson.M("event_id", pohjson.NewString("evt_oc_"+jsonInt(n))),
		pohjson.M("timestamp", pohjson.NewString("2026-11-26T21:00:00.000Z")),
		pohjson.M("prev_hash_b64u", pohjson.NewString(b64u.SHA256([]byte("prev")))),
		pohjson.M("payload", p),
	)
	b, err := pohjson.Stringify(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b64u.Encode(b)
}

// openAITools is the tools member for the committed schemas.
func openAITools() []any {
	var out []any
	for n, s := range tSchemas {
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": n, "description": "the " + n + " tool", "parameters": json.RawMessage(s)}})
	}
	return out
}

func anthropicTools() []any {
	var out []any
	for n, s := range tSchemas {
		out = append(out, map[string]any{"name": n, "description": "the " + n + " tool", "input_schema": json.RawMessage(s)})
	}
	return out
}

// openAIBody is an OpenAI request with the system text and msgs.
func openAIBody(t testing.TB, system string, stream bool, msgs ...any) []byte {
	t.Helper()
	all := append([]any{map[string]any{"role": "system", "content": system}}, msgs...)
	b, err := json.Marshal(map[string]any{"model": tModel, "stream": stream, "temperature": 0.5, "messages": all, "tools": openAITools()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// envelope is OpenClaw's user message envelope around m.
func envelope(m string) string {
	return "[Thu 2026-11-26 21:21 UTC] " + m + "\n\nRuntime: agent=main | session=agent:main:main"
}

// scripted is a loopback upstream that answers each call with the next of
// its answers.
type scripted struct {
	t       testing.TB
	answers []func(w http.ResponseWriter, r *http.Request)
	got     [][]byte
	srv     *httptest.Server
}

func newScripted(t testing.TB, answers ...func(w http.ResponseWriter, r *http.Request)) *scripted {
	s := &scripted{t: t, answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := bounded.Read(r.Body, 4<<20, "request")
		if err != nil {
			t.Error(err)
		}
		s.got = append(s.got, b)
		i := len(s.got) - 1
		if i >= len(s.answers) {
			http.Error(w, "no more answers", 500)
			return
		}
		s.answers[i](w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// sseAnswer streams events, one write and flush each.
func sseAnswer(events ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events {
			_, _ = w.Write([]byte(e))
			w.(http.Flusher).Flush()
		}
	}
}

func jsonAnswer(body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

// testGateway is a gateway with one upstream per API at base.
func testGateway(t testing.TB, base string) *Gateway {
	t.Helper()
	up := func(api string) Upstream {
		return Upstream{API: api, BaseURL: base, Local: true, APIKey: "sk-test", AnthropicVersion: "2023-06-01",
			ConnectTimeout: time.Second, HeaderTimeout: 2 * time.Second, IdleTimeout: 500 * time.Millisecond, TotalTimeout: 10 * time.Second,
			MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 64 << 10, MaxConcurrent: 8}
	}
	_, err := New(Config{
		Upstreams:   map[string]Upstream{tProv: up(apiOpenAIChat), "anth": {}},
		MaxSessions: 16, MaxHistoryMessages: 64, MaxSuffixBytes: 8192, MaxCallsPerRun: 64,
	}, t.TempDir(), nil)
	if err == nil {
		t.Fatal("an upstream without api and baseUrl was accepted")
	}
	a := up(apiAnthropicMessages)
	a.AttestedAs = tProv
	g, err := New(Config{
		Upstreams:   map[string]Upstream{tProv: up(apiOpenAIChat), "anth": a},
		MaxSessions: 16, MaxHistoryMessages: 64, MaxSuffixBytes: 8192, MaxCallsPerRun: 64,
	}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
