package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/answer"
	"github.com/clawea/attester/wire/ctlframe"
)

// framed is a test client of the framed transport.
type framed struct {
	c  net.Conn
	br *bufio.Reader
}

// dialFramed connects to the control socket and upgrades the connection
// with the given request head (its fields, after the request line).
func dialFramed(t *testing.T, socket, head string) (*framed, *http.Response) {
	t.Helper()
	return dialFramedTB(t, socket, head)
}

func dialFramedTB(t testing.TB, socket, head string) (*framed, *http.Response) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /v1/frames HTTP/1.1\r\nHost: attester\r\n"+head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &framed{c: c, br: br}, resp
}

const upgradeHead = "Connection: Upgrade\r\nUpgrade: clawea-control/3\r\n"

func (f *framed) send(t *testing.T, q *ctlframe.Frame) {
	t.Helper()
	b, err := q.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func (f *framed) recv(t *testing.T) *ctlframe.Frame {
	t.Helper()
	_ = f.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	a, _, err := ctlframe.Read(f.br)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// frameReq is a request frame: a JSON body when body is not nil, the
// capability when not "".
func frameReq(stream uint32, method, path, capability string, body []byte) *ctlframe.Frame {
	q := &ctlframe.Frame{Stream: stream, Method: method, Path: path, Body: body, Fields: map[string]string{}}
	if capability != "" {
		q.Fields["authorization"] = "Bearer " + capability
	}
	if body != nil {
		q.Fields["content-type"] = "application/json"
	}
	return q
}

// TestFramedTransport: a run driven over one framed connection, several
// tool calls in flight at once, gets the answers HTTP gives: signed for
// this process, each binding its request and body under the run's next
// numbers; refusals unsigned; the HTTP-only routes refused (421).
func TestFramedTransport(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	enc, mj := h.sealPack(t, p.Pack)
	f, resp := dialFramed(t, h.srv.cfg.ControlSocket, upgradeHead)
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != ctlframe.Token {
		t.Fatalf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	start := selfStartTime(t)
	check := func(q *ctlframe.Frame, a *ctlframe.Frame, run string) *answer.Statement {
		t.Helper()
		st, err := answer.Verify(h.id.Public, a.Fields["clawea-answer-statement"], a.Fields["clawea-answer-signature"])
		if err != nil {
			t.Fatalf("%s %s: %d %s: %v", q.Method, q.Path, a.Status, a.Body, err)
		}
		if err := st.Check(answer.Expect{RunID: run, Seq: st.Seq, Status: a.Status, RequestHash: answer.RequestHash(q.Method, q.Path, q.Body),
			ResponseHash: sha256.Sum256(a.Body), PID: int64(os.Getpid()), StartTime: start}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	create := frameReq(1, "POST", "/v1/runs", "", runBody(enc, mj, p.Rebuilt.ReportHashB64u(), "s"))
	f.send(t, create)
	a := f.recv(t)
	if a.Stream != 1 || a.Status != 201 {
		t.Fatalf("create: %+v %s", a, a.Body)
	}
	check(create, a, "")
	run, capability := jsonField(t, a.Body, "run_id"), jsonField(t, a.Body, "capability")
	base := "/v1/runs/" + run
	turnReq := frameReq(2, "POST", base+"/turns", capability, []byte(`{"channel":"cli","sender_id":"u","message_id":"1","content_sha256_b64u":"`+b64u.SHA256(nil)+`"}`))
	f.send(t, turnReq)
	a = f.recv(t)
	check(turnReq, a, run)
	turn := jsonField(t, a.Body, "turn_id")

	// Eight tool calls in flight at once, answered in any order.
	reqs := map[uint32]*ctlframe.Frame{}
	for i := range uint32(8) {
		q := frameReq(100+i, "POST", base+"/tool-calls", capability, []byte(`{"turn_id":"`+turn+`","tool":"read","params":{"path":"f`+string(rune('a'+i))+`"}}`))
		reqs[q.Stream] = q
		f.send(t, q)
	}
	seqs := map[int64]bool{}
	for range 8 {
		a := f.recv(t)
		q := reqs[a.Stream]
		if q == nil || a.Status != 200 {
			t.Fatalf("stream %d: %d %s", a.Stream, a.Status, a.Body)
		}
		delete(reqs, a.Stream)
		seqs[check(q, a, run).Seq] = true
	}
	for s := int64(3); s <= 10; s++ {
		if !seqs[s] {
			t.Fatalf("sequence numbers %v, want 3..10", seqs)
		}
	}
	for _, tc := range []struct {
		q    *ctlframe.Frame
		want int
	}{
		{frameReq(5, "GET", base+"/prompt", capability, nil), http.StatusMisdirectedRequest},
		{frameReq(5, "GET", base+"/audit", capability, nil), http.StatusMisdirectedRequest},
		{frameReq(5, "GET", "/v1/frames", "", nil), http.StatusMisdirectedRequest},
		{frameReq(5, "POST", base+"/tool-calls", "", []byte(`{}`)), http.StatusUnauthorized},
		{frameReq(5, "POST", base+"/tool-calls", "clawea-cap-v1."+strings.Repeat("A", 43), []byte(`{}`)), http.StatusForbidden},
		{frameReq(5, "POST", base+"/tool-calls", capability, make([]byte, maxToolCallBody+1)), http.StatusRequestEntityTooLarge},
		{&ctlframe.Frame{Stream: 5, Method: "GET", Path: "/v1/gate/policy", Fields: map[string]string{"origin": "https://evil.example"}}, http.StatusForbidden},
		{&ctlframe.Frame{Stream: 5, Method: "GET", Path: "/v1/gate/policy", Fields: map[string]string{"cookie": "x"}}, http.StatusBadRequest},
		{frameReq(5, "GET", "/v1//gate/policy", "", nil), http.StatusForbidden},
		{frameReq(5, "GET", "/v1/nothing", "", nil), http.StatusNotFound},
	} {
		f.send(t, tc.q)
		a := f.recv(t)
		if a.Stream != 5 || a.Status != tc.want || a.Fields["clawea-answer-signature"] != "" {
			t.Fatalf("%s %s: %d %s, want %d unsigned", tc.q.Method, tc.q.Path, a.Status, a.Body, tc.want)
		}
		var e errorBody
		if err := json.Unmarshal(a.Body, &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: error body %q", tc.q.Method, tc.q.Path, a.Body)
		}
	}
	// The HTTP-only prompt still works over HTTP, and the run's numbers go
	// on from the framed answers.
	hr := h.ctlResp(t, "GET", base+"/prompt", capability, nil)
	hr.Body.Close()
	st, err := answer.Verify(h.id.Public, hr.Header.Get(answer.HeaderStatement), hr.Header.Get(answer.HeaderSignature))
	if err != nil || st.Seq != 11 {
		t.Fatalf("prompt over HTTP: %d %v %+v", hr.StatusCode, err, st)
	}
}

// TestFramedFramingErrors: what breaks the framing (a duplicate stream id
// in flight, an unknown frame type, a length of 0 or over the bound) ends
// the connection with a stream 0 answer naming it; a malformed request
// whose stream is known is answered on it and the connection goes on.
func TestFramedFramingErrors(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	socket := h.srv.cfg.ControlSocket
	f, _ := dialFramed(t, socket, upgradeHead)
	// A request with a control character in a field: 400 on its stream.
	bad := []byte{0, 0, 0, 0, 1, 0, 0, 0, 9, 3, 'G', 'E', 'T', 0, 1, '/', 1, 1, 'a', 0, 1, '\n'}
	binary.BigEndian.PutUint32(bad, uint32(len(bad)-4))
	f.c.Write(bad)
	if a := f.recv(t); a.Stream != 9 || a.Status != 400 || !strings.Contains(string(a.Body), "control character") {
		t.Fatalf("control character: %d %d %s", a.Stream, a.Status, a.Body)
	}
	f.send(t, frameReq(10, "GET", "/v1/gate/policy", "", nil))
	if a := f.recv(t); a.Stream != 10 || a.Status != 200 {
		t.Fatalf("after a malformed request: %d %s", a.Status, a.Body)
	}
	for name, raw := range map[string][]byte{
		"unknown type": {0, 0, 0, 1, 0x07},
		"zero length":  {0, 0, 0, 0},
		"over bound":   binary.BigEndian.AppendUint32(nil, ctlframe.MaxLen+1),
	} {
		f, _ := dialFramed(t, socket, upgradeHead)
		f.c.Write(raw)
		a := f.recv(t)
		if a.Stream != 0 || a.Status != 400 {
			t.Fatalf("%s: stream %d %d %s", name, a.Stream, a.Status, a.Body)
		}
		if _, _, err := ctlframe.Read(f.br); err != io.EOF {
			t.Fatalf("%s: the connection stays open (%v)", name, err)
		}
	}
}

// TestFramedUpgradeRefusals: the upgrade asks for exactly this transport;
// the public listener refuses the route like every control route.
func TestFramedUpgradeRefusals(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	for head, want := range map[string]int{
		"": http.StatusUpgradeRequired,
		"Connection: Upgrade\r\nUpgrade: websocket\r\n":             http.StatusBadRequest,
		"Connection: Upgrade\r\nUpgrade: clawea-control/3, h2c\r\n": http.StatusBadRequest,
		"Connection: Upgrade\r\nUpgrade: clawea-control/2\r\n":      http.StatusBadRequest,
		upgradeHead + "Origin: https://evil.example\r\n":            http.StatusForbidden,
		upgradeHead + "Content-Length: 3\r\n\r\nabc":                http.StatusBadRequest,
	} {
		_, resp := dialFramed(t, h.srv.cfg.ControlSocket, head)
		if resp.StatusCode != want {
			t.Errorf("%q: %d, want %d", head, resp.StatusCode, want)
		}
	}
	req, _ := http.NewRequest("GET", h.api.URL+"/v1/frames", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ctlframe.Token)
	if code, _ := do(t, h.api.Client(), req); code != http.StatusForbidden {
		t.Fatalf("framed upgrade on TCP: %d", code)
	}
}

// TestFramedConnectionSlot: a framed connection keeps its listener slot
// (attester.maxConnections) after net/http hands it over, gives it up when
// it ends, and while no request is in flight it is idle: a new connection
// at the limit takes its slot, as from an idle keep-alive connection.
func TestFramedConnectionSlot(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	cl := h.srv.ConnLimiter("test")
	cl.max = 1
	socket, _ := serveControl(t, h, ".2", cl)
	held := func() int {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.n
	}
	f, resp := dialFramed(t, socket, upgradeHead)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	f.send(t, frameReq(1, "GET", "/v1/gate/policy", "", nil))
	if a := f.recv(t); a.Status != 200 || held() != 1 {
		t.Fatalf("%d, %d slots held", a.Status, held())
	}
	// A new connection at the limit takes the idle framed one's slot.
	g, resp := dialFramed(t, socket, upgradeHead)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("second upgrade: %d", resp.StatusCode)
	}
	_ = f.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := ctlframe.Read(f.br); err != io.EOF {
		t.Fatalf("the idle framed connection is still open: %v", err)
	}
	g.c.Close()
	for deadline := time.Now().Add(3 * time.Second); held() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots held after the framed connection ended", held())
		}
	}
}

// TestFramedShutdown: when the http.Server that accepted a framed
// connection shuts down, the connection stops reading, says so on stream 0
// (503) and closes; the Server's Shutdown returns only once it has; a new
// upgrade is refused.
func TestFramedShutdown(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	socket, hs := serveControl(t, h, ".3", nil)
	f, resp := dialFramed(t, socket, upgradeHead)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	f.send(t, frameReq(1, "GET", "/v1/gate/policy", "", nil))
	if a := f.recv(t); a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	if err := hs.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The server's Shutdown waits for the framed connections, which the
	// http.Server's does not: when it returns, the connection has been
	// answered and closed, so both reads below find their bytes at once.
	if err := h.srv.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown after the control server's: %v", err)
	}
	_ = f.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if a, _, err := ctlframe.Read(f.br); err != nil || a.Stream != 0 || a.Status != http.StatusServiceUnavailable {
		t.Fatalf("after shutdown: %v %+v", err, a)
	}
	if _, _, err := ctlframe.Read(f.br); err != io.EOF {
		t.Fatalf("the connection stays open: %v", err)
	}
	// The first control socket's http.Server still runs; its upgrades are
	// refused once the Server has shut down.
	if _, resp := dialFramed(t, h.srv.cfg.ControlSocket, upgradeHead); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("an upgrade after Shutdown: %d, want 503", resp.StatusCode)
	}
}

// serveControl serves h's control API on a second socket (the first one's
// path and suffix), through cl when not nil, and returns its path and
// server.
func serveControl(t *testing.T, h *harness, suffix string, cl *ConnLimiter) (string, *http.Server) {
	t.Helper()
	socket := h.srv.cfg.ControlSocket + suffix
	ln, err := ListenControlSocket(socket)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h.srv.ControlHandler(), ConnContext: control.ConnContext, ReadHeaderTimeout: 5 * time.Second}
	var l net.Listener = ln
	if cl != nil {
		hs.ConnState, l = cl.ConnState, cl.Listener(ln)
	}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close(); ln.Close() })
	return socket, hs
}
