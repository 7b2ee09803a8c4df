package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
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
		{func(m map[string]any) { m["attester"].(map[string]any)["tpm"] = map[string]any{"pcrs": []int{0, 24}} }, "attester.tpm.pcrs[1]"},
		{func(m map[string]any) { m["attester"].(map[string]any)["tpm"] = map[string]any{"pcrs": []int{0, 0}} }, "attester.tpm.pcrs[1]"},
		{func(m map[string]any) { m["attester"].(map[string]any)["tpm"] = map[string]any{"pcrs": []int{}} }, "attester.tpm.pcrs"},
		{func(m map[string]any) {
			m["attester"].(map[string]any)["platform"] = "sev-snp"
			m["attester"].(map[string]any)["tpm"] = map[string]any{"pcrs": []int{0, 1}}
		}, "attester.tpm.pcrs"},
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
		// A default applies only when its key is absent: 0 or "" is out of
		// range, not a request for the default.
		{func(m map[string]any) { m["attester"].(map[string]any)["maxRuns"] = 0 }, "attester.maxRuns"},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxConnections"] = 0 }, "attester.maxConnections"},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxTurnsPerRun"] = 0 }, "attester.maxTurnsPerRun"},
		{func(m map[string]any) { m["attester"].(map[string]any)["maxPackBytes"] = 0 }, "attester.maxPackBytes"},
		{func(m map[string]any) { m["attester"].(map[string]any)["uploadBudgetBytes"] = 0 }, "attester.uploadBudgetBytes"},
		{func(m map[string]any) { m["attester"].(map[string]any)["platform"] = "" }, "attester.platform"},
		{func(m map[string]any) { m["attester"].(map[string]any)["gpu"] = "yes" }, "attester.gpu"},
		{func(m map[string]any) { m["attester"].(map[string]any)["gpu"] = "simulated" }, "attester.gpu"},
		{func(m map[string]any) { m["attester"].(map[string]any)["listen"] = "" }, "attester.listen"},
		// Listen addresses are checked before anything is opened.
		{func(m map[string]any) { m["attester"].(map[string]any)["listen"] = "not-an-addr" }, "attester.listen"},
		{func(m map[string]any) { m["attester"].(map[string]any)["listen"] = "127.0.0.1:65536" }, "attester.listen"},
		{func(m map[string]any) { m["attester"].(map[string]any)["listen"] = "127.0.0.1:https" }, "attester.listen"},
		{func(m map[string]any) { m["attester"].(map[string]any)["metricsListen"] = "not-an-addr" }, "attester.metricsListen"},
		{func(m map[string]any) { m["attester"].(map[string]any)["metricsListen"] = "[::1]:-1" }, "attester.metricsListen"},
		// Each forwarded call gets a receipt and a bundle carries at most 1000:
		// a 1001st call would be forwarded and then fail its receipt.
		{func(m map[string]any) {
			m["attester"].(map[string]any)["gateway"] = map[string]any{"maxCallsPerRun": 1001}
		}, "attester.gateway.maxCallsPerRun"},
	}
	for _, tt := range tests {
		m := base()
		tt.mutate(m)
		b, _ := json.Marshal(m)
		_, _, err := parseConfig(b)
		var ce *confdoc.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, errConfig) || ce.Key != tt.key {
			t.Errorf("want a confdoc.ConfigError naming %q, got %v", tt.key, err)
		}
	}
	if _, _, err := parseConfig([]byte("{")); !errors.Is(err, errConfig) {
		t.Errorf("malformed file: %v", err)
	}
}

