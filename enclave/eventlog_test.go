package enclave

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/wire/tpmquote"
)

// TestReadEventLog: the event log is optional evidence, read whole and
// bounded.
func TestReadEventLog(t *testing.T) {
	dir := t.TempDir()
	if b, err := ReadEventLog(""); b != nil || err != nil {
		t.Fatalf("no path: %v %v", b, err)
	}
	if b, err := ReadEventLog(filepath.Join(dir, "absent")); b != nil || err != nil {
		t.Fatalf("absent: %v %v", b, err)
	}
	p := filepath.Join(dir, "CCEL")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadEventLog(p); b != nil || err != nil {
		t.Fatalf("empty: %v %v", b, err)
	}
	if err := os.WriteFile(p, []byte{1, 2, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadEventLog(p); string(b) != "\x01\x02\x03" || err != nil {
		t.Fatalf("log: %v %v", b, err)
	}
	if err := os.WriteFile(p, make([]byte, tpmquote.MaxEventLogSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEventLog(p); !errors.Is(err, errEventLogTooBig) {
		t.Fatalf("too big: %v", err)
	}
}
