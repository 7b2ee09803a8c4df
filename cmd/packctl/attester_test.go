package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/internal/controltest"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
)

// TestSealToAttestedKey: packctl seal --attester verifies the key
// attestation against the policy before wrapping.
func TestSealToAttestedKey(t *testing.T) {
	harness := packtest.Dir(t)
	dir := t.TempDir()
	pack := filepath.Join(dir, "pack.json")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"build", "--params", filepath.Join(harness, "vectors", "min.params.json"), "--harness", harness, "-o", pack}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("build: %d %s", code, stderr.String())
	}

	// A simulated attester.
	d := controltest.Deps(t, []byte(`{"attester":{"controlSocket":"/tmp/unused/control.sock","platform":"simulated","trustedTemplates":{"x.txt":"sha256:`+strings.Repeat("0", 64)+`"},"modelProvider":"p","model":"m","allowUnlockedMemory":true}}`),
		detect.Simulated, detect.Options{}, slog.New(slog.DiscardHandler))
	p, id := d.Platform, d.Identity
	srv, err := control.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	api := httptest.NewServer(identityHandler(srv))
	defer api.Close()

	// The measurement the operator publishes (from the platform itself).
	m, ok := detect.Capability[interface {
		LaunchMeasurement(context.Context) ([]byte, error)
	}](p)
	if !ok {
		t.Fatal("no measurement")
	}
	meas, _ := m.LaunchMeasurement(context.Background())
	writePolicy := func(name string, pol *verify.Policy) string {
		b, err := pol.Encode()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, b, 0o644)
		return path
	}
	good := writePolicy("good.json", &verify.Policy{AllowSimulated: true, AllowUncheckedRevocation: true, Measurements: [][]byte{meas}, TrustedAttesterDIDs: []string{id.DID}})
	prod := writePolicy("prod.json", &verify.Policy{AllowUncheckedRevocation: true, Measurements: [][]byte{meas}})
	otherMeas := writePolicy("other.json", &verify.Policy{AllowSimulated: true, AllowUncheckedRevocation: true, Measurements: [][]byte{bytes.Repeat([]byte{1}, len(meas))}})

	seal := func(args ...string) (int, string) {
		var so, se bytes.Buffer
		all := append([]string{"seal"}, args...)
		all = append(all, "-o", filepath.Join(dir, "p.enc"), "--manifest", filepath.Join(dir, "m.json"), pack)
		code := run(all, nil, &so, &se)
		return code, se.String()
	}
	if code, msg := seal("--attester", api.URL, "--policy", good); code != 0 || !strings.Contains(msg, "key attestation of "+id.DID+" verified (SIMULATED platform)") {
		t.Fatalf("seal to URL: %d %s", code, msg)
	}
	if code, msg := seal("--attester", api.URL, "--policy", prod); code != exitPolicy {
		t.Fatalf("production policy must refuse simulated evidence: %d %s", code, msg)
	}
	if code, msg := seal("--attester", api.URL, "--policy", otherMeas); code != exitPolicy {
		t.Fatalf("unlisted measurement: %d %s", code, msg)
	}
	if code, _ := seal("--attester", api.URL); code != exitUsage {
		t.Fatalf("--attester without --policy: %d", code)
	}

	// A saved identity FILE: verified with the challenge it was fetched with.
	challenge := b64u.Encode([]byte("saved-challenge"))
	resp, err := api.Client().Get(api.URL + "/v1/identity?challenge=" + challenge)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	idFile := filepath.Join(dir, "identity.json")
	os.WriteFile(idFile, body, 0o644)
	if code, msg := seal("--attester", idFile, "--policy", good, "--challenge", challenge); code != 0 {
		t.Fatalf("seal to FILE: %d %s", code, msg)
	}
	if code, msg := seal("--attester", idFile, "--policy", good, "--challenge", b64u.Encode([]byte("other"))); code != exitRejected {
		t.Fatalf("stale challenge: %d %s", code, msg)
	}
	// A pack key swapped in the identity file is refused.
	var doc map[string]any
	json.Unmarshal(body, &doc)
	doc["pack_public_key"] = "clawea-promptpack-v1-pub:" + b64u.Encode(bytes.Repeat([]byte{9}, 32))
	swapped, _ := json.Marshal(doc)
	os.WriteFile(idFile, swapped, 0o644)
	if code, msg := seal("--attester", idFile, "--policy", good, "--challenge", challenge); code != exitRejected {
		t.Fatalf("swapped pack key: %d %s", code, msg)
	}
}
