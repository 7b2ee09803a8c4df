package buildinfo

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name  string
		stamp string
		bi    *debug.BuildInfo
		want  string
	}{
		{"stamp wins", "v1.2.3-4-gabcdef0-dirty", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3-4-gabcdef0-dirty"},
		{"no build info", "", nil, "devel"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs("vcs.revision", rev)}, "v0.4.0"},
		{"clean revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", rev, "vcs.modified", "false")}, "devel-0123456789ab"},
		{"dirty revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.modified", "true", "vcs.revision", rev)}, "devel-0123456789ab-dirty"},
		{"short revision", "", &debug.BuildInfo{Settings: vcs("vcs.revision", "abc")}, "devel-abc"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"modified without revision", "", &debug.BuildInfo{Settings: vcs("vcs.modified", "true")}, "devel"},
	}
	for _, tc := range tests {
		if got := resolve(tc.stamp, tc.bi); got != tc.want {
			t.Errorf("%s: resolve = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	got := Line("packctl")
	f := strings.Fields(got)
	if len(f) != 4 || f[0] != "packctl" || f[1] != Version() || !strings.HasPrefix(f[2], "go") || !strings.Contains(f[3], "/") {
		t.Fatalf("Line = %q, want \"packctl <version> go<ver> <os>/<arch>\"", got)
	}
}

// TestMakeBuildStamps builds the commands the way release builds do
// (`make build`, which the Dockerfile mirrors) and checks that --version
// prints the stamped version.
func TestMakeBuildStamps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	bin := t.TempDir()
	const stamp = "v0.0.0-stamp-test"
	cmd := exec.Command("make", "-s", "-C", "../../..", "build", "BIN="+bin, "VERSION="+stamp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, name := range []string{"attester", "packctl", "verifier"} {
		out, err := exec.Command(filepath.Join(bin, name), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		f := strings.Fields(string(out))
		if len(f) != 4 || f[0] != name || f[1] != stamp {
			t.Errorf("%s --version = %q, want %q then the Go version and platform", name, out, name+" "+stamp)
		}
	}
}
