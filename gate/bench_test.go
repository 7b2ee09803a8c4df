package gate

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

// reportPercentiles reports p50 and p99 of the recorded durations.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[(len(d)*99)/100].Nanoseconds()), "p99-ns")
}

func benchDecide(b *testing.B, g *Gate, c Call, wantAllow bool) {
	ctx := context.Background()
	durs := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st := time.Now()
		d, err := g.Decide(ctx, c)
		el := time.Since(st)
		if err != nil || d.Allow != wantAllow {
			b.Fatalf("%+v %v", d, err)
		}
		if len(durs) < cap(durs) {
			durs = append(durs, el)
		}
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}

// BenchmarkDecidePolicy: tool policy only (no verification gate, no
// verifier), with the audit append included.
func BenchmarkDecidePolicy(b *testing.B) {
	cfg := mustParse(b, `{"tools":{"profile":"coding","allow":["group:fs","group:runtime","web_*"],"deny":["process"]}}`)
	g := newTestGate(b, cfg, func(o *Options) { o.Audit = discardAudit(b); o.Logger = nil })
	c := call("read")
	c.Params = []byte(`{"path":"/workspace/README.md","offset":0,"limit":200}`)
	benchDecide(b, g.Gate, c, true)
}

// BenchmarkDecideVerificationGate: a gated tool in a verified turn.
func BenchmarkDecideVerificationGate(b *testing.B) {
	cfg := mustParse(b, `{"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`)
	g := newTestGate(b, cfg, func(o *Options) { o.Audit = discardAudit(b); o.Logger = nil })
	c := call("exec")
	c.Params = []byte(`{"command":"ls -la","workdir":"/workspace"}`)
	if err := g.NewTurn(c.SessionKey, c.TurnID); err != nil {
		b.Fatal(err)
	}
	if err := g.MarkVerified(c.SessionKey, c.TurnID, true, VerifiedTemplates); err != nil {
		b.Fatal(err)
	}
	benchDecide(b, g.Gate, c, true)
}

// webhookBenchRequests is the fixed number of webhook round trips per
// benchmark op (each op is one batch, so b.N batches are sent).
const webhookBenchRequests = 100

// BenchmarkWebhookRoundTrip: Decide through the webhook verifier against a
// loopback TLS httptest server, webhookBenchRequests calls per op; p50/p99
// are per call. Run with e.g. -benchtime=5x to bound the request count.
func BenchmarkWebhookRoundTrip(b *testing.B) {
	ws := newWebhookServer(b, func(w http.ResponseWriter, r *http.Request, body []byte) {
		reply(200, `{"decision":"allow"}`)(w, r, body)
	})
	cfg := mustParse(b, `{"tools":{"verifier":{"enabled":true,"webhook":{"url":"`+ws.URL+`","secret":"bench-secret"}}}}`)
	g := newTestGate(b, cfg, func(o *Options) {
		o.HTTPClient = ws.Client()
		o.Audit = discardAudit(b)
		o.Logger = nil
	})
	c := call("exec")
	c.Params = []byte(`{"command":"ls -la","workdir":"/workspace"}`)
	ctx := context.Background()
	var durs []time.Duration
	b.ResetTimer()
	for b.Loop() {
		for range webhookBenchRequests {
			st := time.Now()
			d, err := g.Decide(ctx, c)
			el := time.Since(st)
			if err != nil || !d.Allow {
				b.Fatalf("%+v %v", d, err)
			}
			durs = append(durs, el)
		}
	}
	b.StopTimer()
	b.ReportMetric(webhookBenchRequests, "requests/op")
	reportPercentiles(b, durs)
}
