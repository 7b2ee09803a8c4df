package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify/earresult"
)

// TestEARVerify: EARs packctl verify signs verify with packctl ear verify
// against the signing key's public half and against a key set; the exit
// code is the verdict the EAR reports; a token signed by another key, or
// altered, is rejected.
func TestEARVerify(t *testing.T) {
	in := scriptFiles(t)
	keyPEM := testfile.Read(t, in("ear-key.pem"))
	block, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.(ed25519.PrivateKey).Public()
	spki, _ := x509.MarshalPKIXPublicKey(pub)
	writeTestFile(t, in("pub.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki}))
	set, _ := earresult.PublicKeySet(pub)
	writeTestFile(t, in("jwks.json"), set)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	otherSet, _ := earresult.PublicKeySet(otherPub)
	writeTestFile(t, in("other.json"), otherSet)

	for _, tc := range []struct {
		policy, last string
		code         int
	}{
		{"policy.json", "VERIFIED", exitOK},
		{"other-measurement.json", "POLICY-REFUSED", exitPolicy},
	} {
		tok := in("ear-" + tc.policy + ".jwt")
		var stdout, stderr bytes.Buffer
		run([]string{"verify", "--attestation", in("sev/attestation.json"), "--evidence", in("sev/evidence.jws"),
			"--policy", in(tc.policy), "--at", "2026-06-01T12:00:00Z", "--ear-key", in("ear-key.pem"), "--ear-out", tok}, nil, &stdout, &stderr)
		raw := testfile.Read(t, tok)
		for name, args := range map[string][]string{
			"key":   {"ear", "verify", "--key", in("pub.pem"), tok},
			"jwks":  {"ear", "verify", tok, "--jwks", in("jwks.json")},
			"stdin": {"ear", "verify", "--key", in("pub.pem"), "-"},
		} {
			stdout.Reset()
			stderr.Reset()
			code := run(args, bytes.NewReader(raw), &stdout, &stderr)
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if code != tc.code || !strings.HasPrefix(lines[len(lines)-1], tc.last) || !strings.Contains(stdout.String(), "submod clawea-execution") {
				t.Fatalf("%s %s: exit %d\n%s%s", tc.policy, name, code, stdout.String(), stderr.String())
			}
		}
		stdout.Reset()
		if code := run([]string{"ear", "verify", "--jwks", in("jwks.json"), "--json", tok}, nil, &stdout, &stderr); code != tc.code {
			t.Fatalf("--json: exit %d", code)
		}
		var j struct {
			Verdict string         `json:"verdict"`
			Kid     string         `json:"kid"`
			EAR     map[string]any `json:"ear"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &j); err != nil || j.Kid == "" || j.EAR["ear.verifier-id"] == nil {
			t.Fatalf("--json: %s %v", stdout.String(), err)
		}
	}
	tok := in("ear-policy.json.jwt")
	raw := testfile.Read(t, tok)
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	parts[2] = strings.Repeat("A", len(parts[2]))
	writeTestFile(t, in("forged.jwt"), []byte(strings.Join(parts, ".")))
	for name, tc := range map[string]struct {
		args []string
		code int
		out  string
	}{
		"other key":  {[]string{"ear", "verify", "--jwks", in("other.json"), tok}, exitRejected, "not in the key set"},
		"forged":     {[]string{"ear", "verify", "--jwks", in("jwks.json"), in("forged.jwt")}, exitRejected, "signature"},
		"both keys":  {[]string{"ear", "verify", "--jwks", in("jwks.json"), "--key", in("pub.pem"), tok}, exitUsage, ""},
		"no key":     {[]string{"ear", "verify", tok}, exitUsage, ""},
		"bad key":    {[]string{"ear", "verify", "--key", in("jwks.json"), tok}, exitCannot, ""},
		"no command": {[]string{"ear"}, exitUsage, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, nil, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.out) {
			t.Errorf("%s: exit %d\n%s%s", name, code, stdout.String(), stderr.String())
		}
	}
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
