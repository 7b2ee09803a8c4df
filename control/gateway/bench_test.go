package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/poh"
	signed "github.com/clawea/attester/wire/answer"
)

// TestBenchGateway is `make bench-gateway` (issue 20's figures): the
// gateway's added latency per non-streaming call, the delay it adds to a
// streamed chunk, calls per second with receipts and durable audit
// records, and memory per open stream, each beside a baseline of the same
// calls sent straight to the same loopback upstream (no TLS). Inputs: a
// request of 100 KB of history with 20 tools; an answer of 2 KB, streamed
// in 50 chunks. It runs only with CLAWEA_BENCH_GATEWAY=1;
// CLAWEA_BENCH_ENFORCE=1 also fails when a figure misses its target.
func TestBenchGateway(t *testing.T) {
	if os.Getenv("CLAWEA_BENCH_GATEWAY") != "1" {
		t.Skip("set CLAWEA_BENCH_GATEWAY=1 (make bench-gateway)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent)) // the binary's
	b := newBench(t)
	calls := benchInt("CLAWEA_BENCH_CALLS", 2000)
	lat, collected, clean := b.latency(t, calls)
	cgw, cbase := b.chunks(t, benchInt("CLAWEA_BENCH_STREAMS", 200))
	workers := benchInt("CLAWEA_BENCH_WORKERS", 8)
	rate, cpu, gc := b.rate(t, workers, 3*time.Second, viaGateway)
	brate, bcpu, bgc := b.rate(t, workers, 3*time.Second, direct)
	hrate, hcpu, hgc := b.rate(t, workers, 3*time.Second, viaHop)
	mgw, mbase := b.memory(t, benchInt("CLAWEA_BENCH_OPEN", 200))
	sync1, syncN := fsyncFloor(t, 500, workers)
	rcpt := b.receiptFloor(t, 500)
	p := func(d []time.Duration, q float64) time.Duration { return d[int(float64(len(d)-1)*q)] }
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + " ms" }
	gw, base, hop := lat[viaGateway], lat[direct], lat[viaHop]
	fmt.Printf("\nmodel gateway (GOMAXPROCS %d, %d calls; request %d bytes, %d tools; answer %d bytes, %d chunks)\n",
		runtime.GOMAXPROCS(0), calls, len(b.body), 20, len(b.answer), 50)
	fmt.Printf("%-40s %11s %11s %11s %11s %10s\n", "figure", "gateway", "baseline", "added", "hop floor", "target")
	row := func(name, g, bl, add, floor, target string) {
		fmt.Printf("%-40s %11s %11s %11s %11s %10s\n", name, g, bl, add, floor, target)
	}
	row("non-streaming call p50", ms(p(gw, .5)), ms(p(base, .5)), ms(p(gw, .5)-p(base, .5)), ms(p(hop, .5)-p(base, .5)), "<= 0.5 ms")
	row("non-streaming call p99", ms(p(gw, .99)), ms(p(base, .99)), ms(p(gw, .99)-p(base, .99)), ms(p(hop, .99)-p(base, .99)), "<= 2 ms")
	row("chunk arrival p99 (after upstream write)", ms(p(cgw, .99)), ms(p(cbase, .99)), ms(p(cgw, .99)-p(cbase, .99)), "-", "<= 0.2 ms")
	row("calls/s with receipts (non-streaming)", strconv.Itoa(int(rate)), strconv.Itoa(int(brate)), "-", strconv.Itoa(int(hrate)), ">= 1000")
	row("CPU per call (whole process)", ms(cpu), ms(bcpu), ms(cpu-bcpu), ms(hcpu-bcpu), "-")
	row("  of which the collector (not idle)", ms(gc), ms(bgc), ms(gc-bgc), ms(hgc-bgc), "-")
	row("heap per open stream", strconv.Itoa(mgw)+" B", strconv.Itoa(mbase)+" B", strconv.Itoa(mgw-mbase)+" B", "-", "bounded")
	// The floors under the figures, measured in this run: the hop floor
	// column is the same calls through a plain proxy on the same kind of
	// unix socket (no rules, no receipt, no audit record); a call is
	// answered only after its audit record is fsynced; the calls/s run
	// shares the cores with the client and the upstream.
	// What makes the tail: the calls during which a collection ended,
	// beside the others.
	if len(collected) > 0 && len(clean) > 0 {
		fmt.Printf("tail: a collection cycle ended during %d of %d calls through the gateway: their added p50 %s; the other calls' added p50 %s, p99 %s\n",
			len(collected), len(gw), ms(p(collected, .5)-p(base, .5)), ms(p(clean, .5)-p(base, .5)), ms(p(clean, .99)-p(base, .99)))
	}
	fmt.Printf("floor: one audit record write+fsync alone p50 %s, p99 %s; %d files fsynced concurrently: %d fsyncs/s\n",
		ms(p(sync1, .5)), ms(p(sync1, .99)), workers, int(syncN))
	fmt.Printf("floor: one receipt signed, verified and chained alone (the record's step) p50 %s, p99 %s\n",
		ms(p(rcpt, .5)), ms(p(rcpt, .99)))
	fmt.Printf("floor: hop + fsync p50 %s, p99 %s added; the client and upstream's CPU per call is the baseline's; load average %s\n",
		ms(p(hop, .5)-p(base, .5)+p(sync1, .5)), ms(p(hop, .99)-p(base, .99)+p(sync1, .99)), loadAverage())
	b.ph.print(t, b, b.breakdown(t, min(calls, 500)))
	if os.Getenv("CLAWEA_BENCH_ENFORCE") == "1" {
		if p(gw, .5)-p(base, .5) > 500*time.Microsecond || p(gw, .99)-p(base, .99) > 2*time.Millisecond ||
			p(cgw, .99)-p(cbase, .99) > 200*time.Microsecond || rate < 1000 {
			t.Fatal("a figure misses its target")
		}
	}
}

func benchInt(env string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return def
}

// bench holds the upstream, the gateway, the bare hop and the fixed
// inputs.
type bench struct {
	*benchInputs
	g            *Gateway
	up, gwS, hop *httptest.Server
	hopUp        *upstreamClient
	key          ed25519.PrivateKey
	seq          atomic.Int64
	hold         chan struct{}
	client       *http.Client
	ph           *phases
}

// target is where a bench call goes.
type target int

const (
	// viaGateway: the gateway on a unix socket, as the attester serves it
	// on its control socket.
	viaGateway target = iota
	// direct: straight to the loopback upstream (the baseline).
	direct
	// viaHop: a plain proxy on a unix socket, no rules (the hop's floor).
	viaHop
)

// The host names the bench client dials on the gateway's and the hop's
// unix sockets.
const (
	gwHost  = "gateway.invalid"
	hopHost = "hop.invalid"
)

// benchInputs are the fixed inputs: the 100 KB request, the seeded
// history's hashes, the committed tools and the 2 KB answer.
type benchInputs struct {
	body, answer []byte
	hist         [][32]byte
	schemas      [32]byte
	userText     string
}

func newBenchInputs(t testing.TB) *benchInputs {
	b := &benchInputs{}
	// 20 tools, committed.
	tools := []any{}
	schemas := map[string]string{}
	for i := range 20 {
		s := `{"type":"object","properties":{"arg` + strconv.Itoa(i) + `":{"type":"string","description":"` + strings.Repeat("d", 100) + `"}}}`
		name := "tool" + strconv.Itoa(i)
		schemas[name] = s
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": name, "description": "tool " + name, "parameters": json.RawMessage(s)}})
	}
	saved := tSchemas
	tSchemas = schemas
	b.schemas = schemasHash(t)
	tSchemas = saved
	// 100 KB of history: 40 messages of 2.5 KB, then the turn's message.
	msgs := []any{}
	for i := range 40 {
		role := []string{"user", "assistant"}[i%2]
		msgs = append(msgs, map[string]any{"role": role, "content": strings.Repeat(string(rune('a'+i%26)), 2500)})
	}
	b.userText = envelope(tMessage)
	all := append([]any{map[string]any{"role": "system", "content": tPrompt + tSuffix}}, append(msgs, user(b.userText))...)
	b.body, _ = json.Marshal(map[string]any{"model": tModel, "messages": all, "tools": tools})
	q, err := parseRequest(apiOpenAIChat, b.body, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range q.msgs[:len(q.msgs)-1] {
		b.hist = append(b.hist, m.canon)
	}
	b.answer, _ = json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": strings.Repeat("x", 1900)}}},
		"usage": map[string]any{"prompt_tokens": 25000, "completion_tokens": 500}})
	return b
}

