package openclawcheck

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/titanous/json5"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testjson"
)

// fakeHost is a file system with the clawea plugin at /opt/clawea/clients/openclaw
// and another plugin at /opt/other.
func fakeHost() Host {
	files := map[string]string{
		"/opt/clawea/clients/openclaw/openclaw.plugin.json": `{"id":"clawea"}`,
		"/opt/other/openclaw.plugin.json":                   `{"id":"other"}`,
	}
	dirs := map[string]bool{"/opt/clawea/clients/openclaw": true, "/opt/other": true, "/opt/plugin.js": false}
	return Host{
		HarnessUser: "openclaw",
		HarnessUID:  1000,
		HomeDir:     "/home/openclaw",
		IsDir: func(name string) (bool, error) {
			d, ok := dirs[name]
			if !ok {
				return false, os.ErrNotExist
			}
			return d, nil
		},
		ReadFile: func(name string) ([]byte, error) {
			b, ok := files[name]
			if !ok {
				return nil, os.ErrNotExist
			}
			return []byte(b), nil
		},
	}
}

func recommended(t *testing.T) map[string]any {
	t.Helper()
	raw := testfile.Read(t, "testdata/recommended.json5")
	var v map[string]any
	if err := json5.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func keys(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Key)
	}
	return out
}

func TestRecommendedLayoutPasses(t *testing.T) {
	raw := testfile.Read(t, "testdata/recommended.json5")
	fs, err := Check(raw, fakeHost())
	if err != nil || len(fs) != 0 {
		t.Fatalf("Check(recommended) = %v, %v; want no findings", fs, err)
	}
}

// set walks path (creating objects) and sets the last member; a nil value
// deletes it.
func set(m map[string]any, value any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	last := path[len(path)-1]
	if value == nil {
		delete(m, last)
		return
	}
	m[last] = value
}

// settingCase changes the recommended layout and names the findings
// expected, by key.
type settingCase struct {
	name   string
	change func(m map[string]any)
	want   []string
}

// run checks the changed layout in a subtest.
func (tc settingCase) run(t *testing.T) {
	t.Run(tc.name, func(t *testing.T) {
		m := recommended(t)
		tc.change(m)
		raw := testjson.Marshal(t, m)
		fs, err := Check(raw, fakeHost())
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(fs); !slices.Equal(got, tc.want) {
			t.Fatalf("findings %v, want keys %v", fs, tc.want)
		}
	})
}

