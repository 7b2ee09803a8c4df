package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/auditrec"
)

var trustedOne = map[string]string{"identity.txt": "sha256:" + strings.Repeat("ab", 32)}

func testConfig(t testing.TB, trusted map[string]string) []byte {
	t.Helper()
	cfg := map[string]any{
		"attester": map[string]any{
			"agentSocket": filepath.Join(t.TempDir(), "agent.sock"), "platform": "simulated",
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
	srv  *Server
	api  *httptest.Server
	logs *bytes.Buffer
	id   *Identity
}

func newTestServer(t testing.TB, trusted map[string]string) *harness {
	t.Helper()
	cfg, rest, err := ParseConfig(testConfig(t, trusted))
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	p, rep, err := detect.Open(context.Background(), detect.Simulated, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	id, err := LoadIdentity(context.Background(), "", nil, sealed.Options{AllowUnlocked: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	s, err := New(Deps{Config: cfg, GateConfig: rest, Identity: id, Platform: p, PlatformReport: rep, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := httptest.NewServer(s.Handler())
	t.Cleanup(api.Close)
	return &harness{srv: s, api: api, logs: logs, id: id}
}

func (h *harness) call(t *testing.T, method, path string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, h.api.URL+path, bytes.NewReader(body))
	resp, err := h.api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"attester": map[string]any{
			"agentSocket": "/run/clawea/agent.sock", "trustedTemplates": trustedOne, "modelProvider": "p", "model": "m",
		}}
	}
	tests := []struct {
		mutate func(m map[string]any)
		key    string
	}{
		{func(m map[string]any) { delete(m, "attester") }, "attester"},
		{func(m map[string]any) { m["channels"] = map[string]any{} }, "channels"},
		{func(m map[string]any) { m["attester"].(map[string]any)["platform"] = "sgx" }, "attester.platform"},
		{func(m map[string]any) { delete(m["attester"].(map[string]any), "agentSocket") }, "attester.agentSocket"},
		{func(m map[string]any) { m["attester"].(map[string]any)["agentSocket"] = "rel.sock" }, "attester.agentSocket"},
		{func(m map[string]any) { m["attester"].(map[string]any)["trustedTemplates"] = map[string]string{} }, "attester.trustedTemplates"},
		{func(m map[string]any) {
			m["attester"].(map[string]any)["trustedTemplates"] = map[string]string{"x.txt": "md5:00"}
		}, "attester.trustedTemplates.x.txt"},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxRuns"] = 0.5 }, "attester"},
		{func(m map[string]any) { m["attester"].(map[string]any)["bogus"] = 1 }, "attester"},
		{func(m map[string]any) { delete(m["attester"].(map[string]any), "model") }, "attester.model"},
	}
	for _, tt := range tests {
		m := base()
		tt.mutate(m)
		b, _ := json.Marshal(m)
		_, _, err := ParseConfig(b)
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) || ce.Key != tt.key {
			t.Errorf("want a ConfigError naming %q, got %v", tt.key, err)
		}
	}
	if _, _, err := ParseConfig([]byte("{")); !errors.Is(err, ErrConfig) {
		t.Errorf("malformed file: %v", err)
	}
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
	resp, err := h.api.Client().Get(h.api.URL + "/metrics")
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
}

func TestIdentityKeyAttestation(t *testing.T) {
	h := newTestServer(t, trustedOne)
	code, m := h.call(t, "GET", "/v1/identity?challenge="+b64u.Encode([]byte("nonce")), nil)
	if code != 200 || m["did"] != h.id.DID || m["simulated"] != true || m["key_attestation"] == "" {
		t.Fatalf("identity %d %v", code, m)
	}
	if code, _ := h.call(t, "GET", "/v1/identity?challenge=AA==", nil); code != 400 {
		t.Fatalf("bad challenge %d", code)
	}
	if code, _ := h.call(t, "GET", "/v1/identity?challenge="+b64u.Encode(make([]byte, 65)), nil); code != 400 {
		t.Fatalf("long challenge %d", code)
	}
}

func TestBadRequests(t *testing.T) {
	h := newTestServer(t, trustedOne)
	tests := []struct {
		method, path string
		body         []byte
		want         int
	}{
		{"POST", "/v1/runs", []byte(`{`), 400},
		{"POST", "/v1/runs", []byte(`{"bogus":1}`), 400},
		{"POST", "/v1/runs", []byte(`{"agent_id":"a","session_key":"s","report_hash_b64u":"x"}`), 400},
		{"POST", "/v1/runs", bytes.Repeat([]byte("x"), 100<<20), 413},
		{"POST", "/v1/runs/run_nope/tool-calls", []byte(`{}`), 404},
		{"POST", "/v1/runs/run_nope/attestation", []byte(`{}`), 404},
		{"GET", "/v1/runs/run_nope/prompt", nil, 404}, // the prompt is never served on TCP
		{"DELETE", "/v1/runs/run_nope", nil, 404},
	}
	for _, tt := range tests {
		code, m := h.call(t, tt.method, tt.path, tt.body)
		if code != tt.want {
			t.Errorf("%s %s: %d %v, want %d", tt.method, tt.path, code, m, tt.want)
		}
	}
}

// sharedHarness returns the openclaw-sig conformance folder.
func sharedHarness(t *testing.T) string {
	t.Helper()
	d := filepath.Join("..", "..", "..", "..", "shared", "conformance", "openclaw-sig")
	if _, err := os.Stat(d); err != nil {
		citest.SkipOrFail(t, "shared conformance data not present")
	}
	return d
}

// TestRunRefusals: a tampered pack, a wrong committed report hash and an
// untrusted template are all refused, and nothing is kept.
func TestRunRefusals(t *testing.T) {
	dir := sharedHarness(t)
	params, err := os.ReadFile(filepath.Join(dir, "vectors", "min.params.json"))
	if err != nil {
		t.Fatal(err)
	}
	pack, err := promptpack.Build(params, dir, "openclaw-sig", promptpack.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := pack.SigHashes()
	rb, err := pack.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, trusted)
	enc, man, err := promptpack.SealPack(pack, h.id.PackKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	mj, _ := man.MarshalJSON()
	body := func(enc []byte, report string) []byte {
		b, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mj), "report_hash_b64u": report, "agent_id": "main", "session_key": "agent:main:main"})
		return b
	}
	tampered := bytes.Clone(enc)
	tampered[len(tampered)-5] ^= 1
	code, m := h.call(t, "POST", "/v1/runs", body(tampered, rb.ReportHashB64u()))
	if code != 422 {
		t.Fatalf("tampered pack: %d %v", code, m)
	}
	code, m = h.call(t, "POST", "/v1/runs", body(enc, b64u.SHA256([]byte("other report"))))
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
	enc2, man2, _ := promptpack.SealPack(pack, h2.id.PackKey.Public())
	mj2, _ := man2.MarshalJSON()
	b2, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc2), "manifest": json.RawMessage(mj2), "report_hash_b64u": rb.ReportHashB64u(), "agent_id": "main", "session_key": "s"})
	code, m = h2.call(t, "POST", "/v1/runs", b2)
	if code != 422 || !strings.Contains(m["error"].(string), "identity.txt") {
		t.Fatalf("untrusted template: %d %v", code, m)
	}
	if n := len(h.srv.runs.runs) + len(h2.srv.runs.runs); n != 0 {
		t.Fatalf("%d runs kept after refusals", n)
	}
	// And the good pack opens.
	code, m = h.call(t, "POST", "/v1/runs", body(enc, rb.ReportHashB64u()))
	if code != 201 || m["system_prompt_hash_b64u"] != rb.PromptHashB64u() {
		t.Fatalf("good pack: %d %v", code, m)
	}
	// A turn and the verification gate over HTTP.
	runID := m["run_id"].(string)
	code, m = h.call(t, "POST", "/v1/runs/"+runID+"/turns", []byte(`{"channel":"telegram","message_id":"1","sender_id":"x"}`))
	if code != 201 {
		t.Fatalf("turn %d %v", code, m)
	}
	turn := m["turn_id"].(string)
	code, m = h.call(t, "POST", "/v1/runs/"+runID+"/verify", []byte(`{"turn_id":"`+turn+`","sender_is_owner":false}`))
	if code != 403 {
		t.Fatalf("non-owner verify %d %v", code, m)
	}
	code, m = h.call(t, "POST", "/v1/runs/"+runID+"/tool-calls", []byte(`{"turn_id":"`+turn+`","tool":"exec","params":{"command":"id"}}`))
	if code != 200 || m["allow"] != false || m["stage"] != "verification_gate" {
		t.Fatalf("exec before verify %d %v", code, m)
	}
	if bytes.Contains(h.logs.Bytes(), rb.Prompt[:64]) || bytes.Contains(h.logs.Bytes(), []byte(`"command":"id"`)) {
		t.Fatal("logs contain prompt text or raw params")
	}
	// Each run has its own audit chain: a second run's decisions are not in
	// the first run's log, and each log verifies to the root and count in
	// its headers.
	code, m = h.call(t, "POST", "/v1/runs", body(enc, rb.ReportHashB64u()))
	if code != 201 {
		t.Fatalf("second run: %d %v", code, m)
	}
	run2 := m["run_id"].(string)
	for range 2 {
		if code, m = h.call(t, "POST", "/v1/runs/"+run2+"/tool-calls", []byte(`{"turn_id":"t","tool":"read"}`)); code != 200 {
			t.Fatalf("run 2 tool call %d %v", code, m)
		}
	}
	for id, want := range map[string]uint64{runID: 1, run2: 2} {
		resp, err := h.api.Client().Get(h.api.URL + "/v1/runs/" + id + "/audit")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		root, n, err := auditrec.Verify(bytes.NewReader(raw))
		if err != nil || n != want || root != resp.Header.Get("X-Clawea-Audit-Root") || resp.Header.Get("X-Clawea-Audit-Count") != fmt.Sprint(want) {
			t.Fatalf("run %s audit: %d records (want %d), %v, headers %v", id, n, want, err, resp.Header)
		}
	}
}

