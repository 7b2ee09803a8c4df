package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/ctlframe"
)

// BenchmarkHTTPToolCall measures gate decisions over the control socket: b.N requests, sequential, with p50/p99 latency reported.
// The in-process Decide benchmark lives in package gate.
func BenchmarkHTTPToolCall(b *testing.B) {
	p := packtest.Build(b, packtest.Params(b, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(b, p.Trusted)
	body := h.runBodyFor(b, p, "s")
	post := func(path, capability string, body []byte) *http.Response {
		return h.ctlResp(b, "POST", path, capability, body)
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

// BenchmarkFramedToolCall measures gate decisions over one framed
// connection of the control socket, 16 in flight at once (attester-api
// section 9): each round writes 16 tool calls and reads their answers.
func BenchmarkFramedToolCall(b *testing.B) {
	p := packtest.Build(b, packtest.Params(b, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(b, p.Trusted)
	resp := h.ctlResp(b, "POST", "/v1/runs", "", h.runBodyFor(b, p, "s"))
	var run struct {
		RunID      string `json:"run_id"`
		Capability string `json:"capability"`
	}
	json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	resp = h.ctlResp(b, "POST", "/v1/runs/"+run.RunID+"/turns", run.Capability, []byte(`{"channel":"cli","sender_id":"u","message_id":"1","content_sha256_b64u":"`+b64u.SHA256(nil)+`"}`))
	var turn struct {
		TurnID string `json:"turn_id"`
	}
	json.NewDecoder(resp.Body).Decode(&turn)
	resp.Body.Close()
	f, up := dialFramedTB(b, h.srv.cfg.ControlSocket, upgradeHead)
	if up.StatusCode != http.StatusSwitchingProtocols {
		b.Fatalf("upgrade: %d", up.StatusCode)
	}
	call := []byte(`{"turn_id":"` + turn.TurnID + `","tool":"read","params":{"path":"README.md"}}`)
	var round []byte
	for i := range uint32(16) {
		round, _ = frameReq(i+1, "POST", "/v1/runs/"+run.RunID+"/tool-calls", run.Capability, call).Append(round)
	}
	n := 0
	for b.Loop() {
		if n%16 == 0 {
			if _, err := f.c.Write(round); err != nil {
				b.Fatal(err)
			}
		}
		a, _, err := ctlframe.Read(f.br)
		if err != nil || a.Status != http.StatusOK {
			b.Fatalf("tool call: %v %+v", err, a)
		}
		n++
	}
	for ; n%16 != 0; n++ {
		ctlframe.Read(f.br)
	}
}