// TestEachUnsafeSetting changes one setting of the recommended layout and
// expects exactly the findings named (issue 19 item 6's list).
func TestEachUnsafeSetting(t *testing.T) {
	for _, tc := range []settingCase{
		{"load path missing", func(m map[string]any) {
			set(m, []any{"/nonexistent/clients/openclaw"}, "plugins", "load", "paths")
		}, []string{"plugins.load.paths", "plugins.load.paths[0]"}},
		{"load paths unset", func(m map[string]any) { set(m, nil, "plugins", "load") }, []string{"plugins.load.paths"}},
		{"relative load path", func(m map[string]any) {
			set(m, []any{"clients/openclaw"}, "plugins", "load", "paths")
		}, []string{"plugins.load.paths", "plugins.load.paths[0]"}},
		{"entry disabled", func(m map[string]any) { set(m, false, "plugins", "entries", "clawea", "enabled") },
			[]string{"plugins.entries.clawea.enabled"}},
		{"plugins off", func(m map[string]any) { set(m, false, "plugins", "enabled") }, []string{"plugins.enabled"}},
		{"not allowed", func(m map[string]any) { set(m, []any{"other"}, "plugins", "allow") }, []string{"plugins.allow"}},
		{"denied", func(m map[string]any) { set(m, []any{"clawea"}, "plugins", "deny") }, []string{"plugins.deny"}},
		{"conversation access missing", func(m map[string]any) {
			set(m, nil, "plugins", "entries", "clawea", "hooks", "allowConversationAccess")
		}, []string{"plugins.entries.clawea.hooks.allowConversationAccess"}},
		{"prompt injection forbidden", func(m map[string]any) {
			set(m, false, "plugins", "entries", "clawea", "hooks", "allowPromptInjection")
		}, []string{"plugins.entries.clawea.hooks.allowPromptInjection"}},
		{"another plugin on a load path", func(m map[string]any) {
			set(m, []any{"/opt/clawea/clients/openclaw", "/opt/other"}, "plugins", "load", "paths")
		}, []string{"plugins.load.paths[1]"}},
		{"a standalone plugin file", func(m map[string]any) {
			set(m, []any{"/opt/clawea/clients/openclaw", "/opt/plugin.js"}, "plugins", "load", "paths")
		}, []string{"plugins.load.paths[1]"}},
		{"another plugin enabled", func(m map[string]any) { set(m, true, "plugins", "entries", "browser", "enabled") },
			[]string{"plugins.entries.browser.enabled"}},
		{"an MCP server", func(m map[string]any) {
			set(m, map[string]any{"command": "uvx"}, "mcp", "servers", "fetch")
		}, []string{"mcp.servers.fetch"}},
		{"elevated", func(m map[string]any) { set(m, true, "tools", "elevated", "enabled") }, []string{"tools.elevated.enabled"}},
		{"elevated per agent", func(m map[string]any) {
			set(m, true, "agents", "entries", "main", "tools", "elevated", "enabled")
		}, []string{"agents.entries.main.tools.elevated.enabled"}},
		{"exec on the gateway", func(m map[string]any) { set(m, "gateway", "tools", "exec", "host") }, []string{"tools.exec.host"}},
		{"exec on a node", func(m map[string]any) {
			set(m, "node", "agents", "entries", "main", "tools", "exec", "host")
		}, []string{"agents.entries.main.tools.exec.host"}},
		{"sandbox off", func(m map[string]any) { set(m, "off", "agents", "defaults", "sandbox", "mode") },
			[]string{"agents.defaults.sandbox.mode"}},
		{"sandbox non-main", func(m map[string]any) { set(m, "non-main", "agents", "defaults", "sandbox", "mode") },
			[]string{"agents.defaults.sandbox.mode"}},
		{"sandbox unset", func(m map[string]any) { set(m, nil, "agents") }, []string{"agents.defaults.sandbox.mode"}},
		{"sandbox off for one agent", func(m map[string]any) { set(m, "off", "agents", "entries", "main", "sandbox", "mode") },
			[]string{"agents.entries.main.sandbox.mode"}},
		{"ssh as the harness", func(m map[string]any) {
			set(m, "openclaw@127.0.0.1:2222", "agents", "defaults", "sandbox", "ssh", "target")
		}, []string{"agents.defaults.sandbox.ssh.target"}},
		{"ssh with no user", func(m map[string]any) {
			set(m, "127.0.0.1:2222", "agents", "defaults", "sandbox", "ssh", "target")
		}, []string{"agents.defaults.sandbox.ssh.target"}},
		{"ssh as root", func(m map[string]any) {
			set(m, "root@127.0.0.1", "agents", "defaults", "sandbox", "ssh", "target")
		}, []string{"agents.defaults.sandbox.ssh.target"}},
		{"one agent's ssh as the harness", func(m map[string]any) {
			set(m, "openclaw@127.0.0.1", "agents", "entries", "main", "sandbox", "ssh", "target")
		}, []string{"agents.entries.main.sandbox.ssh.target"}},
		{"docker without a user", func(m map[string]any) { set(m, "docker", "agents", "defaults", "sandbox", "backend") },
			[]string{"agents.defaults.sandbox.docker.user"}},
		{"podman as the harness uid", func(m map[string]any) {
			set(m, "podman", "agents", "defaults", "sandbox", "backend")
			set(m, "1000:1000", "agents", "defaults", "sandbox", "docker", "user")
		}, []string{"agents.defaults.sandbox.docker.user"}},
		{"podman as root", func(m map[string]any) {
			set(m, "podman", "agents", "defaults", "sandbox", "backend")
			set(m, "0", "agents", "defaults", "sandbox", "docker", "user")
		}, []string{"agents.defaults.sandbox.docker.user"}},
		{"a backend it cannot judge", func(m map[string]any) { set(m, "openshell", "agents", "defaults", "sandbox", "backend") },
			[]string{"agents.defaults.sandbox.backend"}},
		{"an include", func(m map[string]any) { set(m, "./more.json5", "tools", "$include") }, []string{"tools.$include"}},
	} {
		tc.run(t)
	}
}

// podman with a non-root uid other than the harness's is the documented
// alternative to ssh.
func TestPodmanWithAnotherUID(t *testing.T) {
	m := recommended(t)
	set(m, "podman", "agents", "defaults", "sandbox", "backend")
	set(m, "1001:1001", "agents", "defaults", "sandbox", "docker", "user")
	raw, _ := json.Marshal(m)
	if fs, err := Check(raw, fakeHost()); err != nil || len(fs) != 0 {
		t.Fatalf("Check = %v, %v", fs, err)
	}
}

// loadingPluginsFrom returns the recommended layout with plugins loaded
// from dir, and a host that reads the real file system.
func loadingPluginsFrom(t *testing.T, dir string) ([]byte, Host) {
	t.Helper()
	m := recommended(t)
	set(m, []any{dir}, "plugins", "load", "paths")
	raw, _ := json.Marshal(m)
	h := fakeHost()
	h.IsDir, h.ReadFile = nil, nil
	return raw, h
}