func newBench(t *testing.T) *bench {
	b := &bench{benchInputs: newBenchInputs(t), hold: make(chan struct{}), ph: newPhases()}
	_, b.key, _ = ed25519.GenerateKey(nil)
	b.up = httptest.NewServer(http.HandlerFunc(b.upstream))
	t.Cleanup(b.up.Close)
	b.g = testGateway(t, b.up.URL)
	b.g.mark = b.ph.mark
	b.hopUp = newUpstreamClient("hop", b.g.clients[tProv].u)
	b.hopUp.u.MaxConcurrent = 256
	b.hopUp.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 256
	b.g.cfg.MaxCallsPerRun, b.g.cfg.MaxSessions, b.g.cfg.MaxHistoryMessages = 1<<30, 1<<16, 1024
	b.g.sessions = newSessions(1 << 16)
	for _, c := range b.g.clients {
		c.u.MaxRequestBytes, c.u.MaxConcurrent = 1<<20, 4096
		// The configuration's default (section 7), not the tests' 500 ms:
		// on a loaded machine a stream can pause longer than that.
		c.u.IdleTimeout = 60 * time.Second
		c.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 256
	}
	dir := t.TempDir()
	b.gwS = unixServer(t, dir+"/gw.sock", b.serve)
	b.hop = unixServer(t, dir+"/hop.sock", b.bareHop)
	d := &net.Dialer{}
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			switch addr {
			case gwHost + ":80":
				return d.DialContext(ctx, "unix", dir+"/gw.sock")
			case hopHost + ":80":
				return d.DialContext(ctx, "unix", dir+"/hop.sock")
			}
			return d.DialContext(ctx, network, addr)
		}}}
	return b
}