// TestConfigStrict: the file is read once, strictly: a duplicate key
// anywhere is refused (it used to drop a deny list silently).
func TestConfigStrict(t *testing.T) {
	att := `"attester":{"controlSocket":"/run/c/c.sock","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"}`
	// The error names the duplicated key (jsonobj reports its path); data
	// after the object is refused at the document ("").
	for _, tc := range []struct {
		doc, key string
		class    error
	}{
		{`{` + att + `,"tools":{"deny":["exec"]},"tools":{"deny":[]}}`, "tools", pohjson.ErrDuplicateKey},
		{`{` + att + `,"tools":{"deny":["exec"],"deny":[]}}`, "tools.deny", pohjson.ErrDuplicateKey},
		{`{` + att + `,` + att + `}`, "attester", pohjson.ErrDuplicateKey},
		{`{` + att + `} {}`, "", jsonobj.ErrSyntax},
	} {
		_, _, err := parseConfig([]byte(tc.doc))
		var ce *confdoc.ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !errors.Is(err, tc.class) || !errors.Is(err, errConfig) {
			t.Errorf("%s: %v, want key %q and %v", tc.doc, err, tc.key, tc.class)
		}
	}
	if _, g, err := parseConfig([]byte(`{` + att + `,"tools":{"deny":["exec"]}}`)); err != nil || g == nil {
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
		var ce *confdoc.ConfigError
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
	var ce *confdoc.ConfigError
	if _, _, err := ParseConfigWith(zero, opts); !errors.As(err, &ce) || ce.Key != "attester.admissionPolicy" || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("admission policy /dev/zero: want a size refusal naming attester.admissionPolicy, got %v", err)
	}
}

// TestConfigDefaults: an absent key gets its default; a file that sets
// every key the attester section declares is accepted as written.
func TestConfigDefaults(t *testing.T) {
	min := `{"attester":{"controlSocket":"/run/c/c.sock","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"}}`
	c, _, err := parseConfig([]byte(min))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Listen: "127.0.0.1:8443", MetricsListen: "127.0.0.1:9464", ControlSocket: "/run/c/c.sock", ControlUIDs: []int{os.Geteuid()},
		MaxTurnsPerRun: 4096, MaxOwnerMessagesPerRun: 256, MaxToolCallsPerRun: 65536, UploadBudgetBytes: 2 * uploadCost(64<<20),
		Platform: "auto", MaxPackBytes: 64 << 20, MaxRuns: 64, MaxConnections: 500, ModelProvider: "p", Model: "m",
	}
	if c.Listen != want.Listen || c.MetricsListen != want.MetricsListen || !slices.Equal(c.ControlUIDs, want.ControlUIDs) ||
		c.MaxTurnsPerRun != want.MaxTurnsPerRun || c.MaxOwnerMessagesPerRun != want.MaxOwnerMessagesPerRun ||
		c.MaxToolCallsPerRun != want.MaxToolCallsPerRun || c.UploadBudgetBytes != want.UploadBudgetBytes || c.Platform != want.Platform ||
		c.MaxPackBytes != want.MaxPackBytes || c.MaxRuns != want.MaxRuns || c.MaxConnections != want.MaxConnections ||
		c.Owners != nil || c.AdmissionPolicy != nil || c.Development || c.AllowUnlockedMemory || c.StateDir != "" || c.TPM.Address != "" {
		t.Fatalf("defaults: got %+v, want %+v", c, want)
	}
	if !c.uidAllowed(os.Geteuid()) || c.uidAllowed(os.Geteuid()+1) || c.owner("telegram", "1") {
		t.Fatal("default lookup sets")
	}

	policy := testfile.Read(t, "../promptpack/admission/testdata/open.policy.json")
	full := `{"attester":{"listen":"[::1]:0","metricsListen":":9000","controlSocket":"/run/c/c.sock","controlUids":[0,1000],
		"owners":["telegram:1","cli:local"],"maxTurnsPerRun":1,"maxOwnerMessagesPerRun":65536,"maxToolCallsPerRun":16777216,
		"uploadBudgetBytes":17179869184,"tpm":{"address":"127.0.0.1:2321"},"platform":"tpm","stateDir":"/var/lib/clawea",
		"allowUnlockedMemory":true,"trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"maxPackBytes":268435456,
		"maxRuns":4096,"maxConnections":65536,"development":true,"modelProvider":"p","model":"m",
		"admissionPolicy":` + string(policy) + `},
		"agents":{"defaults":{"sig":{"enforceVerification":true}}},"tools":{"deny":["exec"]}}`
	c, g, err := parseConfig([]byte(full))
	if err != nil {
		t.Fatalf("every key: %v", err)
	}
	if c.Listen != "[::1]:0" || c.MetricsListen != ":9000" || !slices.Equal(c.ControlUIDs, []int{0, 1000}) || c.MaxTurnsPerRun != 1 ||
		c.MaxOwnerMessagesPerRun != 65536 || c.MaxToolCallsPerRun != 1<<24 || c.UploadBudgetBytes != 16<<30 ||
		c.TPM.Address != "127.0.0.1:2321" || c.Platform != "tpm" || c.StateDir != "/var/lib/clawea" || !c.AllowUnlockedMemory ||
		c.MaxPackBytes != 256<<20 || c.MaxRuns != 4096 || c.MaxConnections != 65536 || !c.Development || c.AdmissionPolicy == nil ||
		!c.owner("cli", "local") || !c.uidAllowed(1000) || c.uidAllowed(os.Geteuid()+1) || !g.EnforceVerification {
		t.Fatalf("every key: got %+v", c)
	}
}

