package server

import (
	"bytes"
	"github.com/clawea/attester/control"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
)

// TestMain lets this test binary serve as the rebuild worker: the Server
// starts /proc/self/exe with the rebuild worker argument, as the attester does.
func TestMain(m *testing.M) {
	if code, ok := control.RunWorker(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestPromptServedFromSealedMemory: the prompt written from the sealed
// buffer onto the hijacked connection is a well-formed HTTP/1.1 response
// with the exact bytes, served again on request, and gone after close.
func TestPromptServedFromSealedMemory(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "full.params.json"), promptpack.BuildOptions{})
	rb := p.Rebuilt
	h := newTestServer(t, p.Trusted)
	body := h.runBodyFor(t, p, "s")
	code, m := h.ctl(t, "POST", "/v1/runs", "", body)
	if code != 201 {
		t.Fatalf("create run: %d %v", code, m)
	}
	runID, capability := m["run_id"].(string), m["capability"].(string)
	get := func() *http.Response {
		return h.ctlResp(t, "GET", "/v1/runs/"+runID+"/prompt", capability, nil)
	}
	for range 2 {
		resp := get()
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, rb.Prompt) {
			t.Fatalf("prompt: %d, %d bytes (want %d), %v", resp.StatusCode, len(got), len(rb.Prompt), err)
		}
		if resp.ContentLength != int64(len(rb.Prompt)) || resp.Header.Get("X-Clawea-System-Prompt-Hash") != rb.PromptHashB64u() ||
			resp.Header.Get("Cache-Control") != "no-store" || !resp.Close {
			t.Fatalf("prompt headers: %d %v close=%t", resp.ContentLength, resp.Header, resp.Close)
		}
	}
	if code, m := h.ctl(t, "DELETE", "/v1/runs/"+runID, capability, nil); code != 204 {
		t.Fatalf("close: %d %v", code, m)
	}
	resp := get()
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("prompt after close: %d, want 410", resp.StatusCode)
	}
}
