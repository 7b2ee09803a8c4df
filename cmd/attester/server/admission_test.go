package server

import (
	"encoding/json"
	"errors"
	"github.com/clawea/attester/control"
	"github.com/clawea/attester/internal/citest"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/confdoc"
)

// admissionTestdata is the admission package's vectors and policies.
var admissionTestdata = packtest.AdmissionDir()

func readAdmissionTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(admissionTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// admissionConfig is testConfig with attester.admissionPolicy set to the
// absolute path of policyFile (in the admission testdata) and the
// configuration changed by tweak.
func admissionConfig(t *testing.T, trusted map[string]string, policyFile string, tweak func(att, root map[string]any)) []byte {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(testConfig(t, trusted), &root); err != nil {
		t.Fatal(err)
	}
	att := root["attester"].(map[string]any)
	if policyFile != "" {
		abs, err := filepath.Abs(filepath.Join(admissionTestdata, policyFile))
		if err != nil {
			t.Fatal(err)
		}
		att["admissionPolicy"] = abs
	}
	if tweak != nil {
		tweak(att, root)
	}
	b, _ := json.Marshal(root)
	return b
}

// locked makes the attester open packs in locked memory only, as a
// sensitive policy requires.
func locked(att, _ map[string]any) { att["allowUnlockedMemory"] = false }

// vectorPack builds a real pack (promptpack.Build with the shared harness)
// from an admission vector: base.params.json with set applied, and the
// vector's pack members as build options. ok is false for a vector whose
// pack a build cannot make (another recipe version): the attester's rebuild
// refuses such a pack before admission.
func vectorPack(t *testing.T, dir string, set, pack map[string]any) (p *promptpack.Pack, ok bool) {
	t.Helper()
	var params map[string]any
	if err := json.Unmarshal(readAdmissionTestdata(t, "base.params.json"), &params); err != nil {
		t.Fatal(err)
	}
	maps.Copy(params, set)
	opts := promptpack.BuildOptions{
		ToolSchemas:        readAdmissionTestdata(t, "base.tool_schemas.json"),
		SkillsEnvOverrides: readAdmissionTestdata(t, "base.skills_env.json"),
	}
	for k, v := range pack {
		switch k {
		case "recipe":
			return nil, false
		case "prompt_mode":
			// The build resolves the mode from the params (set by the vector).
		case "tool_schemas":
			opts.ToolSchemas, _ = json.Marshal(v)
		case "skills_env_overrides":
			opts.SkillsEnvOverrides = nil
			if v != nil {
				opts.SkillsEnvOverrides, _ = json.Marshal(v)
			}
		default:
			t.Fatalf("unknown pack member %q", k)
		}
	}
	pj, _ := json.Marshal(params)
	p, err := promptpack.Build(pj, dir, "openclaw-sig", opts)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return p, true
}

// createRun seals pack to h's attester and posts it to /v1/runs.
func (h *harness) createRun(t *testing.T, pack *promptpack.Pack, trusted map[string]string, agent string) (int, map[string]any) {
	t.Helper()
	rb, err := pack.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	enc, man, err := promptpack.SealPack(pack, h.id.PackKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	mj, _ := man.MarshalJSON()
	b, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mj),
		"report_hash_b64u": rb.ReportHashB64u(), "agent_id": agent, "session_key": "agent:" + agent + ":main"})
	return h.ctl(t, "POST", "/v1/runs", "", b)
}

func (h *harness) openRuns() int {
	return h.srv.Service().Status().OpenRuns
}

