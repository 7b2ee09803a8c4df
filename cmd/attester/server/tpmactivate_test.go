package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"github.com/clawea/attester/control"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestTPMRoutesWithoutTPM: on another platform the activation routes are
// 404 (the POST before its body is read), and other methods 405.
func TestTPMRoutesWithoutTPM(t *testing.T) {
	h := newTestServer(t, trustedOne)
	if code, body := h.call(t, "GET", "/v1/tpm/ek", nil); code != 404 || !strings.Contains(body["error"].(string), "not tpm") {
		t.Fatalf("GET /v1/tpm/ek: %d %v", code, body)
	}
	if code, body := h.call(t, "POST", "/v1/tpm/activate", []byte(`{"challenge_b64u":"AA"}`)); code != 404 {
		t.Fatalf("POST /v1/tpm/activate: %d %v", code, body)
	}
	if code, _ := h.call(t, "GET", "/v1/tpm/activate", nil); code != 405 {
		t.Fatalf("GET /v1/tpm/activate: %d", code)
	}
}

// frozenClock is a clock the test moves.
type frozenClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *frozenClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *frozenClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// tpmServer is a Server whose platform is a manufactured swtpm (with EK
// certificates), on a frozen clock.
func tpmServer(t *testing.T) (*httptest.Server, *tpm.TPM, *frozenClock) {
	t.Helper()
	in := swtpmtest.StartForTest(t)
	tp, err := tpm.Open(context.Background(), tpm.Options{Address: in.Addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	raw := testConfig(t, trustedOne)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	att := m["attester"].(map[string]any)
	att["platform"], att["tpm"] = "tpm", map[string]any{"address": in.Addr}
	att["controlSocket"] = filepath.Join(t.TempDir(), "ctl", "control.sock")
	raw, _ = json.Marshal(m)
	cfg, rest, err := control.ParseConfigWith(raw, control.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	id, err := control.LoadIdentity(context.Background(), "", nil, sealed.Options{AllowUnlocked: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	clk := &frozenClock{t: time.Now()}
	s, err := newServer(control.Deps{Config: cfg, GateConfig: rest, Identity: id, Platform: tp, Logger: log, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := httptest.NewServer(s.PublicHandler())
	t.Cleanup(api.Close)
	return api, tp, clk
}

type tpmReply struct {
	code       int
	retryAfter string
	raw        []byte
	body       map[string]any
}

func tpmCall(t *testing.T, api *httptest.Server, method, path, contentType string, body []byte) tpmReply {
	t.Helper()
	req, err := http.NewRequest(method, api.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	r := tpmReply{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), raw: b.Bytes()}
	if err := json.Unmarshal(r.raw, &r.body); err != nil {
		t.Fatalf("%s %s: not JSON: %q", method, path, r.raw)
	}
	return r
}

func activateBody(c *tpmcred.Challenge) []byte {
	b, _ := json.Marshal(map[string]string{"challenge_b64u": b64u.Encode(c.Marshal())})
	return b
}

// TestTPMActivateEndpoint drives GET /v1/tpm/ek and POST /v1/tpm/activate
// on a swtpm-backed server as a remote verifier and as a hostile caller.
func TestTPMActivateEndpoint(t *testing.T) {
	api, tp, clk := tpmServer(t)
	const ctype = "application/json"

	ek := tpmCall(t, api, "GET", "/v1/tpm/ek", "", nil)
	if ek.code != 200 || len(ek.body) != 3 || ek.body["simulated"] != true ||
		ek.body["ek_cert_b64u"] != b64u.Encode(tp.EKCertificate()) || ek.body["ak_public_b64u"] != b64u.Encode(tp.AKPublic()) {
		t.Fatalf("GET /v1/tpm/ek: %d %v", ek.code, ek.body)
	}
	if r := tpmCall(t, api, "GET", "/v1/tpm/ek?x=1", "", nil); r.code != 400 {
		t.Fatalf("query: %d", r.code)
	}
	ekCert, akPub := tp.EKCertificate(), tp.AKPublic()

	// Malformed requests are refused before the rate limit and the TPM.
	act, ch, err := tpmcred.NewActivation(rand.Reader, ekCert, akPub)
	if err != nil {
		t.Fatal(err)
	}
	good := activateBody(ch)
	for name, tc := range map[string]struct {
		ctype string
		body  []byte
		code  int
	}{
		"content type":  {"text/plain", good, 415},
		"unknown field": {ctype, []byte(`{"challenge_b64u":"AA","x":1}`), 400},
		"case variant":  {ctype, []byte(`{"Challenge_b64u":"AA"}`), 400},
		"duplicate":     {ctype, []byte(`{"challenge_b64u":"AA","challenge_b64u":"AA"}`), 400},
		"empty":         {ctype, []byte(`{}`), 400},
		"not b64u":      {ctype, []byte(`{"challenge_b64u":"a+b"}`), 400},
		"empty fields":  {ctype, activateBody(&tpmcred.Challenge{}), 400},
		"too large":     {ctype, []byte(`{"challenge_b64u":"` + strings.Repeat("A", maxActivateBody) + `"}`), 413},
	} {
		if r := tpmCall(t, api, "POST", "/v1/tpm/activate", tc.ctype, tc.body); r.code != tc.code {
			t.Errorf("%s: %d %v, want %d", name, r.code, r.body, tc.code)
		}
	}
	if r := tpmCall(t, api, "POST", "/v1/tpm/activate?x=1", ctype, good); r.code != 400 {
		t.Fatalf("query: %d", r.code)
	}
	trailing := append(ch.Marshal(), 0)
	tb, _ := json.Marshal(map[string]string{"challenge_b64u": b64u.Encode(trailing)})
	if r := tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, tb); r.code != 400 {
		t.Fatalf("challenge with a trailing byte: %d", r.code)
	}

	// Token 1: the genuine challenge is answered with the verifier's secret.
	r := tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, good)
	if r.code != 200 || len(r.body) != 1 {
		t.Fatalf("activate: %d %v", r.code, r.body)
	}
	secret, err := b64u.Decode(r.body["secret_b64u"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := act.Check(secret); err != nil {
		t.Fatalf("check: %v", err)
	}
	// The answer replayed to another verifier's (or a later) activation
	// fails its one check.
	act2, _, err := tpmcred.NewActivation(rand.Reader, ekCert, akPub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := act2.Check(secret); err == nil {
		t.Fatal("a replayed answer passed a fresh activation")
	}

	// Tokens 2-4: challenges for another AK, another EK, and a tampered
	// blob are 422, and the answer holds no secret.
	otherAK := testcert.SoftwareAK(t, tpmquote.Public{Type: tpmquote.AlgECC, Attributes: tpmquote.AKRequiredAttributes | tpmquote.AttrUserWithAuth | tpmquote.AttrNoDA})
	_, chAK, err := tpmcred.NewActivation(rand.Reader, ekCert, otherAK)
	if err != nil {
		t.Fatal(err)
	}
	_, chEK, err := tpmcred.NewActivationForEK(rand.Reader, swtpmtest.ForeignEK(t), akPub)
	if err != nil {
		t.Fatal(err)
	}
	_, chBad, err := tpmcred.NewActivation(rand.Reader, ekCert, akPub)
	if err != nil {
		t.Fatal(err)
	}
	chBad.CredentialBlob[len(chBad.CredentialBlob)-1] ^= 1
	for name, c := range map[string]*tpmcred.Challenge{"other ak": chAK, "other ek": chEK, "tampered": chBad} {
		r := tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, activateBody(c))
		if r.code != 422 || r.body["secret_b64u"] != nil || len(r.body) != 1 {
			t.Errorf("%s: %d %s", name, r.code, r.raw)
		}
	}

	// Token 5 does not exist at a frozen clock: 429 with Retry-After, and
	// the TPM is not used. A second later one token is back.
	_, ch3, err := tpmcred.NewActivation(rand.Reader, ekCert, akPub)
	if err != nil {
		t.Fatal(err)
	}
	r = tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, activateBody(ch3))
	if r.code != 429 || r.retryAfter != "1" || r.body["secret_b64u"] != nil {
		t.Fatalf("beyond the burst: %d %q %s", r.code, r.retryAfter, r.raw)
	}
	clk.add(time.Second)
	if r := tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, activateBody(ch3)); r.code != 200 {
		t.Fatalf("after a second: %d %s", r.code, r.raw)
	}
	if r := tpmCall(t, api, "POST", "/v1/tpm/activate", ctype, activateBody(ch3)); r.code != 429 {
		t.Fatalf("second try in the same second: %d", r.code)
	}
}
