package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/clawea/attester/wire/ctlframe"
)

// framedConn is a client of the control socket's framed transport
// (attester-api section 9): one connection that any number of goroutines
// share, each call on a stream of its own, answers matched to calls by
// stream id as they arrive, in any order.
type framedConn struct {
	c  net.Conn
	br *bufio.Reader

	// wmu guards the frames encoded and not yet written (pending) and
	// whether a caller is writing them (flushing): calls made at once go
	// out in one write, as the attester writes its answers.
	wmu      sync.Mutex
	pending  []byte
	spare    []byte
	flushing bool

	mu      sync.Mutex
	next    uint32
	waiting map[uint32]chan *ctlframe.Frame
	err     error // why the connection ended; set once
}

// dialFramed connects to socket and upgrades the connection to frames.
func dialFramed(socket string) (*framedConn, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, "GET /v1/frames HTTP/1.1\r\nHost: attester\r\nConnection: Upgrade\r\nUpgrade: "+ctlframe.Token+"\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != ctlframe.Token {
		c.Close()
		return nil, fmt.Errorf("upgrade refused: %s", resp.Status)
	}
	f := &framedConn{c: c, br: br, waiting: map[uint32]chan *ctlframe.Frame{}}
	go f.readLoop()
	return f, nil
}

// readLoop hands each answer to its call; a stream 0 answer (the
// attester's last word) or a read error ends every call in flight.
func (f *framedConn) readLoop() {
	for {
		a, _, err := ctlframe.Read(f.br)
		if err == nil && a.Method != "" {
			err = errors.New("a request frame from the attester")
		}
		if err == nil && a.Stream == 0 {
			err = fmt.Errorf("connection refused by the attester: %d %s", a.Status, a.Body)
		}
		if err != nil {
			f.fail(err)
			return
		}
		f.mu.Lock()
		ch := f.waiting[a.Stream]
		delete(f.waiting, a.Stream)
		f.mu.Unlock()
		if ch == nil {
			f.fail(fmt.Errorf("an answer on stream %d, which has no call in flight", a.Stream))
			return
		}
		ch <- a
	}
}

func (f *framedConn) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
	for s, ch := range f.waiting {
		close(ch)
		delete(f.waiting, s)
	}
	f.c.Close()
}

// call sends q (its Stream is set here) and waits for its answer.
func (f *framedConn) call(q *ctlframe.Frame) (*ctlframe.Frame, error) {
	ch := make(chan *ctlframe.Frame, 1)
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return nil, f.err
	}
	f.next++
	if f.next == 0 {
		f.next = 1
	}
	q.Stream = f.next
	f.waiting[q.Stream] = ch
	f.mu.Unlock()
	if err := f.write(q); err != nil {
		f.fail(err)
		return nil, err
	}
	a, ok := <-ch
	if !ok {
		f.mu.Lock()
		defer f.mu.Unlock()
		return nil, f.err
	}
	return a, nil
}

// do sends one control request (a JSON body when body is not nil, the
// capability when not "") and returns its answer.
func (f *framedConn) do(method, path, capability string, body []byte) (*ctlframe.Frame, error) {
	return f.call(requestFrame(method, path, capability, body))
}

// write queues q's frame and, unless another call is writing, writes what
// is queued until nothing is.
func (f *framedConn) write(q *ctlframe.Frame) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	b, err := q.Append(f.pending)
	if err != nil {
		return err
	}
	f.pending = b
	if f.flushing {
		return nil
	}
	f.flushing = true
	defer func() { f.flushing = false }()
	for len(f.pending) > 0 {
		buf := f.pending
		f.pending, f.spare = f.spare[:0], nil
		f.wmu.Unlock()
		_, err := f.c.Write(buf)
		f.wmu.Lock()
		f.spare = buf[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// requestFrame is a control request's frame (its stream not yet chosen): a
// JSON body when body is not nil, the capability when not "".
func requestFrame(method, path, capability string, body []byte) *ctlframe.Frame {
	q := &ctlframe.Frame{Method: method, Path: path, Body: body, Fields: map[string]string{}}
	if capability != "" {
		q.Fields["authorization"] = "Bearer " + capability
	}
	if body != nil {
		q.Fields["content-type"] = "application/json"
	}
	return q
}

// close ends the connection; calls in flight fail.
func (f *framedConn) close() { f.fail(errors.New("closed")) }

// Names of the signed answer's fields in frames (attester-api section 9).
const (
	fieldStatement = "clawea-answer-statement"
	fieldSignature = "clawea-answer-signature"
)

// expectClosed waits up to d for the attester to close c, reading and
// returning what it sent first.
func expectClosed(c net.Conn, br *bufio.Reader, d time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	return io.ReadAll(br)
}
