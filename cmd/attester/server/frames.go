package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/clawea/attester/wire/answer"
	"github.com/clawea/attester/wire/ctlframe"
)

// The framed transport of the control socket (attester-api section 9):
// after GET /v1/frames upgrades the connection to ctlframe.Token, each
// request frame is served by the same handler chain as an HTTP request on
// the socket (uid, Origin, clean path, the route's capability, process
// binding, body limits, signed answers), with the connection's peer, and
// answered by a response frame on its stream.

// framesPath is the route that upgrades a control connection to frames.
const framesPath = "/v1/frames"

// Bounds of one framed connection.
const (
	// maxStreams is how many requests one connection may have in flight;
	// with that many, the attester reads no further frame (backpressure).
	maxStreams = 16
	// maxStreamBytes bounds the request frames in flight on a connection:
	// a frame is read when it fits beside those in flight, or when none
	// is (one frame of ctlframe.MaxLen always fits).
	maxStreamBytes = ctlframe.MaxLen
	// frameIdleTimeout closes a connection on which no frame began, and
	// no request was in flight, for that long (the HTTP idle timeout).
	frameIdleTimeout = 60 * time.Second
	// frameTimeout is how long a frame may take to arrive once its first
	// byte has (the HTTP body deadline).
	frameTimeout = smallBodyTimeout
	// frameWriteTimeout bounds the write of one response frame.
	frameWriteTimeout = 30 * time.Second
)

// The largest body a framed route reads fits in a frame beside the
// request's other fields (ctlframe.MaxLen's 64 KiB allowance).
var _ = [1]struct{}{}[max(maxBundle, maxToolCallBody)+64<<10-ctlframe.MaxLen]

// httpOnlyRoutes are the control routes not served framed: the prompt
// goes from sealed memory straight to the socket (servePrompt), the audit
// is streamed from its file and a model call is streamed with trailers;
// framing would copy each into heap buffers or bound it by a frame.
var httpOnlyRoutes = map[string]bool{
	"GET /v1/runs/{id}/prompt":                  true,
	"GET /v1/runs/{id}/audit":                   true,
	"POST /v1/runs/{id}/model/{provider}/{api}": true,
	"GET " + framesPath:                         true,
}

// requestFields are the header fields a request frame may carry (by their
// names in frames): those the control routes read. Any other is refused
// (400).
var requestFields = map[string]string{"authorization": "Authorization", "content-type": "Content-Type", "origin": "Origin"}

// responseFields are the answer header fields a response frame carries
// when the handler set them, by their names in frames.
var responseFields = map[string]string{
	"content-type": "Content-Type", "clawea-answer-statement": answer.HeaderStatement, "clawea-answer-signature": answer.HeaderSignature,
	"www-authenticate": "Www-Authenticate", "allow": "Allow", "retry-after": "Retry-After",
}

// framedOnly refuses, on a framed connection, the routes served only over
// HTTP (421), before the route's own checks.
func (s *Server) framedOnly(mux *http.ServeMux) http.Handler {
	refused := s.wrap("framed_refused", func(w http.ResponseWriter, r *http.Request) error {
		return httpErr(http.StatusMisdirectedRequest, "this route is served only over HTTP/1.1 on the control socket, not framed", nil)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pat := mux.Handler(r); httpOnlyRoutes[pat] {
			refused.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// handleFrames upgrades a control connection to frames and serves it
// until it ends: chain is the control API's handler chain for framed
// requests. The caller passed the uid, Origin and process checks.
func (s *Server) handleFrames(chain http.Handler) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkUpgrade(r); err != nil {
			return refuse(err)
		}
		fc := &frameConn{s: s, chain: chain, ctx: r.Context(), remote: r.RemoteAddr,
			inflight: map[uint32]bool{}, jobs: make(chan frameJob)}
		fc.cond.L = &fc.mu
		if !s.framed.add(fc, r) {
			return refuse(httpErr(http.StatusServiceUnavailable, "the attester is shutting down", nil))
		}
		defer s.framed.remove(fc)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return httpErr(http.StatusInternalServerError, "cannot upgrade the connection", err)
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.code = http.StatusSwitchingProtocols
		}
		_ = conn.SetDeadline(time.Time{})
		fc.mu.Lock()
		fc.conn, fc.br = conn, brw.Reader
		stopping := fc.stopping
		fc.mu.Unlock()
		if stopping {
			s.releaseConn(conn)
			return nil
		}
		if _, err := conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + ctlframe.Token + "\r\n\r\n")); err != nil {
			s.releaseConn(conn)
			return nil
		}
		fc.serve()
		return nil
	}
}

