package gate_test

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/gate/internal/goldengen"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/auditrec"
)

// TestDecisionsGolden pins the decisions and the exact audit bytes of a
// fixed sequence of calls (goldengen), so that speed work on the decision
// path cannot change either, and checks that the log verifies with one
// record per call.
func TestDecisionsGolden(t *testing.T) {
	r, err := goldengen.Decisions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := testfile.Read(t, goldengen.Path)
	if !bytes.Equal(r.Audit, want) {
		t.Fatalf("audit bytes differ from %s (go generate ./gate rewrites it):\n%s", goldengen.Path, r.Audit)
	}
	root, count, err := auditrec.Verify(bytes.NewReader(r.Audit))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	if n := uint64(r.Calls); count != n || r.Count != n || root != r.Root {
		t.Fatalf("audit log: %d records (writer %d), want %d", count, r.Count, n)
	}
}
