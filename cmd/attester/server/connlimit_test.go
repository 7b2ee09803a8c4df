package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnLimiter: at the limit, the oldest idle keep-alive connection
// makes room for a new one; when no connection is idle, the new one is
// closed unanswered.
func TestConnLimiter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := NewConnLimiter(2)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ConnState: cl.ConnState, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(cl.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	addr := ln.Addr().String()

	// get sends a complete request on c and reads the answer; the
	// connection then sits idle (keep-alive).
	get := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The server marks a connection idle after the client has its answer:
	// waitIdle waits until n are.
	waitIdle := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			idle := 0
			cl.conns.Range(func(_, v any) bool {
				if http.ConnState(v.(*connSlot).state.Load()) == http.StateIdle {
					idle++
				}
				return true
			})
			if idle == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d idle connections, want %d", idle, n)
			}
		}
	}
	idle1, idle2 := dial(), dial()
	if get(idle1) != nil {
		t.Fatal("first connection not served")
	}
	waitIdle(1)
	if get(idle2) != nil {
		t.Fatal("second connection not served")
	}
	waitIdle(2)
	third := dial()
	if err := get(third); err != nil {
		t.Fatalf("a new connection at the limit with idle ones: %v", err)
	}
	// idle1 (the oldest idle) was closed to make room.
	idle1.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := idle1.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the oldest idle connection was not closed: %v", err)
	}

	waitIdle(2)
	// Two connections busy sending headers (they evict idle2, then third):
	// the next is closed unanswered.
	for range 2 {
		io.WriteString(dial(), "GET / HTTP/1.1\r\n")
	}
	time.Sleep(100 * time.Millisecond)
	busy := dial()
	if err := get(busy); err == nil {
		t.Fatal("a connection beyond the limit was served")
	}
	if cl.Refused() == 0 {
		t.Fatal("no refusal counted")
	}
}
