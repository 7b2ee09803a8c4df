package gate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// TestWebhookAnswerForAnotherRequestAttack: a webhook answer is not signed
// and names no call unless the verifier echoes the requestId. One that
// does is held to it: an allow naming an earlier request (replayed, or
// served from a cache in front of the verifier) is a deny, under failMode
// allow too; a requestId that is not a string is the same. An answer
// naming this request, or none, is taken.
func TestWebhookAnswerForAnotherRequestAttack(t *testing.T) {
	var echo func(id string) string
	ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		var req struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(b, &req)
		reply(200, echo(req.RequestID))(w, r, b)
	})
	const earlier = "0b7c1a52-6f0e-4d47-9a51-3c1f6f7b9e21"
	for _, tc := range []struct {
		name, answer string
		allow        bool
	}{
		{"another request", `{"decision":"allow","requestId":"` + earlier + `"}`, false},
		{"not a string", `{"decision":"allow","requestId":1}`, false},
		{"null", `{"decision":"allow","requestId":null}`, false},
		{"this request", `{"decision":"allow","requestId":"%s"}`, true},
		{"none", `{"decision":"allow"}`, true},
	} {
		for _, mode := range []string{"allow", "deny"} {
			echo = func(id string) string {
				if tc.name == "this request" {
					return fmt.Sprintf(tc.answer, id)
				}
				return tc.answer
			}
			g := webhookGate(t, ws, `"failMode":"`+mode+`",`)
			d := g.decide(t, call("exec"))
			if d.Allow != tc.allow || d.Stage != stageVerifier {
				t.Errorf("%s, failMode %s: %+v", tc.name, mode, d)
			}
			if !tc.allow && d.Reason != "denied by the external verifier (webhook): its answer names another request" {
				t.Errorf("%s: reason %q", tc.name, d.Reason)
			}
		}
	}
}
