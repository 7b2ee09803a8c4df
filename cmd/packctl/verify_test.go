package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/veraison/ear"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

// TestVerifyExit pins the documented exit codes of packctl verify.
func TestVerifyExit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{&verify.Error{Class: verify.ErrUsage}, exitUsage},
		{&verify.Error{Class: verify.ErrRejected}, exitRejected},
		{&verify.Error{Class: verify.ErrCannotCheck}, exitCannot},
		{&verify.Error{Class: verify.ErrPolicy}, exitPolicy},
		{fmt.Errorf("x: %w", &verify.Error{Class: verify.ErrPolicy}), exitPolicy},
		{errors.New("unclassified"), exitCannot},
	} {
		if got := verifyExit(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// scriptFiles extracts the fixtures of testdata/script/verify_sim.txt and
// returns the path of one of them.
func scriptFiles(t *testing.T) func(name string) string {
	t.Helper()
	return scriptFilesOf(t, "verify_sim.txt")
}

// scriptFilesOf extracts the fixtures of testdata/script/name into a
// temporary folder and returns the path of one of them (a slash path).
func scriptFilesOf(t *testing.T, name string) func(name string) string {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", "script", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range ar.Files {
		testfile.Write(t, dir, f.Name, f.Data)
	}
	return func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
}

func TestVerifyEARParses(t *testing.T) {
	in := scriptFiles(t)
	pub := earPublicKey(t, in("ear-key.pem"))
	for _, tc := range []struct {
		policy string
		code   int
		status ear.TrustTier
	}{
		{"policy.json", exitOK, ear.TrustTierWarning}, // simulated: never affirming
		{"other-measurement.json", exitPolicy, ear.TrustTierContraindicated},
	} {
		out := in("ear-" + tc.policy + ".jwt")
		var stdout, stderr bytes.Buffer
		code := run([]string{"verify", "--attestation", in("sev/attestation.json"), "--evidence", in("sev/evidence.jws"),
			"--policy", in(tc.policy), "--at", "2026-06-01T12:00:00Z", "--json", "--ear-key", in("ear-key.pem"), "--ear-out", out}, nil, &stdout, &stderr)
		if code != tc.code {
			t.Fatalf("%s: exit %d, stderr %s", tc.policy, code, stderr.String())
		}
		var j struct {
			Verdict  string `json:"verdict"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil || j.ExitCode != tc.code {
			t.Fatalf("%s: json %q: %v", tc.policy, stdout.String(), err)
		}
		tok := testfile.Read(t, out)
		var ar ear.AttestationResult
		if err := ar.Verify(bytes.TrimSpace(tok), jwa.EdDSA, pub); err != nil {
			t.Fatalf("%s: %v", tc.policy, err)
		}
		ap := ar.Submods[earresult.SubmodName]
		if ap == nil || *ap.Status != tc.status {
			t.Fatalf("%s: appraisal %+v", tc.policy, ap)
		}
		// The JSON form parses with UnmarshalJSON as well.
		raw, err := ar.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var again ear.AttestationResult
		if err := again.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
	}
}

// earPublicKey reads the public key of a script's EAR signing key.
func earPublicKey(t *testing.T, path string) any {
	t.Helper()
	keyPEM := testfile.Read(t, path)
	block, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(ed25519.PrivateKey).Public()
}

// TestVerifyGPUEAR: packctl verify of an attestation with CPU and GPU
// evidence emits an EAR with both submods.
func TestVerifyGPUEAR(t *testing.T) {
	in := scriptFilesOf(t, "verify_gpu.txt")
	pub := earPublicKey(t, in("ear-key.pem"))
	var stdout, stderr bytes.Buffer
	out := in("ear.jwt")
	if code := run([]string{"verify", "--attestation", in("gpu/attestation.json"), "--evidence", in("gpu/evidence.jws"),
		"--policy", in("gpu-policy.json"), "--at", "2026-06-01T12:00:00Z", "--ear-key", in("ear-key.pem"), "--ear-out", out}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	tok := testfile.Read(t, out)
	var ar ear.AttestationResult
	if err := ar.Verify(bytes.TrimSpace(tok), jwa.EdDSA, pub); err != nil {
		t.Fatal(err)
	}
	cpu, gpu := ar.Submods[earresult.SubmodName], ar.Submods[earresult.GPUSubmodName]
	if len(ar.Submods) != 2 || cpu == nil || gpu == nil || *gpu.Status != ear.TrustTierWarning {
		t.Fatalf("submods %v", ar.Submods)
	}
	gpus := (*gpu.VeraisonAnnotatedEvidence)["gpus"].([]interface{})
	if g := gpus[0].(map[string]interface{}); g["root_id"] != "sim-nvidia-device-identity-ca" || g["simulated"] != true {
		t.Fatalf("gpu annotation %v", g)
	}
}
