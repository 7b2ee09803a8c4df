package audit

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseCheckpoint: whatever parseCheckpoint accepts re-encodes to the
// identical bytes, with body the signed prefix; on error it returns nothing
// and the error wraps errCheckpoint. The seed corpus (testdata/fuzz) holds
// a checkpoint Close wrote and near misses.
func FuzzParseCheckpoint(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := parseCheckpoint(data)
		if err != nil {
			if cp != nil || !errors.Is(err, errCheckpoint) {
				t.Fatalf("error %v with %v", err, cp)
			}
			return
		}
		body := appendCheckpointBody(nil, cp.entries)
		if !bytes.Equal(cp.body, body) || !bytes.Equal(appendCheckpointSig(body, cp.sig), data) {
			t.Fatalf("%q re-encodes to %q", data, appendCheckpointSig(body, cp.sig))
		}
		for _, e := range cp.entries {
			if !validRunID(e.run) || e.size < 1 || e.count < 1 || uint64(e.size) < e.count || (e.prev == "") != (e.count == 1) {
				t.Fatalf("accepted entry %+v", e)
			}
		}
	})
}