// TestConfigFlagOverrides: --platform and --listen are checked as the keys
// they override, and a refused value leaves the Config as it was.
func TestConfigFlagOverrides(t *testing.T) {
	doc := `{"attester":{"controlSocket":"/run/c/c.sock","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"%s}}`
	c, _, err := parseConfig(fmt.Appendf(nil, doc, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range platforms {
		if err := c.setPlatform(p); err != nil || c.Platform != p {
			t.Errorf("setPlatform(%q): %v", p, err)
		}
	}
	var ce *confdoc.ConfigError
	if err := c.setPlatform("sgx"); !errors.As(err, &ce) || ce.Key != "attester.platform" || !errors.Is(err, errConfig) || c.Platform != "simulated" {
		t.Errorf("setPlatform(sgx): %v, platform %q", err, c.Platform)
	}
	// The simulated GPU goes only with the simulated platform.
	c.GPU = "simulated"
	if err := c.setPlatform("tdx"); !errors.As(err, &ce) || ce.Key != "attester.gpu" || c.Platform != "simulated" {
		t.Errorf("setPlatform(tdx) with the simulated gpu: %v, platform %q", err, c.Platform)
	}
	c.GPU = "off"
	if err := c.setListen("127.0.0.1:0"); err != nil || c.Listen != "127.0.0.1:0" {
		t.Errorf("setListen: %v", err)
	}
	for _, addr := range []string{"not-an-addr", "127.0.0.1:65536", "127.0.0.1:http", ""} {
		if err := c.setListen(addr); !errors.As(err, &ce) || ce.Key != "attester.listen" || c.Listen != "127.0.0.1:0" {
			t.Errorf("setListen(%q): %v, listen %q", addr, err, c.Listen)
		}
	}
	tc, _, err := parseConfig(fmt.Appendf(nil, doc, `,"platform":"tpm","tpm":{"address":"127.0.0.1:2321"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.setPlatform("simulated"); !errors.As(err, &ce) || ce.Key != "attester.tpm.address" || tc.Platform != "tpm" {
		t.Errorf("setPlatform(simulated) with tpm.address: %v", err)
	}
	// Through ParseConfigWith, as the command line gives them.
	oc, _, err := ParseConfigWith(fmt.Appendf(nil, doc, ""), ConfigOptions{Platform: "tpm", Listen: "127.0.0.1:0"})
	if err != nil || oc.Platform != "tpm" || oc.Listen != "127.0.0.1:0" {
		t.Errorf("overrides: %v", err)
	}
	if _, _, err := ParseConfigWith(fmt.Appendf(nil, doc, ""), ConfigOptions{Platform: "sgx"}); !errors.As(err, &ce) || ce.Key != "attester.platform" || !strings.HasPrefix(err.Error(), "--platform: ") {
		t.Errorf("--platform sgx: %v", err)
	}
	if _, _, err := ParseConfigWith(fmt.Appendf(nil, doc, ""), ConfigOptions{Listen: "not-an-addr"}); !errors.As(err, &ce) || ce.Key != "attester.listen" || !strings.HasPrefix(err.Error(), "--listen: ") {
		t.Errorf("--listen not-an-addr: %v", err)
	}
	// platforms is the enum of attester.platform.
	f, _ := reflect.TypeFor[attesterDoc]().FieldByName("Platform")
	if !strings.Contains(f.Tag.Get("conf"), ",enum="+strings.Join(platforms, "|")+",") {
		t.Errorf("attester.platform's enum %q is not platforms %v", f.Tag.Get("conf"), platforms)
	}
}

// parseConfig is ParseConfigWith with the process's environment and files.
func parseConfig(data []byte) (*Config, *gate.Config, error) {
	return ParseConfigWith(data, ConfigOptions{})
}
