package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/answer"
)

// selfStartTime is this process's start time (/proc/self/stat field 22).
func selfStartTime(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat:", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var v int64
	for _, c := range f[22-3] {
		v = v*10 + int64(c-'0')
	}
	return v
}

// TestAnswersSigned: every answer the orchestrator acts on carries a
// statement signed by the identity key that binds the request, the exact
// body, this process and the run's next sequence number; audit, close and
// refusals are unsigned and use no number.
func TestAnswersSigned(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	enc, mj := h.sealPack(t, p.Pack)
	start := selfStartTime(t)
	seq := int64(0)
	runID := ""
	do := func(method, path, capability string, body []byte, want int, signed bool) []byte {
		t.Helper()
		resp := h.ctlResp(t, method, path, capability, body)
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, got)
		}
		st, err := answer.Verify(h.id.Public, resp.Header.Get(answer.HeaderStatement), resp.Header.Get(answer.HeaderSignature))
		if !signed {
			if answer.Code(err) != "ANSWER_UNSIGNED" {
				t.Fatalf("%s %s: %v, want unsigned", method, path, err)
			}
			return got
		}
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if runID == "" {
			runID = st.RunID
		}
		seq++
		if err := st.Check(answer.Expect{RunID: runID, Seq: seq, Status: want, RequestHash: answer.RequestHash(method, path, body),
			ResponseHash: sha256.Sum256(got), PID: int64(os.Getpid()), StartTime: start}); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return got
	}
	created := do("POST", "/v1/runs", "", runBody(enc, mj, p.Rebuilt.ReportHashB64u(), "s"), 201, true)
	var run struct{ RunID, Capability string }
	run.RunID = jsonField(t, created, "run_id")
	run.Capability = jsonField(t, created, "capability")
	if run.RunID != runID {
		t.Fatalf("statement names run %s, body %s", runID, run.RunID)
	}
	base := "/v1/runs/" + run.RunID
	if got := do("GET", base+"/prompt", run.Capability, nil, 200, true); !bytes.Equal(got, p.Rebuilt.Prompt) {
		t.Fatal("prompt differs")
	}
	turn := jsonField(t, do("POST", base+"/turns", run.Capability, []byte(`{"channel":"cli","sender_id":"u","message_id":"1","content_sha256_b64u":"`+b64u.SHA256(nil)+`"}`), 201, true), "turn_id")
	do("POST", base+"/tool-calls", run.Capability, []byte(`{"turn_id":"`+turn+`","tool":"read","params":{"path":"a"}}`), 200, true)
	// A refusal is unsigned and uses no number.
	do("POST", base+"/tool-calls", run.Capability, []byte(`{"turn_id":"turn_AAAAAAAAAAAAAAAAAAAAAA","tool":"read"}`), 409, false)
	// A turn_id of no form the attester issues is malformed (400), not
	// stale: missing, null, another form, non-canonical b64u, 70,000
	// characters (60,000 on verify, whose body limit is 64 KiB).
	for _, id := range []string{``, `"turn_id":null,`, `"turn_id":"stale",`, `"turn_id":"turn_AAAAAAAAAAAAAAAAAAAAAB",`,
		`"turn_id":"` + strings.Repeat("t", 70000) + `",`} {
		do("POST", base+"/tool-calls", run.Capability, []byte(`{`+id+`"tool":"read"}`), 400, false)
		if len(id) > 60000 {
			id = id[:60000] + `",`
		}
		do("POST", base+"/verify", run.Capability, []byte(`{`+strings.TrimSuffix(id, ",")+`}`), 400, false)
	}
	do("GET", base+"/audit", run.Capability, nil, 200, false)
	do("POST", base+"/tool-calls", run.Capability, []byte(`{"turn_id":"`+turn+`","tool":"exec","params":{"command":"id"}}`), 200, true)
	do("DELETE", base, run.Capability, nil, 204, false)
	if seq != 5 {
		t.Fatalf("%d signed answers, want 5", seq)
	}
}

// TestUnknownPeerRefused: a control request whose peer the attester could
// not read (no credentials recorded by control.ConnContext) is refused
// before routing (403); control.AdmitCaller's cases are tested in control.
func TestUnknownPeerRefused(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	h := newTestServer(t, p.Trusted)
	req, _ := http.NewRequest("GET", "/v1/gate/policy", nil)
	rec := newRecorder()
	h.srv.ControlHandler().ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Errorf("no peer: %d %s", rec.Code, rec.Body)
	}
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func jsonField(t *testing.T, body []byte, k string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m[k].(string)
	return s
}
