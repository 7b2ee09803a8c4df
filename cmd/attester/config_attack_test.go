package main

// docs/spec/attester-api.md section 7: a configuration error names its key
// and never quotes a value, and secrets come from ${NAME} and ${file:...}.
// A secret that resolves to a refused value must not reach the log: these
// cases put a secret into values the real binary refuses.

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
)

// TestConfigSecretsAttack: each configuration below carries a secret
// (through the environment, a file, or inline) in a value that is refused;
// the binary exits 1 naming the key, and neither the secret nor the file's
// content is in its output.
func TestConfigSecretsAttack(t *testing.T) {
	pf := configPack()
	rnd := make([]byte, 18)
	rand.Read(rnd)
	secret := "S3CR3T-" + b64u.Encode(rnd) // upper case: no upstream name or api either
	dir := t.TempDir()
	long := filepath.Join(dir, "long-key")
	if err := os.WriteFile(long, []byte(strings.Repeat(secret, 4096/len(secret)+1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAWEA_TEST_SECRET_URL", "https://user:"+secret+"@model.example/v1")
	t.Setenv("CLAWEA_TEST_SECRET", secret)
	upstream := func(k string, v any) map[string]any {
		u := map[string]any{"api": "openai-chat-completions", "baseUrl": "https://model.example", "apiKey": secret}
		u[k] = v
		return map[string]any{"gateway": map[string]any{"upstreams": map[string]any{"p": u}}}
	}
	for _, tc := range []struct {
		name, key string
		extra     map[string]any
	}{
		{"a URL with the key as user info, from the environment", "upstreams.p.baseUrl", upstream("baseUrl", "${CLAWEA_TEST_SECRET_URL}")},
		{"an API key over 4096 bytes, from a file", "upstreams.p.apiKey", upstream("apiKey", "${file:"+long+"}")},
		{"the key in the api member", "upstreams.p.api", upstream("api", "${CLAWEA_TEST_SECRET}")},
		{"the key inline in another upstream field", "upstreams.p.attestedAs", upstream("attestedAs", secret)},
		{"a relative file reference", "upstreams.p.apiKey", upstream("apiKey", "${file:"+secret+"}")},
		{"a secret as the platform", "attester.platform", map[string]any{"platform": "${CLAWEA_TEST_SECRET}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			stderr := invalidConfig(t, d, writeConfig(t, d, pf, tc.extra))
			// The upstream's errors read "attester.gateway.upstreams:
			// p.baseUrl: ...": the key is named in two parts.
			named := strings.NewReplacer("attester.gateway.upstreams: ", "upstreams.").Replace(stderr)
			if !strings.Contains(named, tc.key) {
				t.Fatalf("want an error naming %s; stderr:\n%s", tc.key, stderr)
			}
			if strings.Contains(stderr, secret) || strings.Contains(stderr, secret[7:]) {
				t.Fatalf("the secret is in the output:\n%s", stderr)
			}
		})
	}
}
