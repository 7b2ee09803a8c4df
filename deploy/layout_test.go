package deploy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
)

// buildPackctl builds cmd/packctl into a test's temporary directory (the Go
// build cache makes the second build cheap).
func buildPackctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "packctl")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/packctl")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/packctl: %v\n%s", err, out)
	}
	return bin
}

// openclawCheck runs `packctl openclaw check --harness-user harness` on the
// configuration text and returns its exit code and output.
func openclawCheck(t *testing.T, bin, config, harness string) (int, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "openclaw.json5")
	if err := os.WriteFile(f, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "openclaw", "check", "--harness-user", harness, f)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

const pluginInstallPath = "/usr/local/lib/clawea/openclaw-plugin"

// TestOpenClawExampleConfig: the example OpenClaw configuration of the
// layout passes the operator's preflight, with its plugin load path (the
// install location) pointed at this checkout's clients/openclaw; as shipped,
// the only findings are that load path.
func TestOpenClawExampleConfig(t *testing.T) {
	cfg := readFile(t, "deploy/openclaw/openclaw.json5")
	if strings.Count(cfg, `"`+pluginInstallPath+`"`) != 1 {
		t.Fatalf("openclaw.json5 does not load the plugin from %s", pluginInstallPath)
	}
	// The harness account of the layout; where it does not exist here, the
	// user running the test (the check refuses a sandbox that runs as it).
	harness := "openclaw"
	if _, err := user.Lookup(harness); err != nil {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		harness = u.Username
		t.Logf("no account openclaw here: checking with --harness-user %s", harness)
	}
	plugin, err := filepath.Abs(filepath.Join(root, "clients/openclaw"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildPackctl(t)
	rc, out := openclawCheck(t, bin, strings.Replace(cfg, pluginInstallPath, plugin, 1), harness)
	t.Logf("packctl openclaw check (load path %s): exit %d\n%s", plugin, rc, out)
	if rc != 0 {
		t.Errorf("packctl openclaw check: exit %d, want 0", rc)
	}

	rc, out = openclawCheck(t, bin, cfg, harness)
	if _, err := os.Stat(pluginInstallPath); err == nil {
		if rc != 0 {
			t.Errorf("as shipped, with the plugin installed: exit %d, want 0\n%s", rc, out)
		}
	} else {
		var other []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if !strings.HasPrefix(strings.TrimSpace(l), "plugins.load.paths") {
				other = append(other, l)
			}
		}
		if rc != 4 || len(other) != 0 {
			t.Errorf("as shipped, without %s: exit %d, want 4 with load path findings only\n%s", pluginInstallPath, rc, out)
		}
	}

	// The plugin talks to the socket the attester example listens on.
	var a struct {
		Attester struct{ ControlSocket string } `json:"attester"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "deploy/systemd/attester.json")), &a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`controlSocket: "` + a.Attester.ControlSocket + `"`,
		`target: "clawtools@127.0.0.1:2222"`,
		`strictHostKeyChecking: true`,
		`identityFile: "/etc/openclaw/sandbox-ssh/id_ed25519"`,
		`knownHostsFile: "/etc/openclaw/sandbox-ssh/known_hosts"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("openclaw.json5 lacks %s", want)
		}
	}
}

