package gate

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTurnChangesWhileVerifierConsultedAttack: a gated exec of a verified
// turn waits on the webhook; meanwhile a new turn starts (or the run
// closes). The webhook's later allow must not allow the call: the turn it
// belongs to is no longer the run's current verified turn, so it is denied
// at the verification gate and recorded so. (Before: the gate was checked
// only before the verifier, and the allow came back for a stale turn.)
func TestTurnChangesWhileVerifierConsultedAttack(t *testing.T) {
	for _, change := range []string{"new turn", "run closed"} {
		asked, release := make(chan struct{}), make(chan struct{})
		ws := newWebhookServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
			close(asked)
			<-release
			reply(200, `{"decision":"allow"}`)(w, r, b)
		})
		cfg := mustParse(t, fmt.Sprintf(`{"agents":{"defaults":{"sig":{"enforceVerification":true}}},
			"tools":{"verifier":{"enabled":true,"webhook":{"url":%q}}}}`, ws.URL))
		g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
		verifiedTurn(t, g.Gate, "run-1", "turn-1")
		done := make(chan Decision)
		go func() {
			d, _ := g.Decide(t.Context(), call("exec"))
			done <- d
		}()
		<-asked
		if change == "new turn" {
			if err := g.NewTurn("run-1", "turn-2", true); err != nil {
				t.Fatal(err)
			}
		} else {
			g.EndRun("run-1")
		}
		close(release)
		d := <-done
		if d.Allow || d.Stage != stageVerification || !strings.Contains(d.Reason, "while the external verifier was consulted") {
			t.Errorf("%s: %+v", change, d)
		}
		g.verifyAudit(t, 1)
	}
	// Unchanged, the same call is allowed by the verifier.
	ws := newWebhookServer(t, reply(200, `{"decision":"allow"}`))
	cfg := mustParse(t, fmt.Sprintf(`{"agents":{"defaults":{"sig":{"enforceVerification":true}}},
		"tools":{"verifier":{"enabled":true,"webhook":{"url":%q}}}}`, ws.URL))
	g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = ws.Client() })
	verifiedTurn(t, g.Gate, "run-1", "turn-1")
	if d := g.decide(t, call("exec")); !d.Allow || d.Stage != stageVerifier {
		t.Fatalf("unchanged turn: %+v", d)
	}
}
