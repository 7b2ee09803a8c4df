package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
)

// loadConcurrency is the number of clients of the load test.
const loadConcurrency = 64

// loadRequests is the fixed request count per load case:
// VERIFIER_LOAD_REQUESTS (make bench-verifier), else a small smoke count.
func loadRequests(t *testing.T) int {
	if s := os.Getenv("VERIFIER_LOAD_REQUESTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < loadConcurrency {
			t.Fatalf("VERIFIER_LOAD_REQUESTS=%q: want an integer >= %d", s, loadConcurrency)
		}
		return n
	}
	return 4 * loadConcurrency
}

type loadStats struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      time.Duration // process CPU time (user + system) over the run
}

func (s loadStats) perSecond() float64 { return float64(s.n) / s.elapsed.Seconds() }

// cpuPerOp is the process CPU time per call: with the load generator in
// process, the HTTP figures include the client's share.
func (s loadStats) cpuPerOp() time.Duration { return s.cpu / time.Duration(s.n) }

// capacity is the calls per second procs idle CPUs would sustain at
// cpuPerOp: the figure to compare when the machine is shared.
func (s loadStats) capacity(procs int) float64 {
	return float64(procs) / s.cpuPerOp().Seconds()
}

// measure runs n calls of do on workers goroutines and records each call's
// latency. do reports a failure by returning an error; the first one stops
// the test.
func measure(t *testing.T, n, workers int, do func() error) loadStats {
	t.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	cpu0 := loadstat.SelfCPU(t)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				t0 := time.Now()
				if err := do(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := loadstat.SelfCPU(t) - cpu0
	if e := failed.Load(); e != nil {
		t.Fatal(*e)
	}
	slices.Sort(lat)
	return loadStats{n: n, elapsed: elapsed, p50: loadstat.Percentile(lat, 500), p99: loadstat.Percentile(lat, 990), cpu: cpu}
}

// TestLoad is the bounded load test of the verifier service: a fixed
// number of POST /v1/verify requests from 64 concurrent clients over
// loopback HTTP against the real handler, with a warm chain cache, beside
// the platform-only SEV-SNP verification (verify/platform.Verify with a
// warm cache, called directly on as many goroutines as there are CPUs)
// measured in the same run. Every response must be "verified"; the same
// request under a production policy must be refused. make bench-verifier
// runs it with VERIFIER_LOAD_REQUESTS=20000.
func TestLoad(t *testing.T) {
	n := loadRequests(t)
	e := newEnv(t, 0)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: loadConcurrency, MaxIdleConnsPerHost: loadConcurrency}}
	defer client.CloseIdleConnections()

	post := func(body []byte, want string) error {
		resp, err := client.Post(srv.URL+"/v1/verify", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var out struct {
			Verdict string `json:"verdict"`
			EAR     string `json:"ear"`
		}
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK || out.Verdict != want || out.EAR == "" {
			return fmt.Errorf("status %d verdict %q (want %q): %.300s", resp.StatusCode, out.Verdict, want, b)
		}
		return nil
	}

	// The same attestation under a production policy is refused.
	if err := post(e.f.body("prod", true), verify.VerdictPolicy); err != nil {
		t.Fatal(err)
	}

	// Platform-only baseline: the attestation's SEV-SNP evidence kind,
	// verified by verify/platform directly, warm cache.
	platformOnce := platformBaseline(t)
	minimal := object([2]any{"request_version", RequestVersion}, [2]any{"attestation", json.RawMessage(e.f.att)}, [2]any{"evidence", string(e.f.ev)})
	cases := []struct {
		name string
		body []byte
	}{
		{"attestation+evidence", minimal},
		{"full (bundle, audit, report)", e.f.body("", true)},
	}
	for _, c := range cases {
		for range loadConcurrency { // warm connections and the cache
			if err := post(c.body, verify.VerdictVerified); err != nil {
				t.Fatal(err)
			}
		}
	}
	procs := runtime.GOMAXPROCS(0)
	base := measure(t, n, procs, platformOnce)
	t.Logf("GOMAXPROCS=%d, %d requests per case, %d concurrent clients, warm chain cache, load average %s", procs, n, loadConcurrency, loadavg())
	t.Logf("%-36s %8s %8s %8s %9s %10s %7s", "", "verif/s", "p50 ms", "p99 ms", "CPU ms/op", "idle cap/s", "ratio")
	row := func(name string, s loadStats) {
		t.Logf("%-36s %8.0f %8.2f %8.2f %9.3f %10.0f %6.2fx", name, s.perSecond(), ms(s.p50), ms(s.p99),
			ms(s.cpuPerOp()), s.capacity(procs), s.perSecond()/base.perSecond())
	}
	row(fmt.Sprintf("platform-only (%d goroutines)", procs), base)
	for _, c := range cases {
		row("HTTP "+c.name, measure(t, n, loadConcurrency, func() error { return post(c.body, verify.VerdictVerified) }))
	}
	t.Log("ratio: verifications/s over the platform-only verifications/s of this run; idle cap/s: GOMAXPROCS / CPU per op (HTTP rows include the in-process client)")
	if st := e.svc.cache.Stats(); st.Misses != 1 {
		t.Fatalf("cache %+v: want exactly one full chain verification", st)
	}
}