// unixServer serves h on a unix socket at path.
func unixServer(t *testing.T, path string, h http.HandlerFunc) *httptest.Server {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// bareHop is the extra hop alone: the body read as the attester reads it,
// sent upstream with the gateway's transport, the answer relayed chunk by
// chunk with a flush each; no rule, receipt or audit record.
func (b *bench) bareHop(w http.ResponseWriter, r *http.Request) {
	body, done := readAsAttester(w, r)
	defer done()
	req, ub, err := b.hopUp.request(r.Context(), body, false)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	defer ub.letGo()
	resp, err := b.hopUp.client.Do(req)
	ub.sent()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	bp := relayBufs.Get().(*[relayBuf]byte)
	defer relayBufs.Put(bp)
	for {
		n, err := resp.Body.Read(bp[:])
		if n > 0 {
			_, _ = w.Write(bp[:n])
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// attesterBodies is the attester's pool of model call bodies
// (cmd/attester/server/model.go's modelBodies).
var attesterBodies = sync.Pool{New: func() any { return new([]byte) }}

// readAsAttester reads a call's body as the attester's handler does
// (cmd/attester/server/model.go): into a pooled buffer, which done clears
// and gives back once the call has been answered.
func readAsAttester(w http.ResponseWriter, r *http.Request) (body []byte, done func()) {
	bp := attesterBodies.Get().(*[]byte)
	body, _ = bounded.ReadBody(w, r, 2<<20, *bp)
	return body, func() {
		if bp != nil && cap(body) <= 1<<20 {
			clear(body)
			*bp = body[:0]
			attesterBodies.Put(bp)
		}
		body, bp = nil, nil
	}
}

// upstream answers non-streaming calls with the 2 KB answer and streaming
// calls (?stream in the path is not used: the body says) with 50 chunks,
// each carrying the time it was written.
func (b *bench) upstream(w http.ResponseWriter, r *http.Request) {
	body, _ := bounded.ReadBody(w, r, 2<<20)
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i := range 50 {
		// The memory step's requests ask to be held by a top_p (a member
		// the gateway forwards; no other request has one).
		if i == 1 && bytes.Contains(body, []byte(`"top_p"`)) {
			<-b.hold
		}
		ev := `data: {"choices":[{"delta":{"content":"` + strings.Repeat("y", 20) + `"}}],"t":` + strconv.FormatInt(time.Now().UnixNano(), 10) + "}\n\n"
		_, _ = w.Write([]byte(ev))
		fl.Flush()
		time.Sleep(200 * time.Microsecond)
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
}

// serve is the attester side: each call is the next turn of a session
// whose history the gateway forwarded before (seeded), in a run of its own
// worker.
func (b *bench) serve(w http.ResponseWriter, r *http.Request) {
	traced := b.ph.on.Load()
	var s0 stamp
	if traced {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s0 = now()
	}
	body, done := readAsAttester(w, r)
	if traced {
		s0 = b.ph.since("control-socket read (the 100 KB body)", s0)
	}
	// As control's ModelCall does: the signed answer's request hash,
	// computed while the answer is relayed.
	reqHash := sync.OnceValue(func() [32]byte { return signed.RequestHash(r.Method, r.RequestURI, body) })
	n := r.Header.Get("X-Bench-Seq")
	f := &Facts{
		Want: want(), AgentID: "main", SessionKey: "s" + n, TurnID: r.Header.Get(headerTurn),
		TurnContent: sha(b.userText), ToolSchemasHash: b.schemas,
		WithPrompt: func(fn func([]byte) error) error { return fn([]byte(tPrompt)) },
		Forwarded:  func() { go reqHash() },
		Sign: func(status int, h [32]byte) ([]byte, []byte, error) {
			rh := reqHash()
			if traced {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				defer b.ph.since("beside: the answer's signature (ed25519)", now())
			}
			st := []byte(`{"status":` + strconv.Itoa(status) + `,"request":"` + b64u.Encode(rh[:]) + `","response":"` + b64u.Encode(h[:]) + `"}`)
			return st, ed25519.Sign(b.key, st), nil
		},
		Receipt: b.receipt,
		Record:  b.record,
		// As control's ModelCall does: the buffer goes back once the
		// request hash begun in Forwarded has read it.
		BodyDone: func() { go func() { reqHash(); done() }() },
	}
	f.Want.RunID = r.Header.Get("X-Bench-Run")
	k := sessionKey{agent: "main", session: f.SessionKey}
	b.g.sessions.acquire(k)
	b.g.sessions.release(k, &history{msgs: b.hist})
	if !traced {
		b.g.Serve(w, r, tProv, apiOpenAIChat, body, f)
		return
	}
	pc := b.ph.begin(f, s0)
	b.g.Serve(w, r.WithContext(httptrace.WithClientTrace(r.Context(), b.ph.trace(pc))), tProv, apiOpenAIChat, body, f)
	b.ph.end(f)
}

// receipt does what the attester's receipt step does (control's
// ModelCall): it signs the call's receipt.
func (b *bench) receipt(c *Call) ([]byte, error) {
	return SignReceipt(*c, b.key)
}

// record does what the run's gateway record does with a receipt
// (control's receiptRecord.append): it verifies and chains it.
func (b *bench) record(env []byte) error {
	if b.ph.on.Load() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer b.ph.since("beside: the record's verify + chain", now())
	}
	_, _, err := poh.ChainGatewayReceipt("", 0, env)
	return err
}

// request is one call to to: through the gateway (in worker's run), the
// bare hop, or straight to the upstream.
func (b *bench) request(t testing.TB, worker int, body []byte, to target) *http.Request {
	n := b.seq.Add(1)
	url := "http://" + gwHost + "/model"
	switch to {
	case direct:
		url = b.up.URL + "/chat/completions"
	case viaHop:
		url = "http://" + hopHost + "/model"
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if to == viaGateway {
		run := "run_w" + strconv.Itoa(worker)
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], uint64(n))
		req.Header.Set(headerTurn, "turn_"+b64u.Encode(id[:]))
		req.Header.Set(headerLLMCall, benchLLMCall(t, run, int(n)))
		req.Header.Set("X-Bench-Seq", strconv.FormatInt(n, 10))
		req.Header.Set("X-Bench-Run", run)
	}
	return req
}

func (b *bench) do(t testing.TB, req *http.Request) (time.Duration, []byte, http.Header) {
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := bounded.Read(resp.Body, 4<<20, "answer")
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != 200 || resp.Trailer.Get(trailerError) != "" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Trailer)
	}
	return d, body, resp.Trailer
}

// latency times non-streaming calls, taking turns through the gateway,
// straight to the upstream and through the bare hop; it returns each
// target's sorted times, and the gateway's times split by whether a
// garbage collection cycle ended during the call (collected) or not
// (clean).
func (b *bench) latency(t *testing.T, calls int) (out map[target][]time.Duration, collected, clean []time.Duration) {
	out = map[target][]time.Duration{}
	for i := range calls + 50 {
		for _, to := range []target{viaGateway, direct, viaHop} {
			gc0 := gcCycles()
			d, _, tr := b.do(t, b.request(t, 0, b.body, to))
			if to == viaGateway && tr.Get(trailerReceipt) == "" {
				t.Fatal("no receipt")
			}
			if i < 50 {
				continue
			}
			out[to] = append(out[to], d)
			if to == viaGateway && gcCycles() != gc0 {
				collected = append(collected, d)
			} else if to == viaGateway {
				clean = append(clean, d)
			}
		}
	}
	for _, d := range [][]time.Duration{out[viaGateway], out[direct], out[viaHop], collected, clean} {
		slices.Sort(d)
	}
	return out, collected, clean
}

// breakdown makes n sequential calls through the gateway with each step
// timed (b.ph), apart from the latency figures: a traced call runs locked
// to its thread. It returns the client's time of each call.
func (b *bench) breakdown(t *testing.T, n int) []time.Duration {
	b.ph.on.Store(true)
	defer b.ph.on.Store(false)
	out := make([]time.Duration, 0, n)
	for range n {
		d, _, _ := b.do(t, b.request(t, 0, b.body, viaGateway))
		out = append(out, d)
	}
	return out
}

// chunks measures, for streamed answers, the time from the upstream's
// write of each chunk to its arrival at the client.
func (b *bench) chunks(t *testing.T, streams int) (gw, base []time.Duration) {
	body := bytes.Replace(b.body, []byte(`"model":`), []byte(`"stream":true,"model":`), 1)
	for i := range streams {
		for _, to := range []target{viaGateway, direct} {
			resp, err := b.client.Do(b.request(t, 1, body, to))
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				now := time.Now().UnixNano()
				line := sc.Text()
				j := strings.LastIndex(line, `"t":`)
				if j < 0 {
					continue
				}
				sent, _ := strconv.ParseInt(strings.TrimSuffix(line[j+4:], "}"), 10, 64)
				if i < 5 {
					continue
				}
				if to == direct {
					base = append(base, time.Duration(now-sent))
				} else {
					gw = append(gw, time.Duration(now-sent))
				}
			}
			resp.Body.Close()
			if to == viaGateway && resp.Trailer.Get(trailerError) != "" {
				t.Fatalf("stream failed: %s", resp.Trailer.Get(trailerError))
			}
		}
	}
	slices.Sort(gw)
	slices.Sort(base)
	return gw, base
}

