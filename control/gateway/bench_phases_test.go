package gateway

import (
	"crypto/sha256"
	"fmt"
	"net/http/httptrace"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	signed "github.com/clawea/attester/wire/answer"
)

// phases is the per-step breakdown of sequential gateway calls made for
// it (bench.breakdown): for each step, its wall time and the CPU time
// of the thread that ran it. The call's handler is locked to its thread
// while it is traced, so the thread's CPU clock is the call's own work;
// work on other goroutines (the request's hashes, the second half of the
// message hashes, the HTTP transport's writer and reader) is not in it,
// and is timed alone (alone).
type phases struct {
	on    atomic.Bool
	mu    sync.Mutex
	open  map[*Facts]*phaseCall
	steps map[string]*phaseAcc
	order []string
	calls int
}

// phaseCall is a traced call: when its last step ended.
type phaseCall struct {
	last  stamp
	wrote time.Time // the upstream request written (httptrace)
}

// stamp is a point in wall time and in the thread's CPU time.
type stamp struct {
	wall time.Time
	cpu  time.Duration
}

type phaseAcc struct {
	wall  []time.Duration
	cpu   time.Duration
	noCPU bool
}

// The gateway's steps as the breakdown names them.
var stepNames = [numSteps]string{
	stepAuthorize: "authorize (run, turn, llm_call header)",
	stepParse:     "parse + message canon hashes",
	stepRules:     "rules",
	stepUpstream:  "upstream answers (to its headers)",
	stepRelay:     "relay (read, parse, hash, write answer)",
	stepFacts:     "answer facts (tool calls, text hash)",
	stepReceipt:   "receipt signature",
	stepAudit:     "audit record write + fsync",
	stepRecord:    "wait for the record (verify + chain)",
	stepSigned:    "wait for the answer's signature",
	stepEnd:       "trailers set, session updated",
}

func newPhases() *phases {
	return &phases{open: map[*Facts]*phaseCall{}, steps: map[string]*phaseAcc{}}
}

func now() stamp { return stamp{wall: time.Now(), cpu: threadCPU()} }

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// add records one step's wall time and CPU time (cpu < 0: not measured).
func (p *phases) add(name string, wall, cpu time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.steps[name]
	if a == nil {
		a = &phaseAcc{}
		p.steps[name] = a
		p.order = append(p.order, name)
	}
	a.wall = append(a.wall, wall)
	if cpu < 0 {
		a.noCPU = true
	} else {
		a.cpu += cpu
	}
}

// since records the step name that began at s and ends now.
func (p *phases) since(name string, s stamp) stamp {
	n := now()
	p.add(name, n.wall.Sub(s.wall), n.cpu-s.cpu)
	return n
}

// begin starts tracing the call f at s.
func (p *phases) begin(f *Facts, s stamp) *phaseCall {
	c := &phaseCall{last: s}
	p.mu.Lock()
	p.open[f] = c
	p.mu.Unlock()
	return c
}

// mark is Gateway.mark: step s of f ended.
func (p *phases) mark(f *Facts, s step) {
	p.mu.Lock()
	c := p.open[f]
	p.mu.Unlock()
	if c == nil {
		return
	}
	if s == stepUpstream && !c.wrote.IsZero() {
		// The request's write (on the transport's goroutine) and the
		// upstream's answer, split at httptrace's WroteRequest.
		p.add("upstream write (to WroteRequest)", c.wrote.Sub(c.last.wall), -1)
		n := now()
		p.add(stepNames[s], n.wall.Sub(c.wrote), n.cpu-c.last.cpu)
		c.last = n
		return
	}
	c.last = p.since(stepNames[s], c.last)
}

// end stops tracing f.
func (p *phases) end(f *Facts) {
	p.mu.Lock()
	delete(p.open, f)
	p.calls++
	p.mu.Unlock()
}

// trace returns the client trace that times the upstream request's write.
func (p *phases) trace(c *phaseCall) *httptrace.ClientTrace {
	return &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		p.mu.Lock()
		c.wrote = time.Now()
		p.mu.Unlock()
	}}
}

// alone times f run n times on one locked thread: p50 wall, mean CPU.
func alone(n int, f func()) (wall, cpu time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ws := make([]time.Duration, 0, n)
	c0 := threadCPU()
	for range n {
		s := time.Now()
		f()
		ws = append(ws, time.Since(s))
	}
	c := (threadCPU() - c0) / time.Duration(n)
	slices.Sort(ws)
	return ws[len(ws)/2], c
}

// print writes the breakdown, then the steps that run beside the call's
// thread, each timed alone.
func (p *phases) print(t *testing.T, b *bench, client []time.Duration) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + " ms" }
	fmt.Printf("\nwhere a non-streaming call's time goes (%d sequential calls through the gateway): wall p50, and mean CPU of the thread that ran the step\n", p.calls)
	fmt.Printf("%-46s %11s %11s\n", "step", "wall p50", "CPU mean")
	var sumW, sumC time.Duration
	for _, name := range p.order {
		a := p.steps[name]
		slices.Sort(a.wall)
		w := a.wall[len(a.wall)/2]
		cpu := "-"
		if !a.noCPU {
			c := a.cpu / time.Duration(len(a.wall))
			cpu = ms(c)
			sumC += c
		}
		if !strings.HasPrefix(name, "beside") {
			sumW += w
		}
		fmt.Printf("%-46s %11s %11s\n", name, ms(w), cpu)
	}
	slices.Sort(client)
	fmt.Printf("%-46s %11s %11s\n", "sum (wall: the call's own steps)", ms(sumW), ms(sumC))
	fmt.Printf("%-46s %11s %11s\n", "client's whole call (p50, traced)", ms(client[len(client)/2]), "-")
	// Beside the call's thread: each alone, on one thread.
	bw, bc := alone(200, func() { _ = sha256.Sum256(b.body) })
	rw, rc := alone(200, func() { _ = signed.RequestHash("POST", "/v1/runs/r/model/p/a", b.body) })
	fmt.Printf("beside it, alone: the body's SHA-256 %s wall / %s CPU; the signed answer's request hash %s / %s\n",
		ms(bw), ms(bc), ms(rw), ms(rc))
	// What the collector has to take back: heap allocated per call, the
	// client's and the upstream's included.
	var kb [3]string
	for i, to := range []target{viaGateway, viaHop, direct} {
		a0 := heapAllocs()
		for range 100 {
			b.do(t, b.request(t, 0, b.body, to))
		}
		kb[i] = strconv.FormatUint((heapAllocs()-a0)/100/1024, 10) + " KB"
	}
	fmt.Printf("heap allocated per call (client and upstream included): gateway %s, hop %s, direct %s\n", kb[0], kb[1], kb[2])
}

// heapAllocs is the bytes allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// gcCycles is the number of garbage collection cycles completed so far.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// gcCPU is the CPU time the runtime estimates its collector has used,
// less its idle mark workers (which run only on a core nothing else
// wanted).
func gcCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration((s[0].Value.Float64() - s[1].Value.Float64()) * 1e9)
}
