package gate

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"
)

// webhookServer is a local verifier endpoint. Each request is recorded with
// its raw body and headers; respond decides the answer.
type webhookServer struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	hits    atomic.Int32
	respond func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newWebhookServer(t testing.TB, respond func(w http.ResponseWriter, r *http.Request, body []byte)) *webhookServer {
	ws := &webhookServer{respond: respond}
	ws.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ws.mu.Lock()
		ws.bodies = append(ws.bodies, body)
		ws.headers = append(ws.headers, r.Header.Clone())
		ws.mu.Unlock()
		ws.hits.Add(1)
		ws.respond(w, r, body)
	}))
	t.Cleanup(ws.Close)
	return ws
}

func (ws *webhookServer) last(t testing.TB) ([]byte, http.Header) {
	t.Helper()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.bodies) == 0 {
		t.Fatal("webhook not called")
	}
	return ws.bodies[len(ws.bodies)-1], ws.headers[len(ws.headers)-1]
}

func reply(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// webhookGate builds a gate whose verifier is the given server.
func webhookGate(t testing.TB, ws *webhookServer, extra string, mods ...func(*Config)) *testGate {
	t.Helper()
	doc := fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,%s"webhook":{"url":%q,"headers":{"Authorization":"Bearer HEADERSECRET-7f3a"},"secret":"HMACSECRET-91cd"}}}}`, extra, ws.URL+"/verify")
	cfg := mustParse(t, doc)
	for _, m := range mods {
		m(cfg)
	}
	return newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
}

type wireRequest struct {
	Version   int    `json:"version"`
	Timestamp string `json:"timestamp"`
	RequestID string `json:"requestId"`
	Tool      struct {
		Name   string          `json:"name"`
		Params json.RawMessage `json:"params"`
	} `json:"tool"`
	Context struct {
		AgentID         string `json:"agentId"`
		SessionKey      string `json:"sessionKey"`
		MessageProvider string `json:"messageProvider"`
	} `json:"context"`
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestWebhookRequestShapeAndSignature(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	g := webhookGate(t, ws, "")
	c := call("exec")
	c.Params = []byte(`{"workdir":"/workspace","command":"curl https://example.com/?a=1&b=<2>"}`)
	d := g.decide(t, c)
	if !d.Allow || d.Stage != stageVerifier || d.Reason != "approved by the external verifier" {
		t.Fatalf("decision %+v", d)
	}
	body, hdr := ws.last(t)

	// The exact body: seed 004 field order, compact, no HTML escaping.
	want := `{"version":1,"timestamp":"2026-02-12T15:30:00Z","requestId":"` + d.RequestID +
		`","tool":{"name":"exec","params":{"command":"curl https://example.com/?a=1&b=<2>","workdir":"/workspace"}},` +
		`"context":{"agentId":"main","sessionKey":"agent:main:main","messageProvider":"telegram"}}`
	if string(body) != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
	var wr wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wr); err != nil {
		t.Fatal(err)
	}
	if !uuidV4.MatchString(wr.RequestID) {
		t.Fatalf("requestId %q is not a UUIDv4", wr.RequestID)
	}
	// The signature header is the HMAC-SHA256 of the raw body.
	m := hmac.New(sha256.New, []byte("HMACSECRET-91cd"))
	m.Write(body)
	if got := hdr.Get("X-OpenClaw-Signature"); got != "sha256="+hex.EncodeToString(m.Sum(nil)) {
		t.Fatalf("signature header %q", got)
	}
	if hdr.Get("Authorization") != "Bearer HEADERSECRET-7f3a" || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", hdr)
	}
	// Every request gets a fresh id.
	d2 := g.decide(t, c)
	if d2.RequestID == d.RequestID {
		t.Fatal("request id reused")
	}
}

func TestWebhookNoSecretNoSignature(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	g := webhookGate(t, ws, "", func(c *Config) { c.Verifier.Webhook.Secret = secretText{} })
	g.decide(t, call("exec"))
	if _, hdr := ws.last(t); hdr.Get("X-OpenClaw-Signature") != "" {
		t.Fatal("signature sent without a secret")
	}
}

func jsLen(s string) int { return len(utf16.Encode([]rune(s))) }