// loadavg is /proc/loadavg's first three fields, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// platformBaseline returns one platform-only verification: simulated
// SEV-SNP evidence of the attestation's kind through verify/platform.Verify
// with a warm chain cache (warmed here).
func platformBaseline(tb testing.TB) func() error {
	tb.Helper()
	q, err := sim.New(sim.Options{Seed: []byte("verifier-test")})
	if err != nil {
		tb.Fatal(err)
	}
	rd, err := evidence.NewReportData(sha256.Sum256([]byte("load")), testfixture.Key(9).Public().(ed25519.PublicKey), []byte("load"))
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := q.Quote(tb.Context(), rd)
	if err != nil {
		tb.Fatal(err)
	}
	opts := platform.Options{Now: func() time.Time { return testfixture.Now }, AllowSimulated: true, AllowUncheckedRevocation: true,
		CertCache: platform.NewCertCache(0)}
	once := func() error { _, err := platform.Verify(ev, rd, opts); return err }
	if err := once(); err != nil {
		tb.Fatal(err)
	}
	return once
}

// reportPlatformRatio runs the platform-only baseline b.N times after the
// benchmark loop and reports its CPU per op and the benchmark's CPU per op
// over it (x-platform-cpu), measured in the same run.
func reportPlatformRatio(b *testing.B, cpuPerOp float64) {
	once := platformBaseline(b)
	cpu0 := loadstat.SelfCPU(b)
	for range b.N {
		if err := once(); err != nil {
			b.Fatal(err)
		}
	}
	base := ms(loadstat.SelfCPU(b)-cpu0) / float64(b.N)
	b.ReportMetric(cpuPerOp, "cpu-ms/op")
	b.ReportMetric(base, "platform-cpu-ms/op")
	b.ReportMetric(cpuPerOp/base, "x-platform-cpu")
}

// BenchmarkVerifyHandler is one POST /v1/verify through the handler, no
// network (warm cache), for the attestation and evidence alone and for the
// full request (bundle, audit, report). cpu-ms/op is the process CPU time
// per request, the figure that does not depend on what else the machine
// runs; x-platform-cpu is its ratio to the platform-only SEV-SNP
// verification measured after the loop in the same run.
func BenchmarkVerifyHandler(b *testing.B) {
	e := newEnv(b, 0)
	minimal := object([2]any{"request_version", RequestVersion}, [2]any{"attestation", json.RawMessage(e.f.att)}, [2]any{"evidence", string(e.f.ev)})
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"attestation+evidence", minimal},
		{"full", e.f.body("", true)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := loadstat.SelfCPU(b)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/verify", bytes.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"verdict":"`+verify.VerdictVerified+`"`)) {
					b.Fatal(rec.Body.String())
				}
			}
			reportPlatformRatio(b, ms(loadstat.SelfCPU(b)-cpu0)/float64(b.N))
		})
	}
}

// BenchmarkPlatformSEVCached is the platform-only baseline of
// BenchmarkVerifyHandler on its own: verify/platform.Verify of the same
// kind of simulated SEV-SNP evidence with a warm chain cache.
func BenchmarkPlatformSEVCached(b *testing.B) {
	once := platformBaseline(b)
	b.ReportAllocs()
	cpu0 := loadstat.SelfCPU(b)
	for b.Loop() {
		if err := once(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ms(loadstat.SelfCPU(b)-cpu0)/float64(b.N), "cpu-ms/op")
}
