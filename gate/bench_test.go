package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/internal/loadstat"
)

// reportPercentiles reports p50 and p99 of the recorded durations.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(loadstat.Percentile(d, 500).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(loadstat.Percentile(d, 990).Nanoseconds()), "p99-ns")
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
	verifiedTurn(b, g.Gate, c.Run, c.TurnID)
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

// BenchmarkDecideLogged is BenchmarkDecidePolicy with the production log
// line: a JSON slog handler at Info (writing to io.Discard).
func BenchmarkDecideLogged(b *testing.B) {
	cfg := mustParse(b, `{"tools":{"profile":"coding","allow":["group:fs","group:runtime","web_*"],"deny":["process"]}}`)
	g := newTestGate(b, cfg, func(o *Options) {
		o.Audit = discardAudit(b)
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	})
	c := call("read")
	c.Params = []byte(`{"path":"/workspace/README.md","offset":0,"limit":200}`)
	benchDecide(b, g.Gate, c, true)
}

// BenchmarkDecideDurable: Decide with the durable audit log (one file per
// run, fsync with group commit) from 64 concurrent callers on 4 runs
// (RunParallel with parallelism 32 per GOMAXPROCS on 2 cores). ns/op is
// wall time per decision across all callers (its inverse is the
// throughput); p50/p99 are per call. Compare with BenchmarkBaselineFsync.
func BenchmarkDecideDurable(b *testing.B) {
	l, err := audit.Open(b.TempDir(), audit.Options{MaxRunBytes: 1 << 30, MaxTotalBytes: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cfg := mustParse(b, `{"tools":{"profile":"coding","allow":["group:fs","group:runtime","web_*"],"deny":["process"]}}`)
	g := newTestGate(b, cfg, func(o *Options) { o.Audit = l; o.Logger = nil })
	parallel := 64 / runtime.GOMAXPROCS(0)
	b.SetParallelism(max(parallel, 1))
	var (
		mu   sync.Mutex
		all  []time.Duration
		next atomic.Int64
	)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := call("read")
		c.Params = []byte(`{"path":"/workspace/README.md","offset":0,"limit":200}`)
		c.Run = fmt.Sprintf("run_%d", next.Add(1)%4)
		ctx := context.Background()
		var durs []time.Duration
		for pb.Next() {
			st := time.Now()
			d, err := g.Decide(ctx, c)
			durs = append(durs, time.Since(st))
			if err != nil || !d.Allow {
				b.Errorf("%+v %v", d, err)
				return
			}
		}
		mu.Lock()
		all = append(all, durs...)
		mu.Unlock()
	})
	b.StopTimer()
	reportPercentiles(b, all)
}

// BenchmarkBaselineFsync: the in-run floor of a durable record: append
// 200 bytes to a file and fsync it, one caller.
func BenchmarkBaselineFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := bytes.Repeat([]byte("x"), 199)
	rec = append(rec, '\n')
	durs := make([]time.Duration, 0, 1<<16)
	b.ResetTimer()
	for b.Loop() {
		st := time.Now()
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if len(durs) < cap(durs) {
			durs = append(durs, time.Since(st))
		}
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}

// BenchmarkBaselineSHA256Record: SHA-256 of a record-sized line (the
// hashing floor of one audit record).
func BenchmarkBaselineSHA256Record(b *testing.B) {
	line := bytes.Repeat([]byte("r"), 560)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		_ = sha256.Sum256(line)
	}
}
