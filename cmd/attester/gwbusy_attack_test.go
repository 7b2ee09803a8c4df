package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/answer"
)

// TestGatewayBusyRunAttack (model-gateway.md sections 2.2 and 9), through
// the real binary: a harness that sends a second call of its run while the
// first one streams gets 429 GATEWAY_LIMIT at once, nothing of it reaches
// the upstream, and the refusal is in the run's gateway audit log, where
// the first call's record follows it whole, names the receipt the first
// answer carried, and that receipt and the signed answer verify.
func TestGatewayBusyRunAttack(t *testing.T) {
	release, streaming := make(chan struct{}), make(chan struct{})
	up := newGWUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"choices":[{"delta":{"content":"Hi"}}]}` + "\n\n"))
		w.(http.Flusher).Flush()
		close(streaming)
		<-release
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	// Before the upstream's Close, which waits for the held answer.
	releaseFirst := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseFirst)
	pf := newGWPack(t)
	a, state := gwStateAttester(t, pf, up.srv.URL, 5000, 5000)
	pub, _ := a.identityKeys(t)
	g := a.gwRun(t, pf)
	u := map[string]any{"role": "user", "content": "[Thu 2026-11-26 21:21 UTC] a user message"}
	first := g.body(nil, u)
	type answered struct {
		resp *http.Response
		body []byte
	}
	firstDone := make(chan answered, 1)
	req := gwRequest(g, g.capability, "", g.llmCall(t, gwSuffix), nil, first)
	go func() {
		resp, err := a.control.Do(req)
		if err != nil {
			firstDone <- answered{}
			return
		}
		defer resp.Body.Close()
		b, _ := bounded.Read(resp.Body, 1<<20, "answer")
		firstDone <- answered{resp, b}
	}()
	<-streaming

	second := g.body(func(m map[string]any) { m["stream"] = false }, u)
	resp, b := a.model(t, g, "anthropic", second)
	if resp.StatusCode != http.StatusTooManyRequests || gwReason(b) != "GATEWAY_LIMIT" {
		t.Fatalf("a second call of the busy run: %d %s, want 429 GATEWAY_LIMIT", resp.StatusCode, b)
	}
	logPath := filepath.Join(state, "gateway", g.id+".jsonl")
	if recs := gwAuditRecords(t, logPath); len(recs) != 1 || recs[0].Outcome != "refused" {
		t.Fatalf("while the first call streams, the run's gateway log holds %+v, want the refusal", recs)
	}
	releaseFirst()
	fa := <-firstDone
	if fa.resp == nil || fa.resp.StatusCode != 200 || fa.resp.Trailer.Get("Clawea-Gateway-Error") != "" {
		t.Fatalf("the first call: %+v", fa)
	}
	if n := up.calls(); n != 1 {
		t.Fatalf("the upstream got %d calls, want the first only", n)
	}
	st, err := answer.Verify(pub, fa.resp.Trailer.Get(answer.HeaderStatement), fa.resp.Trailer.Get(answer.HeaderSignature))
	if err != nil || st.Status != 200 || st.ResponseHashB64u != b64u.SHA256(fa.body) {
		t.Fatalf("the first call's signed answer: %v %+v", err, st)
	}
	env, err := b64u.Decode(fa.resp.Trailer.Get("Clawea-Gateway-Receipt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := poh.ChainGatewayReceipt("", 0, env); err != nil {
		t.Fatalf("the first call's receipt: %v", err)
	}

	recs := gwAuditRecords(t, logPath)
	if len(recs) != 2 {
		t.Fatalf("the run's gateway log: %+v", recs)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.RunID != g.id || r.TurnID != g.turn || r.Provider != "anthropic" {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if r := recs[0]; r.Outcome != "refused" || r.Reason != "GATEWAY_LIMIT" || r.Status != 429 || r.RequestHash != b64u.SHA256(second) ||
		r.Model != "" || r.ReceiptHash != "" {
		t.Fatalf("the refusal's record: %+v", r)
	}
	if r := recs[1]; r.Outcome != "forwarded" || r.Status != 200 || r.RequestHash != b64u.SHA256(first) ||
		r.ResponseHash != b64u.SHA256(fa.body) || r.ReceiptHash != b64u.SHA256(env) {
		t.Fatalf("the first call's record: %+v", r)
	}
}

// gwRecord is the part of a gateway audit record (section 9) these tests read.
type gwRecord struct {
	Seq          int64  `json:"seq"`
	RunID        string `json:"run_id"`
	TurnID       string `json:"turn_id"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Outcome      string `json:"outcome"`
	Reason       string `json:"reason"`
	Status       int    `json:"status"`
	RequestHash  string `json:"request_hash_b64u"`
	ResponseHash string `json:"response_hash_b64u"`
	ReceiptHash  string `json:"receipt_hash_b64u"`
}

// gwAuditRecords reads a run's gateway audit log, one JSON record a line.
func gwAuditRecords(t *testing.T, path string) []gwRecord {
	t.Helper()
	b, err := bounded.ReadFile(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var recs []gwRecord
	for line := range bytes.Lines(b) {
		var r gwRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("a gateway audit line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}
