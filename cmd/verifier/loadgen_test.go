package main

// The load generator of TestLoad, run in a process of its own (this test
// binary re-executed with VERIFIER_LOADGEN set) so that its CPU time, its
// goroutines and its garbage collector are not the service's. Each
// connection writes a prebuilt HTTP/1.1 request by hand and reads the
// response into a reused buffer: the figures measure the verifier, not a
// client library.
//
// Open loop (rate > 0): request i is due at start + i/rate whatever
// happened to the requests before it, and its latency runs from that
// scheduled time, so a stall of the service shows up in the latency of
// every request due during the stall (no coordinated omission). In-flight
// requests are bounded by the connections: a request due while all of them
// are busy is sent as soon as one is free and counted as late, never
// dropped. Closed loop (rate 0): each connection sends its next request as
// soon as the previous answer is in: the service's capacity.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify"
)

// loadgenEnv names the file holding a loadgenConfig; set only for the
// child process.
const loadgenEnv = "VERIFIER_LOADGEN"

// lateAfter is how far behind its scheduled time a request may be sent
// before it counts as late.
const lateAfter = 2 * time.Millisecond

type loadgenConfig struct {
	Addr     string  `json:"addr"`     // host:port of the service
	BodyFile string  `json:"body"`     // the request body
	Verdict  string  `json:"verdict"`  // the verdict every response must carry
	Requests int     `json:"requests"` // requests to send
	Rate     float64 `json:"rate"`     // per second; 0 is closed loop
	Conns    int     `json:"conns"`    // connections, the bound on requests in flight
	Out      string  `json:"out"`      // where to write the loadgenResult
}

// loadgenResult is what the generator measured. Durations are in
// nanoseconds.
type loadgenResult struct {
	Requests int           `json:"requests"` // sent
	OK       int           `json:"ok"`       // answered 200 with the verdict and an EAR
	Errors   int           `json:"errors"`
	FirstErr string        `json:"first_error,omitempty"`
	Late     int           `json:"late"`    // sent more than lateAfter after their scheduled time
	MaxLag   time.Duration `json:"max_lag"` // the largest send delay
	Elapsed  time.Duration `json:"elapsed"` // first scheduled send to last answer
	P50      time.Duration `json:"p50"`
	P90      time.Duration `json:"p90"`
	P99      time.Duration `json:"p99"`
	P999     time.Duration `json:"p999"`
	Max      time.Duration `json:"max"`
	CPU      time.Duration `json:"cpu"` // the generator's CPU time over the run
}

