package admission

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/schema/jcs"
)

// FuzzParse: whatever Parse accepts hashes as JCS of the input, reparses
// from its canonical bytes to the same policy hash, and can be applied to
// a pack without panicking; on error nothing is returned. Seeds: the
// policy files in testdata and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.policy.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed policies: %v", err)
	}
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)))
	}
	pack := testPack(f, nil, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatal("policy returned with an error")
			}
			var pe *PolicyError
			if !errors.As(err, &pe) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		want, err := jcs.Hash(data)
		if err != nil || p.Hash() != want {
			t.Fatalf("hash %q, want %q (%v)", p.Hash(), want, err)
		}
		q, err := Parse(p.Canonical())
		if err != nil || q.Hash() != p.Hash() || !bytes.Equal(q.Canonical(), p.Canonical()) {
			t.Fatalf("canonical bytes do not reparse: %v", err)
		}
		if err := p.Admit(pack); err != nil {
			var re *RuleError
			if !errors.As(err, &re) && !errors.Is(err, ErrUnreadable) {
				t.Fatalf("untyped admission error: %v", err)
			}
		}
		_ = p.CheckRuntime(Runtime{})
	})
}
