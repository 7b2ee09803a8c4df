package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/clawea/attester/verify"
)

// TestBodyBuffersReused: requests served at once, each body read into a
// buffer an earlier request used, get the answers they get alone: a
// verified request, one under the production policy, one with an unknown
// policy and one that does not parse, in turn on every goroutine.
func TestBodyBuffersReused(t *testing.T) {
	e := newEnv(t, 0)
	cases := []struct {
		body    []byte
		code    int
		verdict string
		message string
	}{
		{e.f.body("", true), http.StatusOK, verify.VerdictVerified, ""},
		{e.f.body("prod", false), http.StatusOK, verify.VerdictPolicy, ""},
		{e.f.body("nosuchpolicy", true), http.StatusBadRequest, verify.VerdictUsage, `unknown policy "nosuchpolicy"`},
		{[]byte(`{"request_version":"` + RequestVersion + `","policy":"default","bogus":1}`), http.StatusBadRequest, verify.VerdictUsage, "$.bogus"},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 4 {
		wg.Go(func() {
			for i := range 8 {
				c := cases[(g+i)%len(cases)]
				req := httptest.NewRequest(http.MethodPost, "/v1/verify", bytes.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
				var out struct {
					Verdict string               `json:"verdict"`
					Error   *verify.OutcomeError `json:"error"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != c.code || out.Verdict != c.verdict ||
					(c.message != "" && (out.Error == nil || !bytes.Contains([]byte(out.Error.Message), []byte(c.message)))) {
					errs <- rec.Body.String()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

// TestPutBodyClears: a body buffer goes back to the pool all zeros.
func TestPutBodyClears(t *testing.T) {
	b := make([]byte, 10, 64)
	full := b[:cap(b)]
	for i := range full {
		full[i] = 0xa5
	}
	p := &b
	putBody(p)
	if len(*p) != 0 || !bytes.Equal((*p)[:cap(*p)], make([]byte, 64)) {
		t.Fatal("a pooled body buffer keeps bytes of its request")
	}
}