func TestWebhookRedaction(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	g := webhookGate(t, ws, "")
	content := "FILE-CONTENT-SECRET line 1\nsmile 😀 é"
	for _, tool := range []string{"write", "edit", "apply_patch", "Apply-Patch"} {
		params, _ := json.Marshal(map[string]any{"path": "/w/a.txt", "content": content})
		c := call(tool)
		c.Params = params
		g.decide(t, c)
		body, _ := ws.last(t)
		if bytes.Contains(body, []byte("FILE-CONTENT-SECRET")) {
			t.Fatalf("%s: content leaked: %s", tool, body)
		}
		var wr wireRequest
		_ = json.Unmarshal(body, &wr)
		var p map[string]string
		_ = json.Unmarshal(wr.Tool.Params, &p)
		if want := fmt.Sprintf("[REDACTED: %d chars]", jsLen(content)); p["content"] != want || jsLen(content) != 37 {
			t.Fatalf("%s: content = %q, want %q", tool, p["content"], want)
		}
		if p["path"] != "/w/a.txt" {
			t.Fatalf("%s: other params changed: %v", tool, p)
		}
	}
	// Non-string content is redacted too; other tools are not redacted.
	c := call("write")
	c.Params = []byte(`{"content":{"x":"FILE-CONTENT-SECRET"}}`)
	g.decide(t, c)
	if body, _ := ws.last(t); bytes.Contains(body, []byte("FILE-CONTENT-SECRET")) || !bytes.Contains(body, []byte(`[REDACTED: 27 chars]`)) {
		t.Fatalf("non-string content: %s", body)
	}
	c = call("exec")
	c.Params = []byte(`{"content":"visible"}`)
	g.decide(t, c)
	if body, _ := ws.last(t); !bytes.Contains(body, []byte(`"content":"visible"`)) {
		t.Fatalf("exec params redacted: %s", body)
	}
}

func TestWebhookResponses(t *testing.T) {
	long := strings.Repeat("r", 499) + "😀" + "tail"
	big := `{"decision":"allow"}` + strings.Repeat(" ", maxWebhookResponse)
	cases := []struct {
		name        string
		status      int
		body        string
		allow       bool
		unavailable bool
		reason      string
	}{
		{"allow", 200, `{"decision":"allow"}`, true, false, ""},
		{"allow 204-ish 201", 201, `{"decision":"allow","reason":null}`, true, false, ""},
		{"deny", 200, `{"decision":"deny","reason":"rm -rf is not allowed"}`, false, false, ": rm -rf is not allowed"},
		{"deny no reason", 200, `{"decision":"deny"}`, false, false, ""},
		{"extra fields ignored", 200, `{"decision":"deny","score":0.5,"x":[1]}`, false, false, ""},
		{"reason truncated", 200, `{"decision":"deny","reason":"` + long + `"}`, false, false, ": " + strings.Repeat("r", 499)},
		{"reason control chars", 200, `{"decision":"deny","reason":"a\u0000b\u001bc\nd"}`, false, false, ": a b c\nd"},
		{"5xx", 503, `{"decision":"allow"}`, false, true, ""},
		{"4xx", 403, `{"decision":"allow"}`, false, true, ""},
		{"redirect", 307, `{"decision":"allow"}`, false, true, ""},
		{"malformed", 200, `{"decision":"allow"`, false, true, ""},
		{"not json", 200, `allow`, false, true, ""},
		{"array", 200, `[{"decision":"allow"}]`, false, true, ""},
		{"empty", 200, ``, false, true, ""},
		{"duplicate key", 200, `{"decision":"deny","decision":"allow"}`, false, true, ""},
		{"missing decision", 200, `{"reason":"ok"}`, false, true, ""},
		{"Allow", 200, `{"decision":"Allow"}`, false, true, ""},
		{"ALLOW", 200, `{"decision":"ALLOW"}`, false, true, ""},
		{"allow with space", 200, `{"decision":"allow "}`, false, true, ""},
		{"yes", 200, `{"decision":"yes"}`, false, true, ""},
		{"bool", 200, `{"decision":true}`, false, true, ""},
		{"null", 200, `{"decision":null}`, false, true, ""},
		{"reason number", 200, `{"decision":"deny","reason":5}`, false, true, ""},
		{"oversized", 200, big, false, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []failMode{failDeny, failAllow} {
				ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
					if tc.status == 307 {
						w.Header().Set("Location", "/elsewhere")
					}
					reply(tc.status, tc.body)(w, r, nil)
				})
				g := webhookGate(t, ws, `"failMode":"`+string(mode)+`",`)
				d := g.decide(t, call("exec"))
				want := tc.allow
				if tc.unavailable {
					want = mode == failAllow
				}
				if d.Allow != want || d.Stage != stageVerifier {
					t.Fatalf("failMode %s: %+v", mode, d)
				}
				switch {
				case tc.unavailable && mode == failDeny:
					if d.Reason != "the external verifier (webhook) could not be consulted and failMode is deny" {
						t.Fatalf("reason %q", d.Reason)
					}
				case tc.unavailable:
					if !strings.Contains(d.Reason, "failMode is allow") {
						t.Fatalf("reason %q", d.Reason)
					}
				case !tc.allow:
					if d.Reason != "denied by the external verifier (webhook)"+tc.reason {
						t.Fatalf("reason %q, want suffix %q", d.Reason, tc.reason)
					}
				}
				if tc.status == 307 && ws.hits.Load() != 1 {
					t.Fatal("redirect was followed")
				}
				g.verifyAudit(t, 1)
			}
		})
	}
}

