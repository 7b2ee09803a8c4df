// Package frames serves the framed transport of the attester's control
// socket (docs/spec/attester-api-v3.md section 9): once the attester has
// accepted GET /v1/frames on a control connection (its uid, Origin and
// process checks passed), Group.Serve takes the connection over, answers
// 101 and serves each request frame (wire/ctlframe) through an
// http.Handler, the same handler chain as an HTTP request on the socket,
// with the upgraded connection's context (its peer). It bounds what a
// connection may have in flight and stops every connection when the
// attester shuts down.
package frames

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/clawea/attester/wire/ctlframe"
)

// Bounds of one framed connection.
const (
	// maxStreams is how many requests one connection may have in flight;
	// with that many, no further frame is read (backpressure).
	maxStreams = 16
	// maxStreamBytes bounds the request frames in flight on a connection:
	// a frame is read when it fits beside those in flight, or when none
	// is (one frame of ctlframe.MaxLen always fits).
	maxStreamBytes = ctlframe.MaxLen
	// idleTimeout closes a connection on which no frame began, and no
	// request was in flight, for that long (the HTTP idle timeout).
	idleTimeout = 60 * time.Second
	// writeTimeout bounds the write of one response frame.
	writeTimeout = 30 * time.Second
	// workerIdle is how long a connection's worker waits for its next
	// request before it ends. Workers serve request after request (their
	// stacks, grown by the handler chain, are kept); a connection has at
	// most maxStreams busy ones, and starts one when none is idle.
	workerIdle = time.Second
	// maxSpareWrite bounds the write buffer a connection keeps between
	// writes (a large answer's is left to the collector).
	maxSpareWrite = 64 << 10
)

// Options are how a Group's connections serve their requests.
type Options struct {
	// Handler serves each request frame, as an HTTP request on the
	// upgraded connection's context.
	Handler http.Handler
	// RequestFields are the header fields a request frame may carry, by
	// their names in frames, with the header each becomes; a frame with
	// another is answered 400.
	RequestFields map[string]string
	// ResponseFields are the answer headers a response frame carries when
	// the handler set them, by their names in frames.
	ResponseFields map[string]string
	// FrameTimeout is how long a frame may take to arrive once its first
	// byte has.
	FrameTimeout time.Duration
	// ErrorBody is the body of an error answer with this message (a JSON
	// document, as the attester's HTTP errors).
	ErrorBody func(msg string) []byte
	// Busy marks the connection as serving requests or idle (the
	// connection limiter may close the oldest idle one); Release closes a
	// connection taken over from net/http and frees its slot.
	Busy    func(c net.Conn, busy bool)
	Release func(c net.Conn)
	Log     *slog.Logger
}

// ErrStopping refuses an upgrade, and ends a connection's reads, when the
// attester shuts down.
var ErrStopping = errors.New("the attester is shutting down")

// Group is a server's framed connections, which net/http's Shutdown does
// not see (they were hijacked): when an http.Server that accepted one
// shuts down, or Shutdown is called, every one stops reading, answers what
// is in flight and closes, and no new one is accepted. The zero Group is
// ready to use.
type Group struct {
	mu       sync.Mutex
	conns    map[*conn]struct{}
	hooked   map[*http.Server]bool
	stopping bool
	// open counts the connections added and not yet removed.
	open sync.WaitGroup
}

// Serve takes over the connection of r, an upgrade request the caller
// has checked and accepted, answers 101 and serves its frames until it
// ends. It returns ErrStopping (nothing taken over) when the group stops,
// another error when w cannot be taken over, and nil once the connection
// was taken over and has ended.
func (g *Group) Serve(w http.ResponseWriter, r *http.Request, o *Options) error {
	fc := &conn{o: o, ctx: r.Context(), remote: r.RemoteAddr, inflight: map[uint32]bool{}, jobs: make(chan job)}
	fc.cond.L = &fc.mu
	if !g.add(fc, r) {
		return ErrStopping
	}
	defer g.remove(fc)
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("cannot take the connection over: %w", err)
	}
	_ = c.SetDeadline(time.Time{})
	fc.mu.Lock()
	fc.c, fc.br = c, brw.Reader
	stopping := fc.stopping
	fc.mu.Unlock()
	if stopping {
		o.Release(c)
		return nil
	}
	if _, err := c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + ctlframe.Token + "\r\n\r\n")); err != nil {
		o.Release(c)
		return nil
	}
	fc.serve()
	return nil
}

