package deploy

import (
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"

	"github.com/clawea/attester/control"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// unitFile is a systemd unit as key -> values (in order), section-qualified.
type unitFile map[string][]string

func parseUnit(t *testing.T, text string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" || strings.HasSuffix(l, "\\") {
				t.Fatalf("unit line %d: %q", i+1, l)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	return u
}

func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("%s: want exactly one value, have %q", key, u[key])
	}
	return u[key][0]
}

// TestSystemdUnitMatchesExampleConfig checks that the unit and the example
// configuration agree on paths, that the hardening the deployment promises
// is present, and that every ${file:...} secret is a loaded credential.
func TestSystemdUnitMatchesExampleConfig(t *testing.T) {
	u := parseUnit(t, readFile(t, "deploy/systemd/clawea-attester.service"))
	const name = "clawea-attester.service"

	parseWithAttester(t, "deploy/systemd/attester.json", "/run/credentials/"+name+"/")

	exec := strings.Fields(u.one(t, "Service.ExecStart"))
	if len(exec) != 3 || exec[0] != "/usr/local/bin/attester" || exec[1] != "--config" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/attester --config FILE", exec)
	}
	confDir := "/etc/" + u.one(t, "Service.ConfigurationDirectory")
	if path.Dir(exec[2]) != confDir {
		t.Errorf("config %s is not in ConfigurationDirectory %s", exec[2], confDir)
	}

	raw := readFile(t, "deploy/systemd/attester.json")
	dec := json.NewDecoder(strings.NewReader(raw))
	var cfg struct {
		Attester struct {
			Listen, MetricsListen, ControlSocket, StateDir, Platform string
		} `json:"attester"`
	}
	if err := dec.Decode(&cfg); err != nil || dec.More() {
		t.Fatalf("attester.json: %v", err)
	}
	a := cfg.Attester
	runDir := "/run/" + u.one(t, "Service.RuntimeDirectory")
	// The orchestrator reaches the socket through the group (0750 directory,
	// 0660 socket); only the attester writes the directory.
	if path.Dir(a.ControlSocket) != runDir || u.one(t, "Service.RuntimeDirectoryMode") != "0750" || u.one(t, "Service.Group") != "clawea-control" {
		t.Errorf("controlSocket %s: want it directly in RuntimeDirectory %s with mode 0750, group clawea-control", a.ControlSocket, runDir)
	}
	if stateDir := "/var/lib/" + u.one(t, "Service.StateDirectory"); a.StateDir != stateDir || u.one(t, "Service.StateDirectoryMode") != "0700" {
		t.Errorf("stateDir %s: want StateDirectory %s with mode 0700", a.StateDir, stateDir)
	}
	for _, l := range []string{a.Listen, a.MetricsListen} {
		if !strings.HasPrefix(l, "127.0.0.1:") {
			t.Errorf("example listens on %q; a CVM example keeps TCP on loopback", l)
		}
	}

	creds := map[string]bool{}
	for _, lc := range u["Service.LoadCredential"] {
		id, _, _ := strings.Cut(lc, ":")
		creds[id] = true
	}
	refs := regexp.MustCompile(`\$\{file:([^}]*)\}`).FindAllStringSubmatch(raw, -1)
	if len(refs) == 0 {
		t.Errorf("the example configuration shows no ${file:...} secret")
	}
	for _, m := range refs {
		dir, id := path.Split(m[1])
		if dir != "/run/credentials/"+name+"/" || !creds[id] {
			t.Errorf("secret %s is not a LoadCredential= of %s", m[1], name)
		}
	}

	want := map[string]string{
		"Service.User": "clawea", "Service.NoNewPrivileges": "yes", "Service.ProtectSystem": "strict",
		"Service.ProtectHome": "yes", "Service.PrivateTmp": "yes", "Service.LockPersonality": "yes",
		"Service.MemoryDenyWriteExecute": "yes", "Service.RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"Service.CapabilityBoundingSet": "CAP_IPC_LOCK", "Service.AmbientCapabilities": "CAP_IPC_LOCK",
		"Service.DevicePolicy": "closed", "Service.UMask": "0077", "Service.LimitCORE": "0",
		"Service.SystemCallArchitectures": "native",
	}
	for k, v := range want {
		if got := u[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(u["Service.LimitMEMLOCK"]) != 1 {
		t.Errorf("LimitMEMLOCK is not set")
	}
	for _, dev := range []string{"/dev/sev-guest rw", "/dev/tdx_guest rw", "/dev/tpmrm0 rw"} {
		if !slices.Contains(u["Service.DeviceAllow"], dev) {
			t.Errorf("DeviceAllow=%s missing", dev)
		}
	}
	if f := u["Service.SystemCallFilter"]; len(f) == 0 || !strings.HasPrefix(f[0], "@system-service") {
		t.Errorf("SystemCallFilter = %q: want an allow list starting with @system-service", f)
	}
	for _, f := range u["Service.SystemCallFilter"] {
		// HardenProcess calls setrlimit(RLIMIT_CORE): @resources must stay allowed.
		if strings.HasPrefix(f, "~") && strings.Contains(f, "@resources") {
			t.Errorf("SystemCallFilter=%s denies setrlimit, which the attester needs at start-up", f)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "deploy/systemd/check.sh")); err != nil {
		t.Errorf("check script: %v", err)
	}
}

// parseWithAttester parses an example configuration with the attester's own
// parser; ${file:...} references resolve only below secretDir (to a dummy
// value), so the example names its secrets where the deployment puts them.
func parseWithAttester(t *testing.T, name, secretDir string) {
	t.Helper()
	var read []string
	_, _, err := control.ParseConfigWith([]byte(readFile(t, name)), control.ConfigOptions{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv: func(string) (string, bool) { return "", false },
		ReadFile: func(p string) ([]byte, error) {
			if !strings.HasPrefix(p, secretDir) {
				return nil, fs.ErrNotExist
			}
			read = append(read, p)
			return []byte("example-secret-0123456789abcdef\n"), nil
		},
	})
	if err != nil {
		t.Fatalf("%s: the attester refuses it: %v", name, err)
	}
	if len(read) == 0 {
		t.Errorf("%s: names no secret file", name)
	}
}
