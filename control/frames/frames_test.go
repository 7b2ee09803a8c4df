package frames

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/clawea/attester/wire/ctlframe"
)

// group serves framed connections on a loopback listener: GET /v1/frames
// upgrades (Group.Serve); a framed GET /block waits until release is
// closed, GET /slow takes 300 ms, any request is answered 200 "ok". entered receives one
// value per /block request that began.
type group struct {
	g        Group
	addr     string
	entered  chan struct{}
	release  chan struct{}
	serveErr chan error
}

func newGroup(t *testing.T) *group {
	t.Helper()
	gr := &group{entered: make(chan struct{}, 4), release: make(chan struct{}), serveErr: make(chan error, 4)}
	o := &Options{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				time.Sleep(300 * time.Millisecond)
			}
			if r.URL.Path == "/block" {
				gr.entered <- struct{}{}
				<-gr.release
			}
			_, _ = io.WriteString(w, "ok")
		}),
		RequestFields:  map[string]string{"content-type": "Content-Type"},
		ResponseFields: map[string]string{"content-type": "Content-Type"},
		FrameTimeout:   time.Second,
		ErrorBody:      func(msg string) []byte { return []byte(msg) },
		Busy:           func(net.Conn, bool) {},
		Release:        func(c net.Conn) { c.Close() },
		Log:            slog.New(slog.DiscardHandler),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := gr.g.Serve(w, r, o); err != nil {
			gr.serveErr <- err
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	gr.addr = ln.Addr().String()
	return gr
}

// dial upgrades a new connection; it returns the connection's reader, or
// the refusal's status.
func (gr *group) dial(t *testing.T) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", gr.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /v1/frames HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: "+ctlframe.Token+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp.StatusCode
}

func send(t *testing.T, c net.Conn, q *ctlframe.Frame) {
	t.Helper()
	b, err := q.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownWaitsForInFlight: Shutdown stops the reads at once but
// returns only when the requests in flight have been answered and the
// connection closed (its context ending first otherwise); the connection's
// last word is a stream-0 503; a later upgrade is refused (ErrStopping).
func TestShutdownWaitsForInFlight(t *testing.T) {
	gr := newGroup(t)
	c, br, status := gr.dial(t)
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", status)
	}
	send(t, c, &ctlframe.Frame{Stream: 7, Method: "GET", Path: "/block"})
	<-gr.entered

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := gr.g.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a request in flight: %v, want it to wait until its context ends", err)
	}
	close(gr.release)
	if err := gr.g.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown once the request was answered: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	a, _, err := ctlframe.Read(br)
	if err != nil || a.Stream != 7 || a.Status != http.StatusOK || string(a.Body) != "ok" {
		t.Fatalf("the request in flight: %v %+v", err, a)
	}
	a, _, err = ctlframe.Read(br)
	if err != nil || a.Stream != 0 || a.Status != http.StatusServiceUnavailable || string(a.Body) != ErrStopping.Error() {
		t.Fatalf("the last word: %v %+v", err, a)
	}
	if _, _, err := ctlframe.Read(br); err != io.EOF {
		t.Fatalf("the connection stays open: %v", err)
	}
	if _, _, status := gr.dial(t); status != http.StatusServiceUnavailable || !errors.Is(<-gr.serveErr, ErrStopping) {
		t.Fatalf("an upgrade after Shutdown: %d", status)
	}
}

// TestStreamBounds: a connection serves at most maxStreams requests at
// once (the next frame is not read until one ends), and a stream id
// reused while its request is in flight closes the connection.
func TestStreamBounds(t *testing.T) {
	gr := newGroup(t)
	c, br, _ := gr.dial(t)
	for i := range maxStreams + 1 {
		send(t, c, &ctlframe.Frame{Stream: uint32(i + 1), Method: "GET", Path: "/block"})
	}
	for range maxStreams {
		<-gr.entered
	}
	select {
	case <-gr.entered:
		t.Fatalf("request %d served beside %d in flight", maxStreams+1, maxStreams)
	case <-time.After(100 * time.Millisecond):
	}
	close(gr.release)
	<-gr.entered
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	seen := map[uint32]bool{}
	for range maxStreams + 1 {
		a, _, err := ctlframe.Read(br)
		if err != nil || a.Status != http.StatusOK || seen[a.Stream] {
			t.Fatalf("answer: %v %+v", err, a)
		}
		seen[a.Stream] = true
	}

	// Both frames in one write: the second is read while the first is in
	// flight (it takes 300 ms).
	gr2 := newGroup(t)
	c2, br2, _ := gr2.dial(t)
	var b []byte
	for _, path := range []string{"/slow", "/"} {
		var err error
		if b, err = (&ctlframe.Frame{Stream: 1, Method: "GET", Path: path}).Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c2.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	var last *ctlframe.Frame
	for {
		a, _, err := ctlframe.Read(br2)
		if err != nil {
			break
		}
		last = a
	}
	if last == nil || last.Stream != 0 || last.Status != http.StatusBadRequest {
		t.Fatalf("a stream id reused in flight: the last word %+v, want a stream-0 400", last)
	}
}