// Shutdown stops every connection and refuses new ones, then waits until
// ctx ends for them to answer what is in flight and close.
func (g *Group) Shutdown(ctx context.Context) error {
	g.stop()
	done := make(chan struct{})
	go func() { g.open.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add records fc, upgraded by r, and registers stop with r's http.Server
// once; false when the group stops.
func (g *Group) add(fc *conn, r *http.Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return false
	}
	if g.conns == nil {
		g.conns, g.hooked = map[*conn]struct{}{}, map[*http.Server]bool{}
	}
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && !g.hooked[hs] {
		g.hooked[hs] = true
		hs.RegisterOnShutdown(g.stop)
	}
	g.conns[fc] = struct{}{}
	g.open.Add(1)
	return true
}

func (g *Group) remove(fc *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.conns, fc)
	g.open.Done()
}

// stop stops every connection and refuses new ones.
func (g *Group) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopping = true
	for fc := range g.conns {
		fc.stop()
	}
}

// conn is one framed connection.
type conn struct {
	o      *Options
	c      net.Conn
	br     *bufio.Reader
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
	jobs chan job
	wg   sync.WaitGroup

	// wmu guards the answers encoded and not yet written (pending) and
	// whether a handler is writing them (flushing); spare is a written
	// buffer kept for reuse.
	wmu      sync.Mutex
	pending  []byte
	spare    []byte
	flushing bool
}

// refusal is an error answer: its status and the message the client
// reads.
type refusal struct {
	status int
	msg    string
}

// serve reads request frames and hands each to a worker until the
// connection ends, breaks the framing or the attester stops; then it waits
// for the requests in flight to be answered, sends the connection's last
// word (a stream 0 answer) if the framing broke or the attester stops, and
// closes the connection.
func (fc *conn) serve() {
	defer fc.o.Release(fc.c)
	err := fc.readLoop()
	close(fc.jobs)
	fc.wg.Wait()
	if errors.Is(err, ErrStopping) {
		fc.writeError(0, http.StatusServiceUnavailable, ErrStopping.Error())
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) {
			fc.o.Log.Warn("framed connection refused", "err", err)
			fc.writeError(0, http.StatusBadRequest, "framing error, connection closed: "+err.Error())
		}
	}
}

// readLoop reads frames until an error (never nil): io.EOF when the peer
// closed the connection between frames.
func (fc *conn) readLoop() error {
	for {
		n, err := fc.waitFrame()
		if err != nil {
			return err
		}
		fc.reserve(n)
		_ = fc.c.SetReadDeadline(time.Now().Add(fc.o.FrameTimeout))
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
			fc.writeError(stream, http.StatusBadRequest, "malformed request frame: "+err.Error())
			continue
		}
		if !fc.begin(q.Stream) {
			fc.release(n, 0)
			return fmt.Errorf("stream %d: a request on it is in flight", q.Stream)
		}
		j := job{q: q, n: n}
		select {
		case fc.jobs <- j: // an idle worker takes it
		default:
			fc.wg.Go(func() { fc.work(j) })
		}
	}
}

// job is a request frame read and not yet answered: the frame and the
// bytes it reserved.
type job struct {
	q *ctlframe.Frame
	n int
}

// work serves j, then the jobs handed to it, until it has been idle for
// workerIdle or the connection's reads end.
func (fc *conn) work(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fc.answer(j)
		idle.Reset(workerIdle)
		var ok bool
		select {
		case j, ok = <-fc.jobs:
			if !ok {
				return
			}
		case <-idle.C:
			return
		}
	}
}

// answer serves one request frame and writes its answer.
func (fc *conn) answer(j job) {
	a := fc.dispatch(j.q)
	// The stream ends before its answer is written: a client may reuse
	// its id as soon as the answer arrives.
	fc.release(j.n, j.q.Stream)
	if err := fc.writeResponse(a); err != nil {
		fc.o.Log.Error("framed answer not sent", "stream", j.q.Stream, "err", err)
		fc.writeError(j.q.Stream, http.StatusInternalServerError, "the answer does not fit in a frame")
	}
}