// rate runs workers concurrent callers (each its own run) for d to to,
// and returns completed calls per second and the process's CPU time per
// call (client, gateway or hop, and upstream together).
func (b *bench) rate(t *testing.T, workers int, d time.Duration, to target) (rate float64, cpu, gc time.Duration) {
	var done atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start, cpu0, gc0 := time.Now(), cpuTime(), gcCPU()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				b.do(t, b.request(t, 10+w, b.body, to))
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	n := max(done.Load(), 1)
	return float64(n) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(n), (gcCPU() - gc0) / time.Duration(n)
}

// fsyncFloor times what each call's audit record costs alone: n appends
// of a record-sized line, each fsynced, to one file; then the fsyncs per
// second of workers files written concurrently (ext4 commits concurrent
// fsyncs of different files in one journal transaction).
func fsyncFloor(t *testing.T, n, workers int) (one []time.Duration, concurrent float64) {
	dir := t.TempDir()
	line := append(bytes.Repeat([]byte("x"), 600), '\n')
	appendSync := func(name string, k int, each func(time.Duration)) {
		f, err := os.OpenFile(dir+"/"+name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for range k {
			start := time.Now()
			if _, err := f.Write(line); err != nil {
				t.Error(err)
				return
			}
			if err := f.Sync(); err != nil {
				t.Error(err)
				return
			}
			each(time.Since(start))
		}
	}
	appendSync("one", n, func(d time.Duration) { one = append(one, d) })
	slices.Sort(one)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() { appendSync("w"+strconv.Itoa(w), n/workers, func(time.Duration) {}) })
	}
	wg.Wait()
	return one, float64(workers*(n/workers)) / time.Since(start).Seconds()
}