// TestYamaDropIn: the sysctl drop-in raises ptrace_scope to at least 1 and
// tolerates kernels without Yama.
func TestYamaDropIn(t *testing.T) {
	var keys []string
	for _, l := range strings.Split(readFile(t, "deploy/systemd/60-clawea-ptrace.conf"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || strings.TrimSpace(k) != "-kernel.yama.ptrace_scope" || err != nil || n < 1 {
			t.Errorf("line %q: want -kernel.yama.ptrace_scope = N with N >= 1", l)
		}
		keys = append(keys, k)
	}
	if len(keys) != 1 {
		t.Errorf("want one setting, have %d", len(keys))
	}
}

// TestInstallHelperProcess is not a test: the install test runs the test
// binary as another account to connect to a unix socket.
func TestInstallHelperProcess(t *testing.T) {
	p := os.Getenv("CLAWEA_DEPLOY_DIAL")
	if p == "" {
		return
	}
	c, err := net.Dial("unix", p)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	c.Close()
	os.Exit(0)
}

// TestInstallAsServiceUsers runs deploy/systemd/install.sh into a temporary
// root (twice: it is idempotent) with accounts of unique names, then checks
// as each account what it can and cannot do: the attester reads its
// configuration and writes its state and socket directory; the orchestrator
// connects to the socket through the group but cannot write its directory
// or read the attester's files; the tools account reaches none of it. It
// needs root (CI runs as root).
func TestInstallAsServiceUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		citest.SkipOrFail(t, "install.sh creates accounts: run as root")
		return
	}
	for _, c := range []string{"useradd", "userdel", "groupadd", "groupdel", "runuser", "ssh-keygen"} {
		if _, err := exec.LookPath(c); err != nil {
			citest.SkipOrFail(t, "%s is missing", c)
			return
		}
	}
	var rnd [3]byte
	rand.Read(rnd[:])
	id := "cw" + hex.EncodeToString(rnd[:])
	att, ctl, oc, tools := id+"-att", id+"-ctl", id+"-oc", id+"-tools"
	t.Cleanup(func() {
		for _, u := range []string{att, oc, tools} {
			if _, err := user.Lookup(u); err == nil {
				if out, err := exec.Command("userdel", u).CombinedOutput(); err != nil {
					t.Errorf("userdel %s: %v %s", u, err, out)
				}
			}
		}
		for _, g := range []string{ctl, att, oc, tools} {
			if _, err := user.LookupGroup(g); err == nil {
				if out, err := exec.Command("groupdel", g).CombinedOutput(); err != nil {
					t.Errorf("groupdel %s: %v %s", g, err, out)
				}
			}
		}
	})

	// A root the service accounts can traverse, as / is.
	tmp, err := os.MkdirTemp("", "clawea-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(tmp, "root")
	emptyBin := filepath.Join(tmp, "bin")
	for _, d := range []string{dest, emptyBin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	install := func() string {
		cmd := exec.Command("deploy/systemd/install.sh", "--root", dest, "--bin", emptyBin, "--port", "22022")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CLAWEA_USER="+att, "CLAWEA_CONTROL_GROUP="+ctl, "OPENCLAW_USER="+oc, "CLAWTOOLS_USER="+tools)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	out := install()
	t.Logf("install.sh:\n%s", out)
	p := func(s string) string { return filepath.Join(dest, s) }
	snapshot := map[string][]byte{}
	for _, f := range []string{"etc/clawea/attester.json", "etc/openclaw/openclaw.json5", "etc/openclaw/gateway.env",
		"etc/openclaw/sandbox-ssh/id_ed25519", "etc/clawea-tools/ssh_host_ed25519_key", "etc/openclaw/sandbox-ssh/known_hosts"} {
		b := testfile.Read(t, p(f))
		snapshot[f] = b
	}
	// Idempotent: a second run generates and replaces nothing of the site's.
	if out := install(); strings.Contains(out, "generated") || strings.Contains(out, "example") || strings.Contains(out, "user ") {
		t.Errorf("second install.sh run created something again:\n%s", out)
	}
	for f, b := range snapshot {
		if now, err := os.ReadFile(p(f)); err != nil || !bytes.Equal(now, b) {
			t.Errorf("second install.sh run changed %s", f)
		}
	}

	// The attester's configuration names the orchestrator's uid, and the
	// units and configurations carry this run's account names.
	ocUser, err := user.Lookup(oc)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Attester struct {
			ControlSocket string
			ControlUids   []int
		} `json:"attester"`
	}
	if err := json.Unmarshal(snapshot["etc/clawea/attester.json"], &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Attester.ControlUids) != 1 || strconv.Itoa(cfg.Attester.ControlUids[0]) != ocUser.Uid {
		t.Errorf("attester.controlUids = %v, want [%s] (the %s account)", cfg.Attester.ControlUids, ocUser.Uid, oc)
	}
	for f, want := range map[string][]string{
		"etc/systemd/system/clawea-attester.service":   {"User=" + att, "Group=" + ctl, "SupplementaryGroups=" + att + " tss"},
		"etc/systemd/system/openclaw.service":          {"User=" + oc, "SupplementaryGroups=" + ctl},
		"etc/systemd/system/clawea-tools-sshd.service": {"User=" + tools},
		"etc/clawea-tools/sshd_config":                 {"AllowUsers " + tools, "Port 22022"},
		"etc/openclaw/openclaw.json5":                  {`target: "` + tools + `@127.0.0.1:22022"`},
		"etc/openclaw/sandbox-ssh/known_hosts":         {"[127.0.0.1]:22022 ssh-ed25519 "},
	} {
		b := testfile.Read(t, p(f))
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q", f, w)
			}
		}
	}
	// The installed OpenClaw configuration passes the preflight for the
	// orchestrator's account, with the installed plugin copy.
	oconf := strings.Replace(string(snapshot["etc/openclaw/openclaw.json5"]), pluginInstallPath, p(pluginInstallPath), 1)
	if rc, out := openclawCheck(t, buildPackctl(t), oconf, oc); rc != 0 {
		t.Errorf("packctl openclaw check --harness-user %s of the installed configuration: exit %d\n%s", oc, rc, out)
	}

	// The runtime directory as systemd makes it (clawea-attester.service:
	// User, Group, RuntimeDirectoryMode) and the socket as the attester must
	// make it (0660, the directory's group).
	u := parseUnit(t, readFile(t, "deploy/systemd/clawea-attester.service"))
	mode, err := strconv.ParseUint(u.one(t, "Service.RuntimeDirectoryMode"), 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	runDir := p("run/" + u.one(t, "Service.RuntimeDirectory"))
	sock := filepath.Join(runDir, filepath.Base(cfg.Attester.ControlSocket))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := func(path, u, g string, mode os.FileMode) {
		t.Helper()
		if out, err := exec.Command("chown", u+":"+g, path).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	owner(runDir, att, ctl, os.FileMode(mode))
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	owner(sock, att, ctl, 0o660)

	// The test binary, where the accounts can run it to dial the socket.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(tmp, "deploy.test")
	if err := os.WriteFile(helper, testfile.Read(t, self), 0o755); err != nil {
		t.Fatal(err)
	}
	as := func(who string, args ...string) error {
		cmd := exec.Command("runuser", append([]string{"-u", who, "--"}, args...)...)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		if err != nil && len(out) > 0 {
			t.Logf("as %s: %v: %s", who, args, strings.TrimSpace(string(out)))
		}
		return err
	}
	dial := func(who string) error {
		return as(who, "env", "CLAWEA_DEPLOY_DIAL="+sock, helper, "-test.run=^TestInstallHelperProcess$")
	}
	can := func(who, what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s cannot %s: %v", who, what, err)
		} else {
			t.Logf("ok: %s can %s", who, what)
		}
	}
	cannot := func(who, what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s can %s", who, what)
		} else {
			t.Logf("ok: %s cannot %s", who, what)
		}
	}

	// The attester.
	can(att, "read its configuration", as(att, "test", "-r", p("etc/clawea/attester.json")))
	can(att, "write its state directory", as(att, "touch", p("var/lib/clawea/probe")))
	can(att, "write the socket directory", as(att, "touch", filepath.Join(runDir, "probe")))
	cannot(att, "read the secrets directory", as(att, "ls", p("etc/clawea/secrets")))
	cannot(att, "read OpenClaw's configuration", as(att, "test", "-r", p("etc/openclaw/openclaw.json5")))

	// The orchestrator.
	can(oc, "connect to the control socket (group)", dial(oc))
	can(oc, "read its configuration", as(oc, "test", "-r", p("etc/openclaw/openclaw.json5")))
	can(oc, "read the sandbox ssh key", as(oc, "test", "-r", p("etc/openclaw/sandbox-ssh/id_ed25519")))
	can(oc, "read the sandbox known_hosts", as(oc, "test", "-r", p("etc/openclaw/sandbox-ssh/known_hosts")))
	can(oc, "write its state directory", as(oc, "touch", p("var/lib/openclaw/probe")))
	can(oc, "read the installed plugin", as(oc, "test", "-r", p(pluginInstallPath+"/openclaw.plugin.json")))
	cannot(oc, "write the socket directory", as(oc, "touch", filepath.Join(runDir, "x")))
	cannot(oc, "replace the socket", as(oc, "mv", "-f", sock, sock+".moved"))
	cannot(oc, "read the attester's configuration", as(oc, "test", "-r", p("etc/clawea/attester.json")))
	cannot(oc, "enter the attester's state", as(oc, "ls", p("var/lib/clawea")))
	cannot(oc, "read the gateway token file (systemd hands it over)", as(oc, "test", "-r", p("etc/openclaw/gateway.env")))
	cannot(oc, "write the installed plugin", as(oc, "touch", p(pluginInstallPath+"/probe")))

	// The model's tools.
	cannot(tools, "connect to the control socket", dial(tools))
	cannot(tools, "enter the socket directory", as(tools, "ls", runDir))
	cannot(tools, "read the attester's configuration", as(tools, "test", "-r", p("etc/clawea/attester.json")))
	cannot(tools, "enter the attester's state", as(tools, "ls", p("var/lib/clawea")))
	cannot(tools, "read OpenClaw's configuration", as(tools, "test", "-r", p("etc/openclaw/openclaw.json5")))
	cannot(tools, "read OpenClaw's ssh key", as(tools, "test", "-r", p("etc/openclaw/sandbox-ssh/id_ed25519")))
	cannot(tools, "enter OpenClaw's state", as(tools, "ls", p("var/lib/openclaw")))
	cannot(tools, "read the gateway token", as(tools, "test", "-r", p("etc/openclaw/gateway.env")))
	cannot(tools, "add an authorized key", as(tools, "test", "-w", p("etc/clawea-tools/authorized_keys")))
	cannot(tools, "change the sshd configuration", as(tools, "test", "-w", p("etc/clawea-tools/sshd_config")))
	can(tools, "read the sshd configuration (sshd runs as it)", as(tools, "test", "-r", p("etc/clawea-tools/sshd_config")))
	can(tools, "read the sshd host key", as(tools, "test", "-r", p("etc/clawea-tools/ssh_host_ed25519_key")))
	can(tools, "write its workspace root", as(tools, "touch", p("var/lib/clawtools/probe")))
	for _, g := range []string{ctl, att, oc} {
		if out, err := exec.Command("id", "-nG", tools).Output(); err != nil || strings.Contains(" "+strings.TrimSpace(string(out))+" ", " "+g+" ") {
			t.Errorf("%s is in group %s (%s %v)", tools, g, out, err)
		}
	}
}