func TestWebhookTimeout(t *testing.T) {
	release := make(chan struct{})
	ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	for _, mode := range []failMode{failDeny, failAllow} {
		g := webhookGate(t, ws, `"failMode":"`+string(mode)+`",`, func(c *Config) { c.Verifier.Webhook.Timeout = 50 * time.Millisecond })
		d := g.decide(t, call("exec"))
		if d.Allow != (mode == failAllow) || d.Stage != stageVerifier {
			t.Fatalf("timeout, failMode %s: %+v", mode, d)
		}
		if !strings.Contains(g.logs.String(), "verifier timed out") {
			t.Fatalf("timeout not logged: %s", g.logs.String())
		}
	}
}

func TestWebhookUnreachable(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	client := ws.Client()
	ws.Close()
	cfg := mustParse(t, fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,"webhook":{"url":%q}}}}`, ws.URL))
	g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = client })
	if d := g.decide(t, call("exec")); d.Allow {
		t.Fatalf("unreachable verifier allowed: %+v", d)
	}
}

func TestWebhookCancelled(t *testing.T) {
	started := make(chan struct{})
	ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(started)
		<-r.Context().Done()
	})
	g := webhookGate(t, ws, `"failMode":"allow",`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	d, err := g.Decide(ctx, call("exec"))
	if !errors.Is(err, context.Canceled) || d.Allow {
		t.Fatalf("cancelled: %+v %v", d, err)
	}
	g.verifyAudit(t, 1)
}

func TestVerifierScope(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"deny","reason":"no"}`))
	cases := []struct {
		scope    string
		verified map[string]bool
	}{
		{``, map[string]bool{"exec": true, "read": true, "verify": true}},
		{`"scope":{"include":["exec","group:fs"]},`, map[string]bool{"exec": true, "write": true, "read": true, "browser": false}},
		{`"scope":{"exclude":["read","session_status"]},`, map[string]bool{"exec": true, "read": false, "session_status": false, "browser": true}},
		{`"scope":{"include":[]},`, map[string]bool{"exec": false}},
	}
	for _, tc := range cases {
		g := webhookGate(t, ws, tc.scope)
		for tool, verified := range tc.verified {
			before := ws.hits.Load()
			d := g.decide(t, call(tool))
			called := ws.hits.Load() != before
			if called != verified || d.Allow == verified {
				t.Errorf("scope %s tool %s: called=%v decision=%+v", tc.scope, tool, called, d)
			}
		}
	}
}

func TestPolicyDenyNeverReachesVerifier(t *testing.T) {
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	cfg := mustParse(t, fmt.Sprintf(`{"agents":{"defaults":{"sig":{"enforceVerification":true}}},
		"tools":{"deny":["browser"],"verifier":{"enabled":true,"webhook":{"url":%q}}}}`, ws.URL))
	g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
	if d := g.decide(t, call("browser")); d.Allow || d.Stage != stagePolicy {
		t.Fatalf("policy: %+v", d)
	}
	if d := g.decide(t, call("exec")); d.Allow || d.Stage != stageVerification {
		t.Fatalf("verification: %+v", d)
	}
	if ws.hits.Load() != 0 {
		t.Fatal("verifier consulted for a call an earlier stage denied")
	}
	_ = g.OpenRun("run-1")
	_ = g.NewTurn("run-1", "turn-1", true)
	_ = g.MarkVerified("run-1", "turn-1", VerifiedTemplates)
	if d := g.decide(t, call("exec")); !d.Allow || d.Stage != stageVerifier || ws.hits.Load() != 1 {
		t.Fatalf("all stages: %+v", d)
	}
}

func TestPerAgentVerifierFailMode(t *testing.T) {
	ws := newWebhookServer(t, reply(500, `oops`))
	cfg := mustParse(t, fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,"failMode":"allow","webhook":{"url":%q}}},
		"agents":{"list":[{"id":"careful","tools":{"verifier":{"failMode":"deny"}}},{"id":"loose","tools":{"verifier":{"failMode":"allow"}}},
		{"id":"off","tools":{"verifier":{"enabled":false}}}]}}`, ws.URL))
	g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
	for agent, want := range map[string]bool{"main": true, "loose": true, "careful": false, "off": true} {
		c := call("exec")
		c.AgentID = agent
		if d := g.decide(t, c); d.Allow != want {
			t.Errorf("agent %s: %+v", agent, d)
		}
	}
	// A per-agent allow cannot weaken a global (default) deny.
	cfg = mustParse(t, fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,"webhook":{"url":%q}}},
		"agents":{"list":[{"id":"loose","tools":{"verifier":{"failMode":"allow"}}}]}}`, ws.URL))
	g = newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
	c := call("exec")
	c.AgentID = "loose"
	if d := g.decide(t, c); d.Allow {
		t.Fatalf("per-agent allow weakened the default deny: %+v", d)
	}
}
