package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/veraison/ear"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

func get(t *testing.T, h http.Handler, path string) (int, http.Header, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), b
}

// TestEARVerifiesByPublishedKey is what a relying party does: fetch the
// key set, then check an EAR by its kid alone, with no key pinned by hand.
func TestEARVerifiesByPublishedKey(t *testing.T) {
	e := newEnv(t, 0)
	code, hdr, body := get(t, e.h, jwksPath)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("%d %s", code, hdr.Get("Content-Type"))
	}
	set, err := jwk.Parse(body)
	if err != nil || set.Len() != 1 {
		t.Fatalf("key set %s: %v", body, err)
	}
	r := e.post(e.f.body("", true))
	if r.code != http.StatusOK || r.out.Verdict != verify.VerdictVerified {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	payload, err := jws.Verify([]byte(r.out.EAR), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		t.Fatalf("the published key set does not verify the EAR: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if id, _ := claims["ear.verifier-id"].(map[string]any); id["build"] != "clawea-verifier/test" {
		t.Fatalf("ear.verifier-id %v, want build clawea-verifier/test (the binary's version)", claims["ear.verifier-id"])
	}
	wantKid, _ := kidOf(e.pub)
	code, _, body = get(t, e.h, discoveryPath)
	var disc struct {
		Key     map[string]any    `json:"ear-verification-key"`
		Version string            `json:"version"`
		State   string            `json:"service-state"`
		API     map[string]string `json:"api-endpoints"`
	}
	if err := json.Unmarshal(body, &disc); code != http.StatusOK || err != nil {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if disc.Key["kid"] != wantKid || disc.Key["d"] != nil || disc.Version != "test" || disc.State != "READY" || disc.API["verify"] != "/v1/verify" {
		t.Fatalf("discovery %s", body)
	}
	// The same key verifies through Veraison's own EAR API.
	var ar ear.AttestationResult
	if err := ar.Verify([]byte(r.out.EAR), jwa.EdDSA, e.pub); err != nil {
		t.Fatal(err)
	}
}

// TestRotation: after a rotation the old key stays published (so EARs it
// signed verify), the new one signs, and each EAR names its own key.
func TestRotation(t *testing.T) {
	f := fixtureAt(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "p.json")
	if err := os.WriteFile(policy, f.simPolicy(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, oldKey, _ := ed25519.GenerateKey(rand.Reader)
	newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	oldSvc, err := NewService(Config{Sources: sources{PolicyFile: policy}, Signer: oldKey, Version: "test",
		Now: func() time.Time { return testfixture.Now }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	newSvc, err := NewService(Config{Sources: sources{PolicyFile: policy}, Signer: newKey, PreviousKeys: []crypto.PublicKey{oldKey.Public()},
		Version: "test", Now: func() time.Time { return testfixture.Now }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, body := get(t, newSvc.Handler(), jwksPath)
	set, err := jwk.Parse(body)
	if err != nil || set.Len() != 2 {
		t.Fatalf("key set %s: %v", body, err)
	}
	first, _ := set.Key(0)
	if kid, _ := kidOf(newKey.Public()); first.KeyID() != kid {
		t.Fatalf("first key %s, want the signing key %s", first.KeyID(), kid)
	}
	for _, svc := range []*Service{oldSvc, newSvc} {
		e := &env{t: t, f: f, h: svc.Handler()}
		r := e.post(f.body("", true))
		if _, err := jws.Verify([]byte(r.out.EAR), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil {
			t.Fatalf("EAR not verified by the rotated key set: %v", err)
		}
	}
	// A retired key listed again, or an RSA key, is refused at start.
	for name, prev := range map[string][]crypto.PublicKey{"duplicate": {newKey.Public()}, "rsa": {rsaPublic(t)}} {
		_, err := NewService(Config{Sources: sources{PolicyFile: policy}, Signer: newKey, PreviousKeys: prev, Version: "test",
			Now: time.Now, Log: slog.New(slog.DiscardHandler)})
		if err == nil {
			t.Errorf("%s previous key accepted", name)
		}
	}
}

func rsaPublic(t *testing.T) crypto.PublicKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

// TestSortedMembersAccepted: an encoder that sorts keys puts
// request_version last; the request is the same request.
func TestSortedMembersAccepted(t *testing.T) {
	e := newEnv(t, 0)
	var m map[string]any
	if err := json.Unmarshal(e.f.body("", true), &m); err != nil {
		t.Fatal(err)
	}
	sorted, _ := json.Marshal(m) // encoding/json sorts map keys
	if strings.HasPrefix(string(sorted), `{"request_version"`) {
		t.Fatal("test body still starts with request_version")
	}
	if r := e.post(sorted); r.code != http.StatusOK || r.out.Verdict != verify.VerdictVerified {
		t.Fatalf("%d %s", r.code, r.raw)
	}
}

// TestUnroutedCounted: 404s and 405s are counted, by code.
func TestUnroutedCounted(t *testing.T) {
	e := newEnv(t, 0)
	for _, rq := range []struct{ method, path string }{
		{http.MethodGet, "/nope"}, {http.MethodGet, "/v1/verify/x"}, {http.MethodDelete, "/v1/verify"}, {http.MethodPost, jwksPath},
	} {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest(rq.method, rq.path, nil))
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: %d", rq.method, rq.path, rec.Code)
		}
	}
	m := metricsText(t, e.h)
	for _, want := range []string{`clawea_verifier_http_unrouted_total{code="404"} 2`, `clawea_verifier_http_unrouted_total{code="405"} 2`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestStartLogNamesPoliciesAndKey: the start log says which policies and
// which EAR key the service runs with, and never the key itself.
func TestStartLogNamesPoliciesAndKey(t *testing.T) {
	e := newEnv(t, 0)
	e.svc.logStart()
	var line map[string]any
	logs := strings.Split(strings.TrimSpace(e.logs.String()), "\n")
	if err := json.Unmarshal([]byte(logs[len(logs)-1]), &line); err != nil {
		t.Fatal(err)
	}
	kid, _ := kidOf(e.pub)
	pols, _ := line["policies"].([]any)
	if line["ear_kid"] != kid || line["ear_alg"] != "EdDSA" || len(pols) != 2 || !strings.HasPrefix(pols[0].(string), "default=") {
		t.Fatalf("start log %v", line)
	}
	if strings.Contains(e.logs.String(), "PRIVATE") {
		t.Fatal("key material in the log")
	}
}

// TestDocumentedKeyCommands runs the EAR key commands of
// docs/spec/verifier-api.md section 7 and loads what they make.
func TestDocumentedKeyCommands(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	keyPath, pubPath := filepath.Join(dir, "ear-key.pem"), filepath.Join(dir, "ear-key.pub.pem")
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "ed25519", "-out", keyPath},
		{"pkey", "-in", keyPath, "-pubout", "-out", pubPath},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	raw, _ := os.ReadFile(keyPath)
	signer, err := earresult.ParseSigningKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := readPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := kidOf(signer.Public())
	b, _ := kidOf(pub)
	if a != b {
		t.Fatalf("the public key file names another key: %s, %s", a, b)
	}
}

func TestParsePublicKeyRefuses(t *testing.T) {
	der, _ := x509.MarshalPKIXPublicKey(rsaPublic(t))
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKIXPublicKey(ed)
	edPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: edDER})
	for name, in := range map[string][]byte{
		"rsa":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"two blocks": slices.Concat(edPEM, edPEM),
		"cert":       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: edDER}),
		"garbage":    pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}),
		"not pem":    []byte("hello"),
	} {
		if _, err := parsePublicKey(in); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := parsePublicKey(edPEM); err != nil {
		t.Fatal(err)
	}
}

// kidOf is the kid the service gives pub (the first key of its set).
func kidOf(pub crypto.PublicKey) (string, error) {
	d, err := newKeyDocs(pub, nil, "test")
	if err != nil {
		return "", err
	}
	return d.kid, nil
}