// waitFrame waits for the next frame's length, without a deadline while
// requests are in flight (their answers may take long) and closing an
// idle connection after idleTimeout. The length is only peeked:
// ctlframe.Read reads and checks it.
func (fc *conn) waitFrame() (int, error) {
	for {
		_ = fc.c.SetReadDeadline(time.Now().Add(idleTimeout))
		// After the deadline is set: a stop from now on cuts the wait.
		if fc.isStopping() {
			return 0, ErrStopping
		}
		hdr, err := fc.br.Peek(4)
		if err == nil {
			return int(min(binary.BigEndian.Uint32(hdr), ctlframe.MaxLen)), nil
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() && len(hdr) == 0 {
			if fc.isStopping() {
				return 0, ErrStopping
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
func (fc *conn) reserve(n int) {
	fc.mu.Lock()
	for len(fc.inflight) >= maxStreams || (len(fc.inflight) > 0 && fc.bytes+n > maxStreamBytes) {
		fc.cond.Wait()
	}
	fc.bytes += n
	if len(fc.inflight) == 0 {
		fc.o.Busy(fc.c, true)
	}
	fc.mu.Unlock()
}

// begin records stream as in flight; false when it already is.
func (fc *conn) begin(stream uint32) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.inflight[stream] {
		return false
	}
	fc.inflight[stream] = true
	return true
}

// release returns a frame's n bytes and ends its stream (0: none began).
func (fc *conn) release(n int, stream uint32) {
	fc.mu.Lock()
	fc.bytes -= n
	if stream != 0 {
		delete(fc.inflight, stream)
	}
	if len(fc.inflight) == 0 {
		fc.o.Busy(fc.c, false)
	}
	fc.cond.Broadcast()
	fc.mu.Unlock()
}

func (fc *conn) isInFlight(stream uint32) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.inflight[stream]
}

func (fc *conn) isStopping() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.stopping
}

func (fc *conn) busy() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.inflight) > 0
}

// stop makes the reader end: no further frame is read; the requests in
// flight are answered, then the connection closes (serve).
func (fc *conn) stop() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.stopping = true
	if fc.c != nil {
		_ = fc.c.SetReadDeadline(time.Now())
	}
}

// dispatch serves one request frame through the handler and returns its
// answer.
func (fc *conn) dispatch(q *ctlframe.Frame) *ctlframe.Frame {
	r, err := fc.request(q)
	if err != nil {
		return fc.errorResponse(q.Stream, err.status, err.msg)
	}
	w := &writer{header: http.Header{}}
	fc.o.Handler.ServeHTTP(w, r)
	a := &ctlframe.Frame{Stream: q.Stream, Status: w.status(), Body: w.body.Bytes()}
	for name, k := range fc.o.ResponseFields {
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
func (fc *conn) request(q *ctlframe.Frame) (*http.Request, *refusal) {
	u, err := url.ParseRequestURI(q.Path)
	if err != nil {
		return nil, &refusal{http.StatusBadRequest, "malformed request path"}
	}
	h := make(http.Header, len(q.Fields))
	for name, v := range q.Fields {
		k, ok := fc.o.RequestFields[name]
		if !ok {
			return nil, &refusal{http.StatusBadRequest, "header field " + name + " is not read by the control API (authorization, content-type and origin are)"}
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

// writeError answers stream (0: the connection) with status and msg.
func (fc *conn) writeError(stream uint32, status int, msg string) {
	_ = fc.writeResponse(fc.errorResponse(stream, status, msg))
}

// errorResponse is the error answer to stream, with the body an HTTP error
// of this status and message has.
func (fc *conn) errorResponse(stream uint32, status int, msg string) *ctlframe.Frame {
	return &ctlframe.Frame{Stream: stream, Status: status, Body: fc.o.ErrorBody(msg),
		Fields: map[string]string{"content-type": "application/json"}}
}

// writeResponse queues a's frame and writes it, whole. The answers that
// are ready at once (a group commit wakes many handlers) go out in one
// write: the first handler to find no write in progress writes what is
// queued, and goes on while more arrives; the others only queue.
func (fc *conn) writeResponse(a *ctlframe.Frame) error {
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
		_ = fc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
		_, werr := fc.c.Write(buf)
		fc.wmu.Lock()
		if cap(buf) <= maxSpareWrite {
			fc.spare = buf[:0]
		}
		if werr != nil {
			// The reader sees the close and ends the connection; what
			// is queued is dropped with it.
			fc.c.Close()
			fc.pending = nil
		}
	}
	fc.flushing = false
	fc.wmu.Unlock()
	return nil
}

// writer is the http.ResponseWriter of a framed request: it keeps the
// status, header and body for the response frame. It cannot be hijacked
// or flushed, and has no read deadline to set (http.ResponseController
// says so): the request's frame was read whole before it was dispatched,
// within the frame deadline of section 9.4.
type writer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *writer) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.body.Len()+len(b) > ctlframe.MaxLen {
		return 0, errors.New("the answer does not fit in a frame")
	}
	return w.body.Write(b)
}

func (w *writer) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
