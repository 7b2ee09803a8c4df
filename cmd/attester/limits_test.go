package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
)

// TestConnectionLimitAgainstTheBinary: 500 connections that send part of
// their headers hold every slot of a listener (attester.maxConnections,
// default 500); the 501st is closed at once rather than queued or served,
// on the control socket and on the public listener. The orchestrator's
// call is refused while the flood holds the slots and goes through once
// the header deadline (5 s) has closed the slow connections: a flood delays
// it, bounded, and never starves it.
func TestConnectionLimitAgainstTheBinary(t *testing.T) {
	a, _ := startWithPack(t, nil)
	const limit = 500
	var wg sync.WaitGroup
	held := make(chan struct{}, 2) // a flood holds every slot
	for _, target := range []struct{ network, addr string }{{"unix", a.socket}, {"tcp", strings.TrimPrefix(a.public, "http://")}} {
		wg.Go(func() {
			var flood []net.Conn
			var once sync.Once
			signal := func() { once.Do(func() { held <- struct{}{} }) }
			defer func() {
				signal() // also on failure (reported by t.Errorf)
				for _, c := range flood {
					c.Close()
				}
			}()
			for range limit {
				c, err := net.Dial(target.network, target.addr)
				if err != nil {
					t.Errorf("%s: dial: %v", target.network, err)
					return
				}
				flood = append(flood, c)
				io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: attester\r\n")
			}
			// The 501st: closed by the attester without an answer.
			c, err := net.Dial(target.network, target.addr)
			if err != nil {
				t.Errorf("%s: dial 501: %v", target.network, err)
				return
			}
			defer c.Close()
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: attester\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, err := c.Read(make([]byte, 1))
			var ne net.Error
			if n != 0 || err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s: connection %d was not closed at once: %d bytes, %v", target.network, limit+1, n, err)
			}
			signal()
			// The flood is closed by the header deadline.
			for i, c := range flood {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.Copy(io.Discard, c); err != nil {
					t.Errorf("%s: slow connection %d not closed by the attester: %v", target.network, i, err)
					return
				}
			}
		})
	}

	// The orchestrator, during the flood: refused at first, through once
	// the slow connections are gone (within the 5 s header deadline).
	<-held
	<-held
	orch := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: a.control.Transport.(*http.Transport).DialContext}, Timeout: 5 * time.Second}
	start := time.Now()
	refused := 0
	for {
		resp, err := orch.Get("http://attester/v1/gate/policy")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("policy: %d", resp.StatusCode)
			}
			break
		}
		refused++
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the orchestrator was starved for %v: %v", time.Since(start), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	if refused == 0 {
		t.Fatal("the orchestrator's call went through while every slot was held: no limit")
	}
	t.Logf("orchestrator through after %v (%d refused attempts)", time.Since(start).Round(time.Millisecond), refused)
}

// TestIdentityQuotesAgainstTheBinary: GET /v1/identity without a challenge
// serves one shared key attestation (no quote per request); with a
// challenge, quotes beyond the rate limit get 429 with Retry-After.
func TestIdentityQuotesAgainstTheBinary(t *testing.T) {
	a, _ := startWithPack(t, nil)
	x, y := a.req(t, true, "GET", "/v1/identity", "", nil), a.req(t, true, "GET", "/v1/identity", "", nil)
	if x.code != 200 || y.code != 200 || x.body["key_attestation"] != y.body["key_attestation"] {
		t.Fatalf("challenge-less identity: %d %d, same attestation %v", x.code, y.code, x.body["key_attestation"] == y.body["key_attestation"])
	}
	var mu sync.Mutex
	codes := map[int]int{}
	retry := ""
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			r := a.req(t, true, "GET", "/v1/identity?challenge="+b64u.Encode([]byte{byte(i)}), "", nil)
			mu.Lock()
			defer mu.Unlock()
			codes[r.code]++
			if r.code == 429 {
				retry = r.hdr.Get("Retry-After")
			}
			if r.code == 200 && r.body["key_attestation"] == x.body["key_attestation"] {
				t.Error("a challenged request got the shared attestation")
			}
		})
	}
	wg.Wait()
	if codes[200] < 8 || codes[429] == 0 || codes[200]+codes[429] != 24 || retry == "" {
		t.Fatalf("24 challenged requests at once: %v, Retry-After %q", codes, retry)
	}
}