// TestAdmissionVectorsAtCreateRun drives the admission package's vectors
// through POST /v1/runs: every pack rule refuses its violating pack with 422,
// the rule code as reason and the input named (never content), and nothing
// is kept. The attester here allows unlocked memory, so a pack that a
// sensitive policy admits is then refused by the first run-time obligation;
// the open policy admits the base pack (201).
func TestAdmissionVectorsAtCreateRun(t *testing.T) {
	dir := packtest.Dir(t)
	vectors := packtest.AdmitVectors(t)
	base, _ := vectorPack(t, dir, nil, nil)
	trusted, _ := base.SigHashes()
	servers := map[string]*harness{}
	server := func(policy string) *harness {
		if servers[policy] == nil {
			servers[policy] = newTestServerConfig(t, admissionConfig(t, trusted, policy, nil))
		}
		return servers[policy]
	}
	rules := map[string]bool{}
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			pack, ok := vectorPack(t, dir, v.Set, v.Pack)
			if !ok {
				t.Skip("no build makes this pack; the rebuild refuses it before admission")
			}
			h := server(v.Policy)
			before := h.openRuns()
			code, m := h.createRun(t, pack, trusted, "main")
			rule, input := v.Rule, v.Input
			if rule == "" {
				rule, input = "RUNTIME_MEMORY_UNLOCKED", "runtime"
			}
			want := "the run is not admitted by the admission policy: " + rule + ": \"" + input + "\""
			if code != 422 || m["reason"] != rule || m["error"] != want {
				t.Fatalf("got %d %v, want 422 %s %q", code, m, rule, want)
			}
			if n := h.openRuns(); n != before {
				t.Fatalf("%d runs kept after a refusal", n-before)
			}
			// The refusal names the input, never its content.
			for _, f := range []string{"extraSystemPrompt", "skillsPrompt"} {
				if s, _ := v.Set[f].(string); len(s) > 8 && strings.Contains(m["error"].(string), s) {
					t.Fatalf("the refusal quotes %s", f)
				}
			}
			rules[rule] = true
		})
	}
	for _, r := range []string{
		"PROMPT_MODE_NOT_ALLOWED", "BOOTSTRAP_PATH_NOT_ALLOWED", "BOOTSTRAP_DUPLICATE_PATH",
		"BOOTSTRAP_FILE_TOO_LARGE", "BOOTSTRAP_TOTAL_TOO_LARGE", "BOOTSTRAP_BINARY", "BOOTSTRAP_NUL",
		"BOOTSTRAP_NEWLINES_NOT_NORMALISED", "BOOTSTRAP_CONTENT_NOT_PINNED", "SKILLS_REFUSED", "SKILLS_PROMPT_MALFORMED",
		"SKILLS_PREAMBLE_NOT_PINNED", "SKILL_NOT_ALLOWED", "SKILL_NOT_PINNED", "SKILL_WORKSPACE",
		"SKILLS_ENV_REFUSED", "SKILLS_ENV_NOT_PINNED", "EXTRA_SYSTEM_PROMPT_REFUSED", "TOOL_SCHEMAS_NOT_PINNED",
		"TOOL_SUMMARY_REFUSED", "TOOL_NAME_NOT_ALLOWED", "OWNERS_REFUSED", "OWNER_NOT_PINNED_HMAC",
		"RUNTIME_MEMORY_UNLOCKED",
	} {
		if !rules[r] {
			t.Errorf("no vector refused with %s at POST /v1/runs", r)
		}
	}
	// A non-sensitive policy admits the base pack; the run records the
	// policy's hash and is not sensitive.
	open := server("open.policy.json")
	code, m := open.createRun(t, base, trusted, "main")
	pol, err := admission.Parse(readAdmissionTestdata(t, "open.policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if code != 201 || m["admission_policy_hash_b64u"] != pol.Hash() || m["sensitive"] != false {
		t.Fatalf("open policy: %d %v", code, m)
	}
}

// lockedServer is a server that opens packs in locked memory only, with the
// configuration changed by tweak; it skips the test where memory cannot be
// locked.
func lockedServer(t *testing.T, trusted map[string]string, policy string, tweak func(att, root map[string]any)) *harness {
	t.Helper()
	return newTestServerConfig(t, admissionConfig(t, trusted, policy, func(att, root map[string]any) {
		locked(att, root)
		if tweak != nil {
			tweak(att, root)
		}
	}))
}