// checkUpgrade requires GET /v1/frames to ask for exactly this transport:
// Connection: Upgrade, Upgrade: clawea-control/3, no body.
func checkUpgrade(r *http.Request) error {
	up := r.Header.Values("Upgrade")
	if len(up) == 0 || !headerHasToken(r.Header.Values("Connection"), "upgrade") {
		return &HTTPError{Code: http.StatusUpgradeRequired, Msg: "this route upgrades the connection: send Connection: Upgrade and Upgrade: " + ctlframe.Token}
	}
	if len(up) != 1 || up[0] != ctlframe.Token {
		return httpErr(http.StatusBadRequest, "unsupported Upgrade: the control socket upgrades only to "+ctlframe.Token, nil)
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return httpErr(http.StatusBadRequest, "the upgrade request has no body", nil)
	}
	return nil
}

// headerHasToken reports whether a comma-separated header's values hold
// token (case-insensitive).
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// frameConn is one framed control connection.
type frameConn struct {
	s      *Server
	conn   net.Conn
	br     *bufio.Reader
	chain  http.Handler
	ctx    context.Context // the upgrade request's: it carries the peer
	remote string

	// mu guards the requests in flight: their stream ids, count and
	// frame bytes; cond wakes the reader when one ends.
	mu       sync.Mutex
	cond     sync.Cond
	inflight map[uint32]bool
	bytes    int
	// stopping: the attester shuts down; no further frame is read.
	stopping bool
	// jobs hands request frames to idle workers (work); wg counts the
	// workers.
	jobs chan frameJob
	wg   sync.WaitGroup

	// wmu guards the answers encoded and not yet written (pending) and
	// whether a handler is writing them (flushing); spare is a written
	// buffer kept for reuse.
	wmu      sync.Mutex
	pending  []byte
	spare    []byte
	flushing bool
}

// serve reads request frames and hands each to a worker until the
// connection ends, breaks the framing or the attester stops; then it waits
// for the requests in flight to be answered, sends the connection's last
// word (a stream 0 answer) if the framing broke or the attester stops, and
// closes the connection.
func (fc *frameConn) serve() {
	defer fc.s.releaseConn(fc.conn)
	err := fc.readLoop()
	close(fc.jobs)
	fc.wg.Wait()
	if errors.Is(err, errStopping) {
		fc.writeError(0, httpErr(http.StatusServiceUnavailable, "the attester is shutting down", nil))
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) {
			fc.s.log.Warn("framed connection refused", "err", err)
			fc.writeError(0, httpErr(http.StatusBadRequest, "framing error, connection closed: "+err.Error(), err))
		}
	}
}

// errStopping ends a framed connection's reads when the attester shuts
// down.
var errStopping = errors.New("the attester is shutting down")

// readLoop reads frames until an error (never nil): io.EOF when the peer closed the
// connection between frames.
func (fc *frameConn) readLoop() error {
	for {
		n, err := fc.waitFrame()
		if err != nil {
			return err
		}
		fc.reserve(n)
		_ = fc.conn.SetReadDeadline(time.Now().Add(frameTimeout))
		q, stream, err := ctlframe.Read(fc.br)
		if err == nil && q.Method == "" {
			q, stream, err = nil, 0, errors.New("a response frame from the client")
		}
		if err != nil {
			fc.release(n, 0)
			if stream == 0 {
				return err
			}
			if fc.isInFlight(stream) {
				return fmt.Errorf("stream %d: a request on it is in flight", stream)
			}
			fc.writeError(stream, httpErr(http.StatusBadRequest, "malformed request frame: "+err.Error(), err))
			continue
		}
		if !fc.begin(q.Stream) {
			fc.release(n, 0)
			return fmt.Errorf("stream %d: a request on it is in flight", q.Stream)
		}
		job := frameJob{q: q, n: n}
		select {
		case fc.jobs <- job: // an idle worker takes it
		default:
			fc.wg.Go(func() { fc.work(job) })
		}
	}
}

// frameJob is a request frame read and not yet answered: the frame and
// the bytes it reserved.
type frameJob struct {
	q *ctlframe.Frame
	n int
}

// workerIdle is how long a framed connection's worker waits for its next
// request before it ends. Workers serve request after request (their
// stacks, grown by the handler chain, are kept); a connection has at most
// maxStreams busy ones, and starts one when none is idle.
const workerIdle = time.Second

// work serves job, then the jobs handed to it, until it has been idle for
// workerIdle or the connection's reads end.
func (fc *frameConn) work(job frameJob) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fc.answer(job)
		idle.Reset(workerIdle)
		var ok bool
		select {
		case job, ok = <-fc.jobs:
			if !ok {
				return
			}
		case <-idle.C:
			return
		}
	}
}