// The loaded manifest is the repository's own plugin directory.
func TestRealPluginDirectory(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "openclaw"))
	if err != nil {
		t.Fatal(err)
	}
	raw, h := loadingPluginsFrom(t, dir)
	if fs, err := Check(raw, h); err != nil || len(fs) != 0 {
		t.Fatalf("Check = %v, %v", fs, err)
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{"", "[]", "42", "{", "{a:}", strings.Repeat(" ", maxConfigBytes+1)} {
		if fs, err := Check([]byte(in), fakeHost()); !errors.Is(err, ErrMalformed) || fs != nil {
			t.Errorf("Check(%.20q) = %v, %v; want ErrMalformed", in, fs, err)
		}
	}
}

// FuzzCheck: never panics; on error nothing is returned; findings are sorted
// and each names a key.
func FuzzCheck(f *testing.F) {
	raw := testfile.Read(f, "testdata/recommended.json5")
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := Check(b, fakeHost())
		if err != nil {
			if fs != nil {
				t.Fatal("findings returned with an error")
			}
			return
		}
		if !slices.IsSortedFunc(fs, func(a, b Finding) int { return strings.Compare(a.Key, b.Key) }) {
			t.Fatal("findings not sorted")
		}
		for _, f := range fs {
			if f.Key == "" || f.Problem == "" {
				t.Fatalf("empty finding %+v", f)
			}
		}
	})
}

// A manifest over its bound is refused without being read whole: the
// default reader is bounded (a FIFO or a huge file at a load path).
func TestOversizeManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "openclaw.plugin.json"), make([]byte, maxManifestBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, h := loadingPluginsFrom(t, dir)
	fs, err := Check(raw, h)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(fs, func(f Finding) bool { return f.Key == "plugins.load.paths[0]" })
	if i < 0 || !strings.Contains(fs[i].Problem, "over") {
		t.Fatalf("Check = %v; want plugins.load.paths[0] named as an oversize manifest", fs)
	}
}

// With the plugin's gateway on, every model of an agent must be the
// plugin's provider and OpenClaw's config must hold no provider key
// (docs/spec/openclaw-plugin.md section 7, docs/deploy.md).
func TestGatewayLayout(t *testing.T) {
	gateway := func(m map[string]any) {
		set(m, true, "plugins", "entries", "clawea", "config", "gateway")
		set(m, "clawea/anthropic/claude", "agents", "defaults", "model", "primary")
		set(m, map[string]any{"baseUrl": "http://clawea.invalid", "apiKey": "clawea-gateway", "api": "anthropic-messages"}, "models", "providers", "clawea")
	}
	for _, tc := range []settingCase{
		{"routed", gateway, nil},
		{"routed, with a routed fallback", func(m map[string]any) {
			gateway(m)
			set(m, []any{"clawea/anthropic/claude-haiku"}, "agents", "defaults", "model", "fallbacks")
		}, nil},
		{"no gateway: any model", func(m map[string]any) {
			set(m, "openai/gpt-5", "agents", "defaults", "model", "primary")
			set(m, map[string]any{"apiKey": "sk-x"}, "models", "providers", "openai")
		}, nil},
		{"model unset", func(m map[string]any) {
			gateway(m)
			set(m, nil, "agents", "defaults", "model")
		}, []string{"agents.defaults.model"}},
		{"another provider's model", func(m map[string]any) {
			gateway(m)
			set(m, "openai/gpt-5", "agents", "defaults", "model", "primary")
		}, []string{"agents.defaults.model.primary"}},
		{"a model as a string", func(m map[string]any) {
			gateway(m)
			set(m, "anthropic/claude", "agents", "defaults", "model")
		}, []string{"agents.defaults.model"}},
		{"a fallback to another provider", func(m map[string]any) {
			gateway(m)
			set(m, []any{"clawea/anthropic/claude-haiku", "openai/gpt-5"}, "agents", "defaults", "model", "fallbacks")
		}, []string{"agents.defaults.model.fallbacks[1]"}},
		{"one agent's model", func(m map[string]any) {
			gateway(m)
			set(m, "openai/gpt-5", "agents", "entries", "main", "model")
		}, []string{"agents.entries.main.model"}},
		{"a provider key in OpenClaw's config", func(m map[string]any) {
			gateway(m)
			set(m, map[string]any{"apiKey": "sk-x", "baseUrl": "https://api.openai.com/v1"}, "models", "providers", "openai")
		}, []string{"models.providers.openai.apiKey"}},
	} {
		tc.run(t)
	}
}
