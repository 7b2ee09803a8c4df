package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

// env is a Service over a policy directory, with the fixture it verifies.
type env struct {
	t       testing.TB
	f       *fixture
	dir     string
	svc     *Service
	h       http.Handler
	pub     ed25519.PublicKey
	logs    *bytes.Buffer
	maxBody int
}

var sharedFixture *fixture

func fixtureAt(t testing.TB) *fixture {
	if sharedFixture == nil {
		sharedFixture = newFixture(t, testfixture.Now)
	}
	return sharedFixture
}

// newEnv serves policies "default" (simulation allowed) and "prod" (the
// same without the simulation relaxation).
func newEnv(t testing.TB, maxBody int) *env {
	t.Helper()
	e := &env{t: t, f: fixtureAt(t), dir: t.TempDir(), logs: &bytes.Buffer{}, maxBody: maxBody}
	pdir := filepath.Join(e.dir, "policies")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.writePolicy("default", e.f.simPolicy())
	e.writePolicy("prod", e.f.prodPolicy())
	keyPath, _ := earKey(t, e.dir)
	raw := testfile.Read(t, keyPath)
	signer, err := earresult.ParseSigningKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	e.pub = signer.Public().(ed25519.PublicKey)
	e.svc, err = NewService(Config{
		Sources: sources{PolicyDir: pdir}, Signer: signer, Version: "test", Now: func() time.Time { return testfixture.Now },
		MaxBody: maxBody, Log: slog.New(slog.NewJSONHandler(e.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.h = e.svc.Handler()
	return e
}

var policyTick = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writePolicy writes a policy file with a fresh modification time.
func (e *env) writePolicy(name string, content []byte) {
	e.t.Helper()
	path := filepath.Join(e.dir, "policies", name+".json")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		e.t.Fatal(err)
	}
	policyTick = policyTick.Add(time.Second)
	if err := os.Chtimes(path, policyTick, policyTick); err != nil {
		e.t.Fatal(err)
	}
}

type reply struct {
	code int
	out  struct {
		Verdict  string               `json:"verdict"`
		ExitCode int                  `json:"exit_code"`
		Result   json.RawMessage      `json:"result"`
		Error    *verify.OutcomeError `json:"error"`
		EAR      string               `json:"ear"`
	}
	raw []byte
}

func (e *env) post(body []byte) *reply {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/verify", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return e.do(req)
}

func (e *env) do(req *http.Request) *reply {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := &reply{code: rec.Code, raw: rec.Body.Bytes()}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(r.raw)) {
		e.t.Fatalf("Content-Length %q for a %d-byte body", cl, len(r.raw))
	}
	if err := json.Unmarshal(r.raw, &r.out); err != nil {
		e.t.Fatalf("status %d, body not JSON: %q", rec.Code, r.raw)
	}
	return r
}

// ear verifies the reply's EAR with the service key and returns its status.
func (e *env) ear(r *reply) ear.TrustTier {
	e.t.Helper()
	var ar ear.AttestationResult
	if err := ar.Verify([]byte(r.out.EAR), jwa.EdDSA, e.pub); err != nil {
		e.t.Fatalf("ear: %v", err)
	}
	ap := ar.Submods[earresult.SubmodName]
	if ap == nil || ap.Status == nil {
		e.t.Fatal("ear has no appraisal status")
	}
	return *ap.Status
}

// direct is what packctl verify --json prints for the same inputs.
func direct(t *testing.T, f *fixture, att, ev []byte, policy []byte) []byte {
	t.Helper()
	pol, err := verify.ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	res, verr := verify.Verify(att, ev, f.bundle, pol, verify.Options{Now: func() time.Time { return testfixture.Now }, AuditLog: f.audit, Report: f.report})
	b, err := json.Marshal(verify.NewOutcome(res, verr))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withoutEAR re-encodes a reply without its ear member.
func withoutEAR(t *testing.T, raw []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "ear")
	b, _ := json.Marshal(m)
	return b
}

func canon(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestVerifyValid(t *testing.T) {
	e := newEnv(t, 0)
	for _, enc := range []bool{true, false} {
		r := e.post(e.f.body("", enc))
		if r.code != http.StatusOK || r.out.Verdict != verify.VerdictVerified || r.out.ExitCode != 0 {
			t.Fatalf("b64u=%v: %d %s", enc, r.code, r.raw)
		}
		// Simulated evidence verifies with a warning tier, never affirming.
		if got := e.ear(r); got != ear.TrustTierWarning {
			t.Fatalf("ear status %v, want warning (simulated)", got)
		}
		// The same JSON packctl verify --json prints.
		if got, want := canon(t, withoutEAR(t, r.raw)), canon(t, direct(t, e.f, e.f.att, e.f.ev, e.f.simPolicy())); got != want {
			t.Fatalf("service and packctl disagree:\n%s\n%s", got, want)
		}
	}
	// The chain cache served the second request.
	if st := e.svc.cache.Stats(); st.Hits < 1 {
		t.Fatalf("cache stats %+v", st)
	}
}

// The request the simulation policy verifies is refused under a production
// policy, with packctl's class and exit code.
func TestVerifyProductionPolicyRefuses(t *testing.T) {
	e := newEnv(t, 0)
	r := e.post(e.f.body("prod", true))
	if r.code != http.StatusOK || r.out.Verdict != verify.VerdictPolicy || r.out.ExitCode != verify.ExitCode(verify.VerdictPolicy) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if got := e.ear(r); got != ear.TrustTierContraindicated {
		t.Fatalf("ear status %v", got)
	}
	if got, want := canon(t, withoutEAR(t, r.raw)), canon(t, direct(t, e.f, e.f.att, e.f.ev, e.f.prodPolicy())); got != want {
		t.Fatalf("service and packctl disagree:\n%s\n%s", got, want)
	}
}

func TestVerifyTampered(t *testing.T) {
	e := newEnv(t, 0)
	flip := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 1
		return c
	}
	dot := bytes.LastIndexByte(e.f.ev, '.')
	for name, tc := range map[string]struct {
		att, ev []byte
		exit    int
	}{
		"evidence signature": {e.f.att, flip(e.f.ev, dot+5), verify.ExitCode(verify.VerdictRejected)},
		"evidence payload":   {e.f.att, flip(e.f.ev, dot-5), verify.ExitCode(verify.VerdictRejected)},
		"attestation": {bytes.Replace(e.f.att, []byte(`"run_verifier_001"`), []byte(`"run_verifier_002"`), 1), e.f.ev,
			verify.ExitCode(verify.VerdictRejected)},
	} {
		t.Run(name, func(t *testing.T) {
			f := *e.f
			f.att, f.ev = tc.att, tc.ev
			r := e.post(f.body("", true))
			if r.code != http.StatusOK || r.out.ExitCode != tc.exit || r.out.Verdict != verify.VerdictRejected {
				t.Fatalf("%d %s", r.code, r.raw)
			}
			if got := e.ear(r); got != ear.TrustTierContraindicated {
				t.Fatalf("ear status %v", got)
			}
			if got, want := canon(t, withoutEAR(t, r.raw)), canon(t, direct(t, e.f, tc.att, tc.ev, e.f.simPolicy())); got != want {
				t.Fatalf("service and packctl disagree:\n%s\n%s", got, want)
			}
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, 0)
	good := string(e.f.body("", true))
	rest := strings.TrimPrefix(good, `{"request_version":"`+RequestVersion+`",`)
	ver := `{"request_version":"` + RequestVersion + `",`
	for name, tc := range map[string]struct {
		body string
		want error
		msg  string
	}{
		"not json":          {`{"request_version":`, jsonobj.ErrSyntax, ""},
		"array":             {`[]`, jsonobj.ErrWrongType, ""},
		"duplicate key":     {ver + `"policy":"default","policy":"prod",` + rest, jsonobj.ErrSyntax, ""},
		"unknown member":    {ver + `"allow_simulated":true,` + rest, jsonobj.ErrUnknownField, ""},
		"no version":        {`{` + rest, jsonobj.ErrMissingField, "request_version"},
		"version wrong":     {`{"request_version":"clawea.dev/verifier-api/v2",` + rest, jsonobj.ErrWrongType, ""},
		"no attestation":    {ver + `"evidence":"x"}`, jsonobj.ErrMissingField, "$.attestation"},
		"both forms":        {ver + `"attestation":{},` + rest, jsonobj.ErrWrongType, "attestation_b64u"},
		"bad b64u":          {ver + `"attestation_b64u":"a+b/","evidence":"x"}`, jsonobj.ErrWrongType, "$.attestation_b64u"},
		"attestation array": {ver + `"attestation":[],"evidence":"x"}`, jsonobj.ErrWrongType, "$.attestation"},
		"evidence object":   {ver + `"attestation":{},"evidence":{}}`, jsonobj.ErrWrongType, "$.evidence"},
		"disclosure":        {ver + `"disclosure_b64u":"AA",` + rest, ErrNotSupported, "not supported yet"},
		"bad policy name":   {ver + `"policy":"../prod",` + rest, jsonobj.ErrWrongType, "$.policy"},
		"unknown policy":    {ver + `"policy":"nope",` + rest, nil, "unknown policy"},
		// Passes the request parser; Verify itself says usage.
		"empty evidence": {ver + `"attestation_b64u":"` + b64u.Encode(e.f.att) + `","evidence":""}`, nil, "no evidence document"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.want != nil {
				_, err := parseRequest([]byte(tc.body), DefaultMaxBody)
				if !errors.Is(err, tc.want) {
					t.Fatalf("parse error %v, want %v", err, tc.want)
				}
			}
			r := e.post([]byte(tc.body))
			if r.code != http.StatusBadRequest || r.out.Verdict != verify.VerdictUsage || r.out.ExitCode != verify.ExitCode(verify.VerdictUsage) || r.out.EAR != "" || r.out.Error == nil {
				t.Fatalf("%d %s", r.code, r.raw)
			}
			if !strings.Contains(r.out.Error.Message, tc.msg) {
				t.Fatalf("message %q, want %q", r.out.Error.Message, tc.msg)
			}
		})
	}
	// Wrong media type and method.
	req := httptest.NewRequest(http.MethodPost, "/v1/verify", strings.NewReader(good))
	req.Header.Set("Content-Type", "text/plain")
	if r := e.do(req); r.code != http.StatusUnsupportedMediaType {
		t.Fatalf("content type: %d", r.code)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/verify", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rec.Code)
	}
}

func TestOversizeBody(t *testing.T) {
	e := newEnv(t, 4096)
	r := e.post(e.f.body("", true))
	if r.code != http.StatusRequestEntityTooLarge || r.out.Verdict != verify.VerdictUsage {
		t.Fatalf("%d %s", r.code, r.raw)
	}
}

// The body is read (bounded.ReadBody, whose tests check that it returns
// exactly the body whatever Content-Length claims) within the limit, and
// the limit holds when Content-Length is absent, understates the body or
// announces more than the limit.
func TestReadBody(t *testing.T) {
	e := newEnv(t, 4096)
	body := bytes.Repeat([]byte("x"), 3000)
	post := func(body []byte, cl int64) *reply {
		req := httptest.NewRequest(http.MethodPost, "/v1/verify", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = cl
		return e.do(req)
	}
	for _, cl := range []int64{-1, 0, 1, 2999, 3000, 3001} {
		// Read whole, then refused as a request that is not JSON.
		if r := post(body, cl); r.code != http.StatusBadRequest || r.out.Verdict != verify.VerdictUsage {
			t.Fatalf("content-length %d: %d %s", cl, r.code, r.raw)
		}
	}
	for _, cl := range []int64{-1, 100, 4096, 1 << 40} {
		if r := post(append(body, body...), cl); r.code != http.StatusRequestEntityTooLarge || r.out.Verdict != verify.VerdictUsage {
			t.Fatalf("content-length %d: %d %s, want the body limit", cl, r.code, r.raw)
		}
	}
}

func metricsText(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func readyz(t *testing.T, h http.Handler) map[string]any {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var m map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &m) != nil {
		t.Fatalf("readyz: %d %s", rec.Code, rec.Body)
	}
	return m
}

func TestPolicyReload(t *testing.T) {
	e := newEnv(t, 0)
	verdict := func() string { return e.post(e.f.body("", true)).out.Verdict }
	if v := verdict(); v != verify.VerdictVerified {
		t.Fatal(v)
	}
	if changed, err := e.svc.Reload(); changed || err != nil {
		t.Fatalf("reload without a change: %v %v", changed, err)
	}
	// The operator tightens the default policy: it applies after a reload.
	e.writePolicy("default", e.f.prodPolicy())
	if changed, err := e.svc.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if v := verdict(); v != verify.VerdictPolicy {
		t.Fatalf("after reload: %s", v)
	}
	// A bad policy keeps the previous one, and says so.
	e.writePolicy("default", []byte(`{"policy_version":"`+verify.PolicyVersion+`","allow_simulated":"yes"}`))
	if changed, err := e.svc.Reload(); changed || !errors.Is(err, verify.ErrPolicyFile) {
		t.Fatalf("bad reload: %v %v", changed, err)
	}
	if v := verdict(); v != verify.VerdictPolicy {
		t.Fatalf("after a bad reload: %s", v)
	}
	if m := readyz(t, e.h); m["config_stale"] != true || !strings.Contains(m["reload_error"].(string), "allow_simulated") {
		t.Fatalf("readyz %v", m)
	}
	mt := metricsText(t, e.h)
	for _, want := range []string{"clawea_verifier_config_stale 1", `clawea_verifier_config_reloads_total{result="error"} 1`, `clawea_verifier_config_reloads_total{result="ok"} 1`} {
		if !strings.Contains(mt, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	if !strings.Contains(e.logs.String(), "configuration reload failed") {
		t.Fatal("bad reload not logged")
	}
	// A removed policy file also keeps the configuration valid: "prod"
	// disappears, the rest reloads.
	e.writePolicy("default", e.f.simPolicy())
	if err := os.Remove(filepath.Join(e.dir, "policies", "prod.json")); err != nil {
		t.Fatal(err)
	}
	if changed, err := e.svc.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if v := verdict(); v != verify.VerdictVerified {
		t.Fatalf("after fix: %s", v)
	}
	if r := e.post(e.f.body("prod", true)); r.code != http.StatusBadRequest {
		t.Fatalf("removed policy: %d", r.code)
	}
	if m := readyz(t, e.h); m["config_stale"] != false {
		t.Fatalf("readyz %v", m)
	}
	if mt := metricsText(t, e.h); !strings.Contains(mt, "clawea_verifier_config_stale 0") ||
		!strings.Contains(mt, `clawea_verifier_verifications_total{verdict="verified"}`) ||
		!strings.Contains(mt, "clawea_verifier_cert_cache_hits_total") {
		t.Fatal("metrics")
	}
}

func TestHealthz(t *testing.T) {
	e := newEnv(t, 0)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if b, _ := io.ReadAll(rec.Body); rec.Code != http.StatusOK || string(b) != "ok\n" {
		t.Fatalf("%d %q", rec.Code, b)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "p.json")
	if err := os.WriteFile(bad, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, pub, _ := ed25519.GenerateKey(nil)
	for name, src := range map[string]sources{
		"bad policy":   {PolicyFile: bad},
		"no policy":    {PolicyDir: dir + "/none"},
		"empty dir":    {PolicyDir: t.TempDir()},
		"missing file": {PolicyFile: filepath.Join(dir, "absent.json")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewService(Config{Sources: src, Signer: pub, Version: "test", Now: time.Now, Log: slog.New(slog.DiscardHandler)})
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("%v", err)
			}
		})
	}
}

func TestTooManyInFlight(t *testing.T) {
	e := newEnv(t, 0)
	for range cap(e.svc.slots) {
		e.svc.slots <- struct{}{}
	}
	r := e.post(e.f.body("", true))
	if r.code != http.StatusServiceUnavailable || r.out.Verdict != verify.VerdictCannotCheck || r.out.EAR != "" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	<-e.svc.slots
	if r := e.post(e.f.body("", true)); r.code != http.StatusOK || r.out.Verdict != verify.VerdictVerified {
		t.Fatalf("%d %s", r.code, r.raw)
	}
}