// answer serves one request frame and writes its answer.
func (fc *frameConn) answer(job frameJob) {
	a := fc.dispatch(job.q)
	// The stream ends before its answer is written: a client may reuse
	// its id as soon as the answer arrives.
	fc.release(job.n, job.q.Stream)
	if err := fc.writeResponse(a); err != nil {
		fc.s.log.Error("framed answer not sent", "stream", job.q.Stream, "err", err)
		fc.writeError(job.q.Stream, httpErr(http.StatusInternalServerError, "the answer does not fit in a frame", err))
	}
}

// waitFrame waits for the next frame's length, without a deadline while
// requests are in flight (their answers may take long) and closing an
// idle connection after frameIdleTimeout. The length is only peeked:
// ReadRequest reads and checks it.
func (fc *frameConn) waitFrame() (int, error) {
	for {
		_ = fc.conn.SetReadDeadline(time.Now().Add(frameIdleTimeout))
		// After the deadline is set: a stop from now on cuts the wait.
		if fc.isStopping() {
			return 0, errStopping
		}
		hdr, err := fc.br.Peek(4)
		if err == nil {
			return int(min(binary.BigEndian.Uint32(hdr), ctlframe.MaxLen)), nil
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() && len(hdr) == 0 {
			if fc.isStopping() {
				return 0, errStopping
			}
			if fc.busy() {
				continue
			}
		}
		if len(hdr) > 0 && errors.Is(err, io.EOF) {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, err
	}
}

// reserve waits until a frame of n bytes fits beside the requests in
// flight (maxStreams, maxStreamBytes): until then no frame is read.
func (fc *frameConn) reserve(n int) {
	fc.mu.Lock()
	for len(fc.inflight) >= maxStreams || (len(fc.inflight) > 0 && fc.bytes+n > maxStreamBytes) {
		fc.cond.Wait()
	}
	fc.bytes += n
	if len(fc.inflight) == 0 {
		fc.s.connBusy(fc.conn, true)
	}
	fc.mu.Unlock()
}

// begin records stream as in flight; false when it already is.
func (fc *frameConn) begin(stream uint32) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.inflight[stream] {
		return false
	}
	fc.inflight[stream] = true
	return true
}

// release returns a frame's n bytes and ends its stream (0: none began).
func (fc *frameConn) release(n int, stream uint32) {
	fc.mu.Lock()
	fc.bytes -= n
	if stream != 0 {
		delete(fc.inflight, stream)
	}
	if len(fc.inflight) == 0 {
		fc.s.connBusy(fc.conn, false)
	}
	fc.cond.Broadcast()
	fc.mu.Unlock()
}

func (fc *frameConn) isInFlight(stream uint32) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.inflight[stream]
}

func (fc *frameConn) isStopping() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.stopping
}

// stop makes the reader end: no further frame is read; the requests in
// flight are answered, then the connection closes (serve).
func (fc *frameConn) stop() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.stopping = true
	if fc.conn != nil {
		_ = fc.conn.SetReadDeadline(time.Now())
	}
}

// framedConns are a Server's framed connections, which net/http's
// Shutdown does not see (they were hijacked): when an http.Server that
// accepted one shuts down, every one stops reading, answers what is in
// flight and closes, and no new one is accepted.
type framedConns struct {
	mu       sync.Mutex
	conns    map[*frameConn]struct{}
	hooked   map[*http.Server]bool
	stopping bool
	// open counts the connections added and not yet removed (wait).
	open sync.WaitGroup
}

// add records fc, upgraded by r, and registers stop with r's http.Server
// once; false when the attester is shutting down.
func (f *framedConns) add(fc *frameConn, r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return false
	}
	if f.conns == nil {
		f.conns, f.hooked = map[*frameConn]struct{}{}, map[*http.Server]bool{}
	}
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && !f.hooked[hs] {
		f.hooked[hs] = true
		hs.RegisterOnShutdown(f.stop)
	}
	f.conns[fc] = struct{}{}
	f.open.Add(1)
	return true
}

func (f *framedConns) remove(fc *frameConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, fc)
	f.open.Done()
}

// wait returns when every framed connection has ended, or ctx has. Call
// it after stop: no connection is added then, so none is added while it
// waits.
func (f *framedConns) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { f.open.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop stops every framed connection and refuses new ones.
func (f *framedConns) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopping = true
	for fc := range f.conns {
		fc.stop()
	}
}