// TestAdmissionRuntimeObligations: a sensitive policy admits a compliant
// pack only on an attester that meets its run-time obligations (section 7),
// checked for the run's agent, in order.
func TestAdmissionRuntimeObligations(t *testing.T) {
	dir := packtest.Dir(t)
	pack, _ := vectorPack(t, dir, nil, nil)
	trusted, _ := pack.SigHashes()
	pol, err := admission.Parse(readAdmissionTestdata(t, "sensitive.policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := lockedServer(t, trusted, "sensitive.policy.json", nil)
	code, m := h.createRun(t, pack, trusted, "main")
	if code == 503 && strings.Contains(m["error"].(string), "lock memory") {
		citest.SkipOrFail(t, "no lockable memory here: %v", m)
	}
	if code != 201 || m["admission_policy_hash_b64u"] != pol.Hash() || m["sensitive"] != true {
		t.Fatalf("compliant pack on a compliant attester: %d %v", code, m)
	}
	hook := map[string]any{"url": "https://verifier.example/hook", "secret": "0123456789abcdef0123456789abcdef"}
	for _, tc := range []struct {
		name  string
		agent string
		tweak func(att, root map[string]any)
		rule  string
	}{
		{"attester development", "main", func(att, _ map[string]any) { att["development"] = true }, "RUNTIME_DEVELOPMENT_OPTIONS"},
		{"verifier fails open", "main", func(_, root map[string]any) {
			root["tools"] = map[string]any{"verifier": map[string]any{"enabled": true, "failMode": "allow", "webhook": hook}}
		}, "RUNTIME_FAIL_MODE_NOT_DENY"},
		{"verification not enforced", "main", func(_, root map[string]any) { delete(root, "agents") }, "RUNTIME_VERIFICATION_NOT_ENFORCED"},
		{"nothing gated", "main", func(_, root map[string]any) {
			root["agents"] = map[string]any{"defaults": map[string]any{"sig": map[string]any{"enforceVerification": true, "gatedTools": []string{}}}}
		}, "RUNTIME_VERIFICATION_NOT_ENFORCED"},
		{"only another agent enforces", "main", func(_, root map[string]any) {
			root["agents"] = map[string]any{"list": []any{map[string]any{"id": "ops", "sig": map[string]any{"enforceVerification": true}}}}
		}, "RUNTIME_VERIFICATION_NOT_ENFORCED"},
		{"this agent enforces", "ops", func(_, root map[string]any) {
			root["agents"] = map[string]any{"list": []any{map[string]any{"id": "ops", "sig": map[string]any{"enforceVerification": true}}}}
		}, ""},
		{"this agent's verifier fails open", "ops", func(_, root map[string]any) {
			root["tools"] = map[string]any{"verifier": map[string]any{"enabled": true, "failMode": "allow", "webhook": hook}}
			root["agents"] = map[string]any{"defaults": map[string]any{"sig": map[string]any{"enforceVerification": true}},
				"list": []any{map[string]any{"id": "main", "tools": map[string]any{"verifier": map[string]any{"failMode": "deny"}}}}}
		}, "RUNTIME_FAIL_MODE_NOT_DENY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lockedServer(t, trusted, "sensitive.policy.json", tc.tweak)
			code, m := h.createRun(t, pack, trusted, tc.agent)
			if tc.rule == "" {
				if code != 201 || m["sensitive"] != true {
					t.Fatalf("got %d %v, want 201", code, m)
				}
				return
			}
			if code != 422 || m["reason"] != tc.rule || !strings.Contains(m["error"].(string), `"runtime"`) {
				t.Fatalf("got %d %v, want 422 %s", code, m, tc.rule)
			}
			if h.openRuns() != 0 {
				t.Fatal("a refused run was kept")
			}
		})
	}
}

// TestAdmissionPolicyConfig: attester.admissionPolicy is a path or an
// inline object; a policy that does not parse is a configuration error
// naming the key (and the policy's JSON path), before anything starts.
func TestAdmissionPolicyConfig(t *testing.T) {
	raw := readAdmissionTestdata(t, "open.policy.json")
	want, err := admission.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := control.ParseConfigWith(admissionConfig(t, trustedOne, "open.policy.json", nil), control.ConfigOptions{})
	if err != nil || cfg.AdmissionPolicy == nil || cfg.AdmissionPolicy.Hash() != want.Hash() {
		t.Fatalf("path: %v", err)
	}
	cfg, _, err = control.ParseConfigWith(admissionConfig(t, trustedOne, "", func(att, _ map[string]any) { att["admissionPolicy"] = json.RawMessage(raw) }), control.ConfigOptions{})
	if err != nil || cfg.AdmissionPolicy == nil || cfg.AdmissionPolicy.Hash() != want.Hash() {
		t.Fatalf("inline: %v", err)
	}
	cfg, _, err = control.ParseConfigWith(admissionConfig(t, trustedOne, "", nil), control.ConfigOptions{})
	if err != nil || cfg.AdmissionPolicy != nil {
		t.Fatalf("none: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(raw), `"sensitive": false`, `"sensitive": "no"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"relative path":  "open.policy.json",
		"missing file":   filepath.Join(t.TempDir(), "missing.json"),
		"bad policy":     bad,
		"not a policy":   map[string]any{"admission_policy_version": "clawea.dev/admission-policy/v9"},
		"wrong type":     true,
		"inline invalid": json.RawMessage(strings.Replace(string(raw), `"sensitive": false`, `"sensitive": "no"`, 1)),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := control.ParseConfigWith(admissionConfig(t, trustedOne, "", func(att, _ map[string]any) { att["admissionPolicy"] = v }), control.ConfigOptions{})
			var ce *confdoc.ConfigError
			if !errors.As(err, &ce) || ce.Key != "attester.admissionPolicy" {
				t.Fatalf("got %v, want a config error naming attester.admissionPolicy", err)
			}
		})
	}
}
