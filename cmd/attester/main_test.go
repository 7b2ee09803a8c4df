package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	att := `"controlSocket":"` + filepath.Join(dir, "ctl", "c.sock") + `","trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"`
	bad, good := filepath.Join(dir, "bad.json"), filepath.Join(dir, "good.json")
	os.WriteFile(bad, []byte(`{"attester":{`+att+`,"platform":"sgx"}}`), 0o600)
	os.WriteFile(good, []byte(`{"attester":{`+att+`}}`), 0o600)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 1, "Usage"},
		{[]string{"--config", filepath.Join(dir, "missing.json")}, 1, "cannot read config"},
		{[]string{"--config", bad}, 1, "attester.platform"},
		// An endless config is refused by its size limit, not read whole.
		{[]string{"--config", "/dev/zero"}, 1, "larger than"},
		{[]string{"--config", bad, "--log-level", "loud"}, 1, "Usage"},
		{[]string{"--config", good, "--gc-percent", "0"}, 1, "Usage"},
		{[]string{"--config", good, "--gc-percent", "-1"}, 1, "Usage"},
		// The flags are checked as the keys they override, before
		// anything is opened.
		{[]string{"--config", good, "--platform", "sgx"}, 1, "attester.platform"},
		{[]string{"--config", good, "--listen", "not-an-addr"}, 1, "attester.listen"},
		{[]string{"-h"}, 0, "-config"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if code := run(tt.args, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%v) = %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ctl")); err == nil {
		t.Error("the control socket directory was created although a flag is invalid")
	}
}