func (fc *frameConn) busy() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.inflight) > 0
}

// dispatch serves one request frame through the control chain and
// returns its answer.
func (fc *frameConn) dispatch(q *ctlframe.Frame) *ctlframe.Frame {
	r, err := fc.request(q)
	if err != nil {
		return errorResponse(q.Stream, err)
	}
	w := &frameWriter{header: http.Header{}}
	fc.chain.ServeHTTP(w, r)
	a := &ctlframe.Frame{Stream: q.Stream, Status: w.status(), Body: w.body.Bytes()}
	for name, k := range responseFields {
		if v := w.header.Get(k); v != "" {
			if a.Fields == nil {
				a.Fields = make(map[string]string, 4)
			}
			a.Fields[name] = v
		}
	}
	return a
}

// request is the HTTP request a frame stands for, on the connection's
// context (its peer): the frame's method, request-target, fields and body.
func (fc *frameConn) request(q *ctlframe.Frame) (*http.Request, error) {
	u, err := url.ParseRequestURI(q.Path)
	if err != nil {
		return nil, httpErr(http.StatusBadRequest, "malformed request path", err)
	}
	h := make(http.Header, len(q.Fields))
	for name, v := range q.Fields {
		k, ok := requestFields[name]
		if !ok {
			return nil, httpErr(http.StatusBadRequest, "header field "+name+" is not read by the control API (authorization, content-type and origin are)", nil)
		}
		h[k] = []string{v}
	}
	r := &http.Request{
		Method: q.Method, URL: u, RequestURI: q.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, ContentLength: int64(len(q.Body)), Host: "attester", RemoteAddr: fc.remote,
	}
	if len(q.Body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(q.Body))
	}
	return r.WithContext(fc.ctx), nil
}

// writeError answers stream (0: the connection) with err's safe message.
func (fc *frameConn) writeError(stream uint32, err error) {
	_ = fc.writeResponse(errorResponse(stream, err))
}

// errorResponse is the error answer to stream: err's status and safe
// message, as HTTP's (writeJSON of an errorBody).
func errorResponse(stream uint32, err error) *ctlframe.Frame {
	he := asHTTPError(err)
	if he == nil {
		he = httpErr(http.StatusInternalServerError, "internal error", err)
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{Error: he.Msg, Reason: he.Reason})
	return &ctlframe.Frame{Stream: stream, Status: he.Code, Body: body.Bytes(), Fields: map[string]string{"content-type": "application/json"}}
}

// writeResponse queues a's frame and writes it, whole. The answers that
// are ready at once (a group commit wakes many handlers) go out in one
// write: the first handler to find no write in progress writes what is
// queued, and goes on while more arrives; the others only queue.
func (fc *frameConn) writeResponse(a *ctlframe.Frame) error {
	fc.wmu.Lock()
	b, err := a.Append(fc.pending)
	if err != nil {
		fc.wmu.Unlock()
		return err
	}
	fc.pending = b
	if fc.flushing {
		fc.wmu.Unlock()
		return nil
	}
	fc.flushing = true
	for len(fc.pending) > 0 {
		buf := fc.pending
		fc.pending = fc.spare[:0]
		fc.spare = nil
		fc.wmu.Unlock()
		_ = fc.conn.SetWriteDeadline(time.Now().Add(frameWriteTimeout))
		_, werr := fc.conn.Write(buf)
		fc.wmu.Lock()
		if cap(buf) <= maxSpareWrite {
			fc.spare = buf[:0]
		}
		if werr != nil {
			// The reader sees the close and ends the connection; what
			// is queued is dropped with it.
			fc.conn.Close()
			fc.pending = nil
		}
	}
	fc.flushing = false
	fc.wmu.Unlock()
	return nil
}

// maxSpareWrite bounds the write buffer a framed connection keeps between
// writes (a large answer's is left to the collector).
const maxSpareWrite = 64 << 10

// frameWriter is the http.ResponseWriter of a framed request: it keeps the
// status, header and body for the response frame. It cannot be hijacked
// or flushed.
type frameWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *frameWriter) Header() http.Header { return w.header }

func (w *frameWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *frameWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.body.Len()+len(b) > ctlframe.MaxLen {
		return 0, errors.New("the answer does not fit in a frame")
	}
	return w.body.Write(b)
}

// SetReadDeadline does nothing: the request's frame was read whole before
// it was dispatched (the frame deadline of section 9.4 bounds it). With
// it, http.ResponseController finds the method instead of building an
// error for each request.
func (w *frameWriter) SetReadDeadline(time.Time) error { return nil }

func (w *frameWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
