package gate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestNoParamsOrSecretsInAuditOrLogs drives every stage and outcome with
// distinctive parameter values and secrets, then checks that none of them
// reaches the audit log or the slog output.
func TestNoParamsOrSecretsInAuditOrLogs(t *testing.T) {
	ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"name":"message"`) {
			reply(500, "PARAMVAL-in-error-body")(w, r, body)
			return
		}
		if strings.Contains(string(body), `"name":"edit"`) {
			reply(200, `{"decision":"deny","reason":"policy says no"}`)(w, r, body)
			return
		}
		reply(200, `{"decision":"allow"}`)(w, r, body)
	})
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) {
		f.tap(strangerUser, m.id, m.button("Allow"))
		f.tap(allowedUser, m.id, m.button("Allow"))
	})
	cfg := mustParse(t, fmt.Sprintf(`{
	  "agents":{"defaults":{"sig":{"enforceVerification":true}}},
	  "tools":{"deny":["browser"],"verifier":{"enabled":true,"failMode":"deny",
	    "webhook":{"url":%q,"headers":{"Authorization":"Bearer HEADERSECRET-7f3a"},"secret":"HMACSECRET-91cd"},
	    "telegram":{"enabled":true,"botToken":%q,"chatId":"-100","allowedUserIds":[%d]}}}}`, ws.URL, testBotToken, allowedUser))
	g := bothVerifiersGate(t, cfg, ws, f)
	params := func(kv ...string) []byte {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return b
	}
	s := "agent:main:main"
	mk := func(tool string, p []byte) Call {
		return Call{Run: "r1", SessionKey: s, TurnID: "t1", Tool: tool, Params: p}
	}
	calls := []Call{
		mk("browser", params("url", "PARAMVAL-browser-url")),                                                               // policy deny
		mk("exec", params("command", "PARAMVAL-exec-cmd")),                                                                 // verification block
		{Run: "r1", SessionKey: s, TurnID: "t1", Tool: "exec", Params: []byte(`{"command":"PARAMVAL-bad","command":"x"}`)}, // invalid
	}
	for _, c := range calls {
		_, _ = g.Decide(t.Context(), c)
	}
	verifiedTurn(t, g.Gate, "r1", "t1")
	after := []Call{
		mk("write", params("path", "PARAMVAL-path", "content", "PARAMVAL-file-content")), // webhook + telegram allow
		mk("exec", params("command", "PARAMVAL-exec-2")),
		mk("message", params("message", "PARAMVAL-msg")), // webhook 5xx -> failMode deny
	}
	for _, c := range after {
		_, _ = g.Decide(t.Context(), c)
	}
	_, _ = g.Decide(t.Context(), mk("edit", params("content", "PARAMVAL-edit")))
	g.verifyAudit(t, 7)

	for where, out := range map[string]string{"audit log": g.audit.String(), "logs": g.logs.String()} {
		if strings.Contains(out, "PARAMVAL") {
			t.Fatalf("%s contains a raw parameter value:\n%s", where, out)
		}
		assertNoSecret(t, where, out)
		if !strings.Contains(out, "params_hash_b64u") {
			t.Fatalf("%s lacks parameter hashes", where)
		}
	}
	// The stranger's tap was refused on the way.
	if _, answers := f.snapshot(); len(answers) == 0 || answers[0].Text != telegramUnauthorizedText {
		t.Fatalf("answers %+v", answers)
	}
}