// TestLoadGenerator is the child process of TestLoad; it does nothing
// unless VERIFIER_LOADGEN names its configuration.
func TestLoadGenerator(t *testing.T) {
	path := os.Getenv(loadgenEnv)
	if path == "" {
		t.Skip("the load generator runs as TestLoad's child process")
	}
	raw := testfile.Read(t, path)
	var cfg loadgenConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	res, err := generate(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Out, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func generate(t *testing.T, cfg loadgenConfig) (*loadgenResult, error) {
	if cfg.Requests < 1 || cfg.Conns < 1 || cfg.Rate < 0 {
		return nil, fmt.Errorf("bad configuration %+v", cfg)
	}
	if cfg.Verdict != verify.VerdictVerified {
		return nil, fmt.Errorf("the generator checks %q outcomes only", verify.VerdictVerified)
	}
	verifiedPrefix := fmt.Appendf(nil, `{"verdict":%q,"exit_code":%d,`, verify.VerdictVerified, verify.ExitCode(verify.VerdictVerified))
	body, err := os.ReadFile(cfg.BodyFile)
	if err != nil {
		return nil, err
	}
	req := []byte("POST /v1/verify HTTP/1.1\r\nHost: verifier\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n")
	req = append(req, body...)

	conns := make([]*genConn, cfg.Conns)
	for i := range conns { // connect before the clock starts
		conns[i] = &genConn{addr: cfg.Addr, req: req, verdict: cfg.Verdict, prefix: verifiedPrefix, ear: []byte(`,"ear":"eyJ`)}
		if err := conns[i].dial(); err != nil {
			return nil, err
		}
		defer conns[i].close()
	}
	lat := make([]time.Duration, cfg.Requests)
	var (
		next           atomic.Int64
		late, errs, ok atomic.Int64
		maxLag         atomic.Int64
		firstErr       atomic.Pointer[error]
		wg             sync.WaitGroup
	)
	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	cpu0 := loadstat.SelfCPU(t)
	start := time.Now()
	for _, c := range conns {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Requests {
					return
				}
				var due time.Time
				if interval > 0 {
					due = start.Add(time.Duration(i) * interval)
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				}
				sent := time.Now()
				if interval == 0 {
					due = sent
				}
				if lag := sent.Sub(due); lag > lateAfter {
					late.Add(1)
					for m := maxLag.Load(); int64(lag) > m && !maxLag.CompareAndSwap(m, int64(lag)); m = maxLag.Load() {
					}
				}
				err := c.do()
				lat[i] = time.Since(due)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := &loadgenResult{Requests: cfg.Requests, OK: int(ok.Load()), Errors: int(errs.Load()), Late: int(late.Load()),
		MaxLag: time.Duration(maxLag.Load()), Elapsed: elapsed, CPU: loadstat.SelfCPU(t) - cpu0}
	if e := firstErr.Load(); e != nil {
		res.FirstErr = (*e).Error()
	}
	slices.Sort(lat)
	res.P50, res.P90, res.P99 = loadstat.Percentile(lat, 500), loadstat.Percentile(lat, 900), loadstat.Percentile(lat, 990)
	res.P999, res.Max = loadstat.Percentile(lat, 999), lat[len(lat)-1]
	return res, nil
}

// genConn is one keep-alive connection of the generator.
type genConn struct {
	addr    string
	req     []byte
	verdict string
	prefix  []byte // the leading bytes of a verified response
	ear     []byte // the start of its EAR member (a JWS: base64url of "{")
	c       net.Conn
	br      *bufio.Reader
	buf     bytes.Buffer
}

func (g *genConn) dial() error {
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		return err
	}
	g.c, g.br = c, bufio.NewReaderSize(c, 16<<10)
	return nil
}

func (g *genConn) close() {
	if g.c != nil {
		g.c.Close()
		g.c = nil
	}
}

// do sends the request and checks the answer: 200, the expected verdict
// and an EAR. A connection that failed is redialled on the next call.
func (g *genConn) do() error {
	if g.c == nil {
		if err := g.dial(); err != nil {
			return err
		}
	}
	keep, err := g.roundTrip()
	if !keep || err != nil {
		g.close()
	}
	if err != nil {
		return err
	}
	// The exact leading bytes the service writes for a verified outcome
	// (verify.Outcome encodes verdict then exit_code first) and an EAR
	// member: a decode of every response would cost the generator as much
	// CPU again (the handler tests decode responses in full).
	b := g.buf.Bytes()
	if !bytes.HasPrefix(b, g.prefix) || !bytes.Contains(b, g.ear) || !bytes.HasSuffix(b, []byte("\"}\n")) {
		return fmt.Errorf("not a %s outcome with an ear: %.300s", g.verdict, b)
	}
	return nil
}

// roundTrip sends the request and reads the answer into g.buf; keep says
// whether the connection may carry the next request.
func (g *genConn) roundTrip() (keep bool, err error) {
	if err := g.c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return false, err
	}
	if _, err := g.c.Write(g.req); err != nil {
		return false, err
	}
	resp, err := http.ReadResponse(g.br, nil)
	if err != nil {
		return false, err
	}
	g.buf.Reset()
	_, err = g.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return !resp.Close, fmt.Errorf("status %d: %.300s", resp.StatusCode, g.buf.Bytes())
	}
	return !resp.Close, nil
}