// TestIdentityPersistsUnderSealer: the identity sealed with the simulated
// platform key comes back after a restart, and a blob that does not unseal is
// an error, never a silent new identity.
func TestIdentityPersistsUnderSealer(t *testing.T) {
	p, rep, err := detect.Open(context.Background(), detect.Simulated, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	opts := sealed.Options{AllowUnlocked: true}
	sealer, err := platformSealer(p, rep, opts)
	if err != nil || sealer == nil {
		t.Fatalf("sealer %v %v", sealer, err)
	}
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	id1, err := LoadIdentity(context.Background(), dir, sealer, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	id1.Close()
	id2, err := LoadIdentity(context.Background(), dir, sealer, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	defer id2.Close()
	if id1.DID != id2.DID || !id2.Sealed || !id1.PackKey.Public().Equal(id2.PackKey.Public()) {
		t.Fatal("identity changed across restarts")
	}
	blob, _ := os.ReadFile(filepath.Join(dir, identityFile))
	if st, _ := os.Stat(filepath.Join(dir, identityFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("identity blob mode %v", st.Mode())
	}
	blob[len(blob)-1] ^= 1
	os.WriteFile(filepath.Join(dir, identityFile), blob, 0o600)
	if _, err := LoadIdentity(context.Background(), dir, sealer, opts, log); err == nil {
		t.Fatal("a tampered identity blob was replaced silently")
	}
}

func TestAgentSocketPermissions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.sock")
	ln, err := ListenAgentSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", st.Mode(), err)
	}
	// A regular file at the path is refused, not replaced.
	other := filepath.Join(dir, "file")
	os.WriteFile(other, []byte("x"), 0o600)
	if _, err := ListenAgentSocket(other); err == nil {
		t.Fatal("a regular file was replaced by the socket")
	}
	// A world-writable directory without the sticky bit is refused.
	ww := filepath.Join(dir, "ww")
	os.Mkdir(ww, 0o777)
	os.Chmod(ww, 0o777)
	if _, err := ListenAgentSocket(filepath.Join(ww, "a.sock")); err == nil {
		t.Fatal("socket created in a world-writable directory")
	}
}
