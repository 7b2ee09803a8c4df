package control

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var trustedOne = map[string]string{"identity.txt": "sha256:" + strings.Repeat("ab", 32)}

func TestConfigErrorsNameTheKey(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"attester": map[string]any{
			"controlSocket": "/run/clawea/control.sock", "trustedTemplates": trustedOne, "modelProvider": "p", "model": "m",
		}}
	}
	tests := []struct {
		mutate func(m map[string]any)
		key    string
	}{
		{func(m map[string]any) { delete(m, "attester") }, "attester"},
		{func(m map[string]any) { m["channels"] = map[string]any{} }, "channels"},
		{func(m map[string]any) { m["attester"].(map[string]any)["platform"] = "sgx" }, "attester.platform"},
		{func(m map[string]any) { delete(m["attester"].(map[string]any), "controlSocket") }, "attester.controlSocket"},
		{func(m map[string]any) { m["attester"].(map[string]any)["controlSocket"] = "rel.sock" }, "attester.controlSocket"},
		{func(m map[string]any) { m["attester"].(map[string]any)["controlSocket"] = "/run/../x.sock" }, "attester.controlSocket"},
		{func(m map[string]any) { m["attester"].(map[string]any)["owners"] = []string{"telegram:1", "telegram"} }, "attester.owners[1]"},
		{func(m map[string]any) { m["attester"].(map[string]any)["owners"] = []string{"Tele gram:1"} }, "attester.owners[0]"},
		{func(m map[string]any) { m["attester"].(map[string]any)["owners"] = []string{"cli:a", "cli:a"} }, "attester.owners[1]"},
		{func(m map[string]any) { m["attester"].(map[string]any)["controlUids"] = []int{0, -1} }, "attester.controlUids[1]"},
		{func(m map[string]any) {
			m["attester"].(map[string]any)["tpm"] = map[string]any{"address": "127.0.0.1:2321"}
		}, "attester.tpm.address"},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxTurnsPerRun"] = -1 }, "attester.maxTurnsPerRun"},
		{func(m map[string]any) { m["attester"].(map[string]any)["uploadBudgetBytes"] = 1 }, "attester.uploadBudgetBytes"},
		{func(m map[string]any) { m["attester"].(map[string]any)["trustedTemplates"] = map[string]string{} }, "attester.trustedTemplates"},
		{func(m map[string]any) {
			m["attester"].(map[string]any)["trustedTemplates"] = map[string]string{"x.txt": "md5:00"}
		}, `attester.trustedTemplates["x.txt"]`},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxRuns"] = 0.5 }, "attester.maxRuns"},
		{func(m map[string]any) { m["attester"].(map[string]any)["bogus"] = 1 }, "attester.bogus"},
		{func(m map[string]any) { m["attester"].(map[string]any)["Platform"] = "tdx" }, "attester.Platform"},
		{func(m map[string]any) { m["attester"].(map[string]any)["agentSocket"] = "/run/a.sock" }, "attester.agentSocket"},
		{func(m map[string]any) { m["tools"] = map[string]any{"Deny": []string{}} }, "tools.Deny"},
		{func(m map[string]any) {
			m["tools"] = map[string]any{"verifier": map[string]any{"enabled": true, "webhook": map[string]any{"url": "http://x", "secret": "s"}}}
		}, "tools.verifier.webhook.url"},
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

// TestConfigStrict: the file is read once, strictly: a duplicate key
// anywhere is refused (it used to drop a deny list silently).
func TestConfigStrict(t *testing.T) {
	att := `"attester":{"controlSocket":"/run/c/c.sock","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"}`
	// The error names the duplicated key (jsonobj reports its path).
	for _, tc := range []struct{ doc, key, msg string }{
		{`{` + att + `,"tools":{"deny":["exec"]},"tools":{"deny":[]}}`, "tools", "duplicate key"},
		{`{` + att + `,"tools":{"deny":["exec"],"deny":[]}}`, "tools.deny", "duplicate key"},
		{`{` + att + `,` + att + `}`, "attester", "duplicate key"},
		{`{` + att + `} {}`, "(file)", "not one strict JSON object"},
	} {
		_, _, err := ParseConfig([]byte(tc.doc))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%s: %v, want key %q and %q", tc.doc, err, tc.key, tc.msg)
		}
	}
	if _, g, err := ParseConfig([]byte(`{` + att + `,"tools":{"deny":["exec"]}}`)); err != nil || g == nil {
		t.Fatalf("good config: %v", err)
	}
}

// TestConfigSecretReferences: ${VAR} and ${file:/path} resolve; an
// unresolved reference names its key and never echoes a secret.
func TestConfigSecretReferences(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "hook-secret")
	os.WriteFile(secretFile, []byte("file-secret-value-0123456789abcdef\n"), 0o600)
	env := map[string]string{"HOOK_SECRET": "env-secret-value-0123456789abcdef", "SOCK_DIR": "/run/clawea"}
	opts := ConfigOptions{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	doc := func(socket, secret string) []byte {
		return []byte(`{"attester":{"controlSocket":"` + socket + `","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"},
			"tools":{"verifier":{"enabled":true,"webhook":{"url":"https://hook.example/v","secret":"` + secret + `"}}}}`)
	}
	c, g, err := ParseConfigWith(doc("${SOCK_DIR}/control.sock", "${HOOK_SECRET}"), opts)
	if err != nil || c.ControlSocket != "/run/clawea/control.sock" || g.Verifier.Webhook == nil {
		t.Fatalf("env references: %v %+v", err, c)
	}
	if _, _, err := ParseConfigWith(doc("/run/c/c.sock", "${file:"+secretFile+"}"), opts); err != nil {
		t.Fatalf("file reference: %v", err)
	}
	if c, _, err := ParseConfigWith(doc("/run/$${x}/c.sock", "s3cret-long-enough-0123456789"), opts); err != nil || c.ControlSocket != "/run/${x}/c.sock" {
		t.Fatalf("escaped reference: %v", err)
	}
	for _, tt := range []struct{ socket, secret, key string }{
		{"/run/c/c.sock", "${NOPE}", "tools.verifier.webhook.secret"},
		{"/run/c/c.sock", "${file:relative}", "tools.verifier.webhook.secret"},
		{"/run/c/c.sock", "${file:/does/not/exist}", "tools.verifier.webhook.secret"},
		// An endless file is refused after a bounded read, not read whole.
		{"/run/c/c.sock", "${file:/dev/zero}", "tools.verifier.webhook.secret"},
		{"/run/c/c.sock", "${lower}", "tools.verifier.webhook.secret"},
		{"/run/c/c.sock", "${HOOK_SECRET", "tools.verifier.webhook.secret"},
		{"${NOPE}/c.sock", "${HOOK_SECRET}", "attester.controlSocket"},
	} {
		_, _, err := ParseConfigWith(doc(tt.socket, tt.secret), opts)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tt.key {
			t.Errorf("%s / %s: want an error naming %s, got %v", tt.socket, tt.secret, tt.key, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("error echoes a secret: %v", err)
		}
	}
	// The admission policy file is read with the same bound.
	zero := []byte(`{"attester":{"controlSocket":"/run/c/c.sock","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m","admissionPolicy":"/dev/zero"}}`)
	var ce *ConfigError
	if _, _, err := ParseConfigWith(zero, opts); !errors.As(err, &ce) || ce.Key != "attester.admissionPolicy" || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("admission policy /dev/zero: want a size refusal naming attester.admissionPolicy, got %v", err)
	}
}
