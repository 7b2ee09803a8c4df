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
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"attester":{`+att+`,"platform":"sgx"}}`), 0o600)
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
		{[]string{"-h"}, 0, "-config"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		if code := run(tt.args, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%v) = %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
}
