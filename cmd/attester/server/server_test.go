package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/internal/bintest"
	"github.com/clawea/attester/internal/controltest"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/auditrec"
)

var trustedOne = map[string]string{"identity.txt": "sha256:" + strings.Repeat("ab", 32)}

func testConfig(t testing.TB, trusted map[string]string) []byte {
	t.Helper()
	cfg := map[string]any{
		"attester": map[string]any{
			"controlSocket": filepath.Join(t.TempDir(), "ctl", "control.sock"), "platform": "simulated",
			"owners":           []string{"telegram:owner-1", "cli:local"},
			"trustedTemplates": trusted, "allowUnlockedMemory": true,
			"modelProvider": "anthropic", "model": "claude-test",
		},
		"agents": map[string]any{"defaults": map[string]any{"sig": map[string]any{"enforceVerification": true}}},
		"tools":  map[string]any{"deny": []string{"browser"}},
	}
	b, _ := json.Marshal(cfg)
	return b
}

type harness struct {
	srv     *Server
	api     *httptest.Server // public TCP surface
	control *http.Client     // over the control socket
	logs    *bintest.Buffer
	id      *control.Identity
}

func newTestServer(t testing.TB, trusted map[string]string) *harness {
	t.Helper()
	return newTestServerConfig(t, testConfig(t, trusted))
}

// newServer builds a control.Service from d and serves it, with a registry
// of its own (the Go and process collectors, the control plane's counters
// and the HTTP metrics), as the attester's main does; d.Registerer is
// ignored.
func newServer(d control.Deps) (*Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.Registerer = reg
	svc, err := control.New(d)
	if err != nil {
		return nil, err
	}
	return Wrap(svc, reg, d.Logger), nil
}