// receiptFloor times n receipt steps alone (bench.receipt: what each
// call's receipt costs after its last upstream byte).
func (b *bench) receiptFloor(t *testing.T, n int) []time.Duration {
	c := &Call{RunID: "run_floor", Provider: tProv, Model: tModel, EventHashB64u: b64u.SHA256(nil),
		At: time.Now(), SystemTextSHA256: sha("s"), SuffixSHA256: sha("x")}
	out := make([]time.Duration, 0, n)
	for i := range n {
		c.ReceiptID = "rcpt_" + strconv.Itoa(i)
		start := time.Now()
		env, err := b.receipt(c)
		if err == nil {
			err = b.record(env)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

// loadAverage is the machine's one-minute load average ("?" when unknown):
// the figures mean little when other work shares the cores.
func loadAverage() string {
	b, err := bounded.ReadFile("/proc/loadavg", 1<<10)
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// memory opens n streams that the upstream holds after their first chunk
// and returns the heap in use per open stream, through the gateway and
// straight. Memory a stream holds is counted, not what pools keep for
// calls to come (the attester's body buffers, pohjson's parse memory: a
// stream gives both back once the upstream has its request): each
// reading is after two collections, which empty the pools of what no
// call took since (sync.Pool keeps an item over one collection).
func (b *bench) memory(t *testing.T, n int) (gw, base int) {
	body := bytes.Replace(b.body, []byte(`"model":`), []byte(`"stream":true,"top_p":1,"model":`), 1)
	measure := func(to target) int {
		runtime.GC()
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		var opened sync.WaitGroup
		var resps []*http.Response
		var mu sync.Mutex
		for i := range n {
			opened.Add(1)
			go func() {
				resp, err := b.client.Do(b.request(t, 100+i, body, to))
				if err == nil {
					buf := make([]byte, 64)
					_, _ = resp.Body.Read(buf)
					mu.Lock()
					resps = append(resps, resp)
					mu.Unlock()
				}
				opened.Done()
			}()
		}
		opened.Wait()
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		close(b.hold)
		for _, r := range resps {
			buf := make([]byte, 32<<10)
			for {
				if _, err := r.Body.Read(buf); err != nil {
					break
				}
			}
			r.Body.Close()
		}
		b.hold = make(chan struct{})
		return int(int64(m1.HeapInuse)-int64(m0.HeapInuse)) / n
	}
	base = measure(direct)
	gw = measure(viaGateway)
	return gw, base
}

// benchLLMCall is a Clawea-Llm-Call for call n of run.
func benchLLMCall(t testing.TB, run string, n int) string {
	return llmCallHeader(t, n, tPrompt+tSuffix, tSuffix)
}

// BenchmarkRules is the CPU cost of reading and checking the benchmark's
// 100 KB request (parse, canonical hashes, every rule), without I/O.
func BenchmarkRules(b *testing.B) {
	bn := newBenchInputs(b)
	var ts turnState
	b.SetBytes(int64(len(bn.body)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
	// As a call does (serve.go): the parsed values given back when the
	// call ends.
	var release func()
	for b.Loop() {
		q, err := parseRequest(apiOpenAIChat, bn.body, &release)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := suffixOf(q, []byte(tPrompt), 8192); err != nil {
			b.Fatal(err)
		}
		ts = turnState{id: "t", used: map[int]bool{}}
		if _, _, err := checkMessages(q, &history{msgs: bn.hist}, &ts, sha(bn.userText), nil, 8192); err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// cpuTime is the process's user and system CPU time: on a loaded machine
// it says what a call costs, where wall time says how long it waited.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
