package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"github.com/clawea/attester/control"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/wire/answer"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
)

// BenchmarkHTTPToolCall measures gate decisions over the control socket: b.N requests, sequential, with p50/p99 latency reported.
// The in-process Decide benchmark lives in package gate.
func BenchmarkHTTPToolCall(b *testing.B) {
	p := packtest.Build(b, packtest.Params(b, "min.params.json"), promptpack.BuildOptions{})
	pack, rb, trusted := p.Pack, p.Rebuilt, p.Trusted
	h := newTestServer(b, trusted)
	enc, mj := h.sealPack(b, pack)
	body := runBody(enc, mj, rb.ReportHashB64u(), "s")
	post := func(path, capability string, body []byte) *http.Response {
		req, _ := http.NewRequest("POST", "http://attester"+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if capability != "" {
			req.Header.Set("Authorization", "Bearer "+capability)
		}
		resp, err := h.control.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	resp := post("/v1/runs", "", body)
	if resp.StatusCode != 201 {
		b.Fatalf("create run: %v", resp.Status)
	}
	var run struct {
		RunID      string `json:"run_id"`
		Capability string `json:"capability"`
	}
	json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	resp = post("/v1/runs/"+run.RunID+"/turns", run.Capability, []byte(`{"channel":"cli","sender_id":"u","message_id":"1","content_sha256_b64u":"`+b64u.SHA256(nil)+`"}`))
	var turn struct {
		TurnID string `json:"turn_id"`
	}
	json.NewDecoder(resp.Body).Decode(&turn)
	resp.Body.Close()
	call := []byte(`{"turn_id":"` + turn.TurnID + `","tool":"read","params":{"path":"README.md"}}`)
	path := "/v1/runs/" + run.RunID + "/tool-calls"
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp := post(path, run.Capability, call)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("tool call: %v", resp.Status)
		}
		resp.Body.Close()
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(loadstat.Percentile(lat, 500).Microseconds()), "p50-µs")
		b.ReportMetric(float64(loadstat.Percentile(lat, 990).Microseconds()), "p99-µs")
	}
}

// BenchmarkSignAnswer measures what signing adds to each control answer
// (attester-api section 8): one statement and one Ed25519 signature by the
// identity key. BenchmarkVerifyAnswer is a client's check of it.
func BenchmarkSignAnswer(b *testing.B) {
	rn, svc, proc := benchRun(b)
	reqH, respH := answer.RequestHash("POST", "/v1/runs/"+rn.ID()+"/tool-calls", []byte(`{"turn_id":"t","tool":"read"}`)), sha256.Sum256([]byte(`{"allow":true}`))
	for b.Loop() {
		if _, err := svc.SignAnswer(rn, proc, 200, reqH, respH); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyAnswer(b *testing.B) {
	rn, svc, proc := benchRun(b)
	reqH, respH := answer.RequestHash("POST", "/v1/runs/"+rn.ID()+"/tool-calls", []byte(`{"turn_id":"t","tool":"read"}`)), sha256.Sum256([]byte(`{"allow":true}`))
	sa, err := svc.SignAnswer(rn, proc, 200, reqH, respH)
	if err != nil {
		b.Fatal(err)
	}
	st, sig := b64u.Encode(sa.Statement), b64u.Encode(sa.Signature)
	doc, err := svc.IdentityDocument(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := didkey.Parse(doc.DID)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := answer.Verify(pub, st, sig)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Check(answer.Expect{RunID: rn.ID(), Seq: 1, Status: 200, RequestHash: reqH, ResponseHash: respH, PID: int64(proc.PID), StartTime: int64(proc.StartTime)}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRun is a run created in-process by proc.
func benchRun(b *testing.B) (*control.Run, *control.Service, control.Process) {
	p := packtest.Build(b, packtest.Params(b, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(b, p.Trusted)
	enc, mj := h.sealPack(b, p.Pack)
	body := runBody(enc, mj, p.Rebuilt.ReportHashB64u(), "s")
	proc := control.Process{PID: os.Getpid(), StartTime: 1}
	svc := h.srv.Service()
	_, rn, err := svc.CreateRun(b.Context(), func(v any) error { return json.Unmarshal(body, v) }, proc)
	if err != nil {
		b.Fatal(err)
	}
	return rn, svc, proc
}