func newTestServerConfig(t testing.TB, raw []byte) *harness {
	t.Helper()
	logs := &bintest.Buffer{}
	d := controltest.Deps(t, raw, detect.Simulated, detect.Options{}, slog.New(slog.NewJSONHandler(logs, nil)))
	cfg, id := d.Config, d.Identity
	s, err := newServer(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := httptest.NewServer(s.PublicHandler())
	t.Cleanup(api.Close)
	ln, err := ListenControlSocket(cfg.ControlSocket)
	if err != nil {
		t.Fatal(err)
	}
	cs := &http.Server{Handler: s.ControlHandler(), ConnContext: control.ConnContext, ReadHeaderTimeout: 5 * time.Second}
	go cs.Serve(ln)
	t.Cleanup(func() { cs.Close(); ln.Close() })
	return &harness{srv: s, api: api, control: unixClient(cfg.ControlSocket), logs: logs, id: id}
}

func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// call sends a request on the public TCP surface.
func (h *harness) call(t *testing.T, method, path string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, h.api.URL+path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(t, h.api.Client(), req)
}

// ctl sends a request on the control socket with the capability (if any).
func (h *harness) ctl(t *testing.T, method, path, capability string, body []byte) (int, map[string]any) {
	t.Helper()
	return do(t, h.control, ctlRequest(method, path, capability, body))
}

// ctlResp sends a request on the control socket with the capability (if
// any) and returns the response; the caller closes its body.
func (h *harness) ctlResp(tb testing.TB, method, path, capability string, body []byte) *http.Response {
	tb.Helper()
	resp, err := h.control.Do(ctlRequest(method, path, capability, body))
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// ctlRequest is a control request: a JSON body when body is not nil, the
// capability as a bearer token when it is not "".
func ctlRequest(method, path, capability string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, "http://attester"+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if capability != "" {
		req.Header.Set("Authorization", "Bearer "+capability)
	}
	return req
}

func do(t *testing.T, c *http.Client, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil && resp.StatusCode != http.StatusNoContent && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("%s %s: %d: body is not JSON: %q", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func TestHealthReadyMetrics(t *testing.T) {
	h := newTestServer(t, trustedOne)
	if code, _ := h.call(t, "GET", "/healthz", nil); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	code, m := h.call(t, "GET", "/readyz", nil)
	if code != 200 || m["simulated"] != true || m["platform"] != "sev-snp" {
		t.Fatalf("readyz %d %v", code, m)
	}
	h.srv.SetReady(false)
	if code, _ := h.call(t, "GET", "/readyz", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("draining readyz %d", code)
	}
	h.srv.SetReady(true)
	// Metrics are not on the public listener.
	if code, _ := h.call(t, "GET", "/metrics", nil); code != 404 {
		t.Fatalf("metrics on the public listener: %d", code)
	}
	ms := httptest.NewServer(h.srv.MetricsHandler())
	defer ms.Close()
	resp, err := ms.Client().Get(ms.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"clawea_http_requests_total", "go_goroutines"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A gate that cannot record is not ready: closing the control plane
	// closes the gate's audit log.
	h.srv.Close()
	if code, _ := h.call(t, "GET", "/readyz", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a closed audit log %d", code)
	}
}

func TestIdentityKeyAttestation(t *testing.T) {
	h := newTestServer(t, trustedOne)
	code, m := h.call(t, "GET", "/v1/identity?challenge="+b64u.Encode([]byte("nonce")), nil)
	if code != 200 || m["did"] != h.id.DID || m["simulated"] != true || m["key_attestation"] == "" {
		t.Fatalf("identity %d %v", code, m)
	}
	for _, q := range []string{"challenge=AA==", "challenge=" + b64u.Encode(make([]byte, 65)), "challenge=%%%", "challenge=", "challenge=AA&challenge=AA", "nonce=AA"} {
		if code, m := h.call(t, "GET", "/v1/identity?"+q, nil); code != 400 {
			t.Errorf("identity?%s: %d %v", q, code, m)
		}
	}
}

func TestBadRequests(t *testing.T) {
	h := newTestServer(t, trustedOne)
	// The control API is not on TCP: 403 before the body is read.
	for _, tt := range []struct{ method, path string }{
		{"POST", "/v1/runs"}, {"POST", "/v1/runs/run_x/turns"}, {"GET", "/v1/runs/run_x/prompt"},
		{"DELETE", "/v1/runs/run_x"}, {"GET", "/v1/audit"}, {"GET", "/v1/runs/run_x/audit"},
	} {
		if code, m := h.call(t, tt.method, tt.path, []byte(`{}`)); code != 403 {
			t.Errorf("TCP %s %s: %d %v", tt.method, tt.path, code, m)
		}
	}
	if code, _ := h.call(t, "GET", "/nope", nil); code != 404 {
		t.Errorf("unknown route: %d", code)
	}
	if code, _ := h.call(t, "POST", "/v1/identity", []byte(`{}`)); code != 405 {
		t.Errorf("wrong method: %d", code)
	}
	tests := []struct {
		method, path, cap string
		body              []byte
		want              int
	}{
		{"POST", "/v1/runs", "", []byte(`{`), 400},
		{"POST", "/v1/runs", "", []byte(`{"bogus":1}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a","AGENT_ID":"b"}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a","agent_id":"b"}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"Agent_id":"a"}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a"} {}`), 400},
		{"POST", "/v1/runs", "", []byte("{\"agent_id\":\"\xff\"}"), 400},
		{"POST", "/v1/runs", "", []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100)), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a/b","session_key":"s","report_hash_b64u":"x"}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a","session_key":"s\u0000","report_hash_b64u":"x"}`), 400},
		{"POST", "/v1/runs", "", []byte(`{"agent_id":"a","session_key":"s","report_hash_b64u":"x"}`), 400},
		{"POST", "/v1/runs", "", bytes.Repeat([]byte("x"), 100<<20), 413},
		{"GET", "/v1/runs", "", nil, 405},
		{"GET", "/v1/nope", "", nil, 404},
		{"POST", "/v1/runs/run_nope/tool-calls", "", []byte(`{}`), 401},
		{"POST", "/v1/runs/run_nope/tool-calls", "clawea-cap-v1.short", []byte(`{}`), 401},
		{"POST", "/v1/runs/run_nope/tool-calls", "clawea-cap-v1." + b64u.Encode(make([]byte, 32)), []byte(`{}`), 403},
		{"POST", "/v1/runs/run_nope/attestation", "clawea-cap-v1." + b64u.Encode(make([]byte, 32)), []byte(`{}`), 403},
		{"GET", "/v1/runs/run_nope/prompt", "", nil, 401},
		{"DELETE", "/v1/runs/run_nope", "clawea-cap-v1." + b64u.Encode(make([]byte, 32)), nil, 403},
	}
	for _, tt := range tests {
		code, m := h.ctl(t, tt.method, tt.path, tt.cap, tt.body)
		if code != tt.want {
			t.Errorf("%s %s: %d %v, want %d", tt.method, tt.path, code, m, tt.want)
		}
	}
	// Content-Type is checked (415) on bodies.
	req, _ := http.NewRequest("POST", "http://attester/v1/runs", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "text/plain")
	if code, _ := do(t, h.control, req); code != 415 {
		t.Errorf("text/plain body: %d", code)
	}
	// A browser (Origin) is refused on the control socket.
	req, _ = http.NewRequest("GET", "http://attester/v1/gate/policy", nil)
	req.Header.Set("Origin", "http://evil.example")
	if code, _ := do(t, h.control, req); code != 403 {
		t.Errorf("request with Origin: %d", code)
	}
}

func TestControlUIDs(t *testing.T) {
	var cfg map[string]any
	json.Unmarshal(testConfig(t, trustedOne), &cfg)
	cfg["attester"].(map[string]any)["controlUids"] = []int{os.Geteuid() + 1}
	raw, _ := json.Marshal(cfg)
	h := newTestServerConfig(t, raw)
	if code, m := h.ctl(t, "GET", "/v1/gate/policy", "", nil); code != 403 {
		t.Fatalf("uid not in controlUids: %d %v", code, m)
	}
	if code, m := h.ctl(t, "POST", "/v1/runs", "", []byte(`{}`)); code != 403 {
		t.Fatalf("uid not in controlUids: %d %v", code, m)
	}
}

// sealPack seals pack to h's pack key; it returns the ciphertext and the
// manifest JSON.
func (h *harness) sealPack(t testing.TB, pack *promptpack.Pack) (enc, manifest []byte) {
	t.Helper()
	enc, man, err := promptpack.SealPack(pack, h.id.PackKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	manifest, err = man.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return enc, manifest
}

// runBody is a POST /v1/runs body for agent "main".
// runBodyFor seals p to h's attester and returns the creation of a run of
// it (session key session), with p's report hash.
func (h *harness) runBodyFor(tb testing.TB, p *packtest.Pack, session string) []byte {
	tb.Helper()
	enc, mj := h.sealPack(tb, p.Pack)
	return runBody(enc, mj, p.Rebuilt.ReportHashB64u(), session)
}

func runBody(enc, manifest []byte, report, session string) []byte {
	b, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(manifest), "report_hash_b64u": report, "agent_id": "main", "session_key": session})
	return b
}

// TestRunRefusals: a tampered pack, a wrong committed report hash and an
// untrusted template are all refused, and nothing is kept.
func TestRunRefusals(t *testing.T) {
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	pack, rb, trusted := p.Pack, p.Rebuilt, p.Trusted
	h := newTestServer(t, trusted)
	enc, mj := h.sealPack(t, pack)
	body := func(enc []byte, report string) []byte { return runBody(enc, mj, report, "agent:main:main") }
	tampered := bytes.Clone(enc)
	tampered[len(tampered)-5] ^= 1
	code, m := h.ctl(t, "POST", "/v1/runs", "", body(tampered, rb.ReportHashB64u()))
	if code != 422 {
		t.Fatalf("tampered pack: %d %v", code, m)
	}
	code, m = h.ctl(t, "POST", "/v1/runs", "", body(enc, b64u.SHA256([]byte("other report"))))
	if code != 422 || m["reason"] == nil {
		t.Fatalf("wrong report hash: %d %v", code, m)
	}
	// An attester that trusts another hash for one template refuses the pack
	// and names the template.
	other := map[string]string{}
	for k, v := range trusted {
		other[k] = v
	}
	other["identity.txt"] = "sha256:" + strings.Repeat("00", 32)
	h2 := newTestServer(t, other)
	enc2, mj2 := h2.sealPack(t, pack)
	code, m = h2.ctl(t, "POST", "/v1/runs", "", runBody(enc2, mj2, rb.ReportHashB64u(), "s"))
	if code != 422 || !strings.Contains(m["error"].(string), "identity.txt") {
		t.Fatalf("untrusted template: %d %v", code, m)
	}
	if n := h.srv.Service().Status().OpenRuns + h2.srv.Service().Status().OpenRuns; n != 0 {
		t.Fatalf("%d runs kept after refusals", n)
	}
	// And the good pack opens.
	code, m = h.ctl(t, "POST", "/v1/runs", "", body(enc, rb.ReportHashB64u()))
	if code != 201 || m["system_prompt_hash_b64u"] != rb.PromptHashB64u() {
		t.Fatalf("good pack: %d %v", code, m)
	}
	runID, capability := m["run_id"].(string), m["capability"].(string)
	if !strings.HasPrefix(capability, "clawea-cap-v1.") || len(capability) != len("clawea-cap-v1.")+43 {
		t.Fatalf("capability %q", capability)
	}
	// The prompt, with the capability only.
	if code, _ := h.ctl(t, "GET", "/v1/runs/"+runID+"/prompt", "", nil); code != 401 {
		t.Fatalf("prompt without capability: %d", code)
	}
	resp := h.ctlResp(t, "GET", "/v1/runs/"+runID+"/prompt", capability, nil)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, rb.Prompt) || resp.Header.Get("X-Clawea-System-Prompt-Hash") != rb.PromptHashB64u() {
		t.Fatalf("prompt: %d", resp.StatusCode)
	}
	// A non-owner turn: verify is refused and gated tools stay blocked.
	content := b64u.SHA256([]byte("hello"))
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/turns", capability, []byte(`{"channel":"telegram","message_id":"1","sender_id":"x","content_sha256_b64u":"`+content+`"}`))
	if code != 201 || m["owner"] != false || m["signature_id"] != nil {
		t.Fatalf("turn %d %v", code, m)
	}
	turn := m["turn_id"].(string)
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/verify", capability, []byte(`{"turn_id":"`+turn+`"}`))
	if code != 403 {
		t.Fatalf("non-owner verify %d %v", code, m)
	}
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/tool-calls", capability, []byte(`{"turn_id":"`+turn+`","tool":"exec","params":{"command":"id"}}`))
	if code != 200 || m["allow"] != false || m["stage"] != "verification_gate" {
		t.Fatalf("exec before verify %d %v", code, m)
	}
	// An owner turn: its signed message verifies; the earlier turn is stale.
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/turns", capability, []byte(`{"channel":"telegram","message_id":"2","sender_id":"owner-1","content_sha256_b64u":"`+content+`"}`))
	if code != 201 || m["owner"] != true || m["signature_id"] != "agent:main:main:telegram:2" {
		t.Fatalf("owner turn %d %v", code, m)
	}
	owned := m["turn_id"].(string)
	if code, _ := h.ctl(t, "POST", "/v1/runs/"+runID+"/verify", capability, []byte(`{"turn_id":"`+turn+`"}`)); code != 409 {
		t.Fatalf("verify of a stale turn: %d", code)
	}
	if code, _ := h.ctl(t, "POST", "/v1/runs/"+runID+"/tool-calls", capability, []byte(`{"turn_id":"`+turn+`","tool":"read"}`)); code != 409 {
		t.Fatalf("tool call in a stale turn: %d", code)
	}
	if code, _ := h.ctl(t, "POST", "/v1/runs/"+runID+"/verify", capability, []byte(`{"turn_id":"`+owned+`","message_id":"1","content_sha256_b64u":"`+content+`"}`)); code != 422 {
		t.Fatalf("verify with another turn's message: %d", code)
	}
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/verify", capability, []byte(`{"turn_id":"`+owned+`","message_id":"2","content_sha256_b64u":"`+content+`"}`))
	if code != 200 || m["verified"] != true || m["identity"] != "owner:owner-1:telegram" {
		t.Fatalf("owner verify %d %v", code, m)
	}
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/tool-calls", capability, []byte(`{"turn_id":"`+owned+`","tool":"exec","params":{"command":"id"}}`))
	if code != 200 || m["allow"] != true {
		t.Fatalf("exec after verify %d %v", code, m)
	}
	// A refused turn (reused message id) leaves the verified turn current.
	if code, _ := h.ctl(t, "POST", "/v1/runs/"+runID+"/turns", capability, []byte(`{"channel":"cli","message_id":"2","sender_id":"local","content_sha256_b64u":"`+content+`"}`)); code != 409 {
		t.Fatalf("reused message id: %d", code)
	}
	code, m = h.ctl(t, "POST", "/v1/runs/"+runID+"/tool-calls", capability, []byte(`{"turn_id":"`+owned+`","tool":"exec","params":{"command":"id"}}`))
	if code != 200 || m["allow"] != true {
		t.Fatalf("a refused turn changed the current turn: %d %v", code, m)
	}
	// Each run has its own audit chain: a second run's decisions are not in
	// the first run's log, and each log verifies to the root and count in
	// its headers.
	code, m = h.ctl(t, "POST", "/v1/runs", "", body(enc, rb.ReportHashB64u()))
	if code != 201 {
		t.Fatalf("second run: %d %v", code, m)
	}
	run2, cap2 := m["run_id"].(string), m["capability"].(string)
	code, m = h.ctl(t, "POST", "/v1/runs/"+run2+"/turns", cap2, []byte(`{"channel":"cli","message_id":"1","sender_id":"u","content_sha256_b64u":"`+content+`"}`))
	if code != 201 {
		t.Fatalf("run 2 turn %d %v", code, m)
	}
	turn2 := m["turn_id"].(string)
	for range 2 {
		if code, m = h.ctl(t, "POST", "/v1/runs/"+run2+"/tool-calls", cap2, []byte(`{"turn_id":"`+turn2+`","tool":"read"}`)); code != 200 {
			t.Fatalf("run 2 tool call %d %v", code, m)
		}
	}
	for _, tc := range []struct {
		id, cap string
		want    uint64
	}{{runID, capability, 3}, {run2, cap2, 2}} {
		resp := h.ctlResp(t, "GET", "/v1/runs/"+tc.id+"/audit", tc.cap, nil)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		root, n, err := auditrec.Verify(bytes.NewReader(raw))
		if resp.StatusCode != 200 || err != nil || n != tc.want || root != resp.Header.Get("X-Clawea-Audit-Root") || resp.Header.Get("X-Clawea-Audit-Count") != fmt.Sprint(tc.want) {
			t.Fatalf("run %s audit: %d, %d records (want %d), %v, headers %v", tc.id, resp.StatusCode, n, tc.want, err, resp.Header)
		}
	}
	// Closing ends everything; the capability then gets 410.
	if code, _ := h.ctl(t, "DELETE", "/v1/runs/"+runID, capability, nil); code != 204 {
		t.Fatalf("close: %d", code)
	}
	for _, p := range []string{"/prompt", "/audit"} {
		if code, _ := h.ctl(t, "GET", "/v1/runs/"+runID+p, capability, nil); code != 410 {
			t.Fatalf("GET %s of a closed run: %d", p, code)
		}
	}
	if code, _ := h.ctl(t, "POST", "/v1/runs/"+runID+"/turns", capability, []byte(`{}`)); code != 410 {
		t.Fatalf("turn in a closed run: %d", code)
	}
	// That the gate no longer holds the closed run is checked in package
	// control (TestCloseRunEndsGateState).
	if bytes.Contains(h.logs.Bytes(), rb.Prompt[:64]) || bytes.Contains(h.logs.Bytes(), []byte(`"command":"id"`)) || bytes.Contains(h.logs.Bytes(), []byte(capability[14:])) {
		t.Fatal("logs contain prompt text, raw params or the capability")
	}
}

func TestControlSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl")
	path := filepath.Join(dir, "control.sock")
	ln, err := ListenControlSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v %v", st.Mode(), err)
	}
	dst, _ := os.Stat(dir)
	if dst.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", dst.Mode())
	}
	sg, _ := fileGroup(st)
	dg, _ := fileGroup(dst)
	if sg != dg {
		t.Fatalf("the socket's group %d is not its directory's %d", sg, dg)
	}
	// A second attester on the same path refuses to start and leaves the
	// first one's socket in place, still accepting.
	if _, err := ListenControlSocket(path); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second listener: %v", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first socket is gone after a refused second start: %v", err)
	}
	c.Close()
	// A stale socket (its attester died without removing it) is replaced.
	ln.Close()
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln2, err := ListenControlSocket(path)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln2.Close()
	// A regular file at the path is refused, not replaced.
	other := filepath.Join(dir, "file")
	os.WriteFile(other, []byte("x"), 0o600)
	if _, err := ListenControlSocket(other); err == nil {
		t.Fatal("a regular file was replaced by the socket")
	}
	// A directory that others can reach, or that its group can write (and
	// so rename the socket in), is refused; one its group may only enter
	// (0750: orchestrators reach the socket through the group) is taken.
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o750, true}, {0o710, true}, {os.ModeSetgid | 0o750, true}, {0o770, false}, {0o751, false}, {0o755, false}, {0o777, false}} {
		d := filepath.Join(t.TempDir(), "d")
		os.Mkdir(d, 0o700)
		os.Chmod(d, tc.mode)
		ln, err := ListenControlSocket(filepath.Join(d, "a.sock"))
		if (err == nil) != tc.ok {
			t.Fatalf("directory mode %v: ListenControlSocket error %v, want ok=%v", tc.mode, err, tc.ok)
		}
		if err == nil {
			ln.Close()
		}
	}
}

// FuzzDecodeStrict: whatever decodeStrict accepts has only the request's
// members, each once and in exact case, and decodes to what the strict
// parser read.
func FuzzDecodeStrict(f *testing.F) {
	// turnBody has the members of a turn's body (attester-api section 5).
	type turnBody struct {
		Channel           string `json:"channel"`
		SenderID          string `json:"sender_id"`
		MessageID         string `json:"message_id"`
		ContentSHA256B64u string `json:"content_sha256_b64u"`
	}
	for _, s := range []string{
		`{"channel":"telegram","sender_id":"1","message_id":"m","content_sha256_b64u":"x"}`,
		`{"channel":"a","CHANNEL":"b"}`, `{"channel":"a","channel":"b"}`, `{"Channel":"a"}`,
		`{"channel":"\u0000"}`, `{} {}`, `[]`, `{"sender_id":"\ud800"}`, "{\"channel\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req turnBody
		if err := decodeStrict(b, &req); err != nil {
			var he *HTTPError
			if !errors.As(err, &he) || he.Code != http.StatusBadRequest {
				t.Fatalf("error is not a 400: %v", err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("accepted %q that encoding/json refuses: %v", b, err)
		}
		allowed := map[string]bool{"channel": true, "sender_id": true, "message_id": true, "content_sha256_b64u": true}
		for k := range m {
			if !allowed[k] {
				t.Fatalf("accepted member %q", k)
			}
		}
		if s, ok := m["channel"].(string); ok && s != req.Channel {
			t.Fatalf("channel read as %q, strict parser saw %q", req.Channel, s)
		}
	})
}

// TestUncleanPaths: a path that is not in clean form gets 403 on every
// listener, never the redirect http.ServeMux would send (issue 17 item 6),
// and a control route reached through one on TCP is still refused.
func TestUncleanPaths(t *testing.T) {
	h := newTestServer(t, trustedOne)
	ms := httptest.NewServer(h.srv.MetricsHandler())
	defer ms.Close()
	noRedirect := func(c *http.Client) *http.Client {
		cc := *c
		cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &cc
	}
	for _, srv := range []struct {
		name string
		base string
		c    *http.Client
	}{
		{"public", h.api.URL, noRedirect(h.api.Client())},
		{"metrics", ms.URL, noRedirect(ms.Client())},
		{"control", "http://attester", noRedirect(h.control)},
	} {
		for _, p := range []string{"//v1/runs", "/v1//runs", "/./v1/runs", "/x/../v1/runs", "/v1/runs/./x", "//metrics", "/v1/identity/.."} {
			req, err := http.NewRequest("POST", srv.base+p, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Path = p // as sent, not cleaned by the client
			resp, err := srv.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
				t.Errorf("%s %s: %d (Location %q), want 403", srv.name, p, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
	}
	// Clean paths, with and without a trailing slash, still route.
	if code, _ := h.call(t, "GET", "/healthz", nil); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := h.call(t, "POST", "/v1/runs/", []byte(`{}`)); code != 403 {
		t.Errorf("/v1/runs/: %d", code)
	}
}
