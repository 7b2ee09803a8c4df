//go:build linux

package sealed

import (
	"context"
	"errors"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// FuzzUnseal feeds arbitrary blobs to a development sealer: it must never
// panic, must return a Buffer only with no error, and every error must be
// one of the documented classes.
func FuzzUnseal(f *testing.F) {
	vec := testfile.Hex(f, devVectorHex)
	f.Add("test/vector", vec)
	f.Add("test/other", vec)
	f.Add("test/vector", vec[:len(vec)-1])
	ds, err := NewDevSealer(testDevKey(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer ds.Destroy()
	f.Fuzz(func(t *testing.T, label string, blob []byte) {
		buf, err := ds.Unseal(context.Background(), label, blob)
		if err != nil {
			if buf != nil {
				t.Fatal("buffer returned with an error")
			}
			if !errors.Is(err, errMalformedBlob) && !errors.Is(err, errAuthFailed) &&
				!errors.Is(err, errKindMismatch) && !errors.Is(err, errInvalidLabel) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		defer buf.Destroy()
		if buf.Len() == 0 || !buf.Locked() {
			t.Fatalf("accepted blob gave %v", buf)
		}
	})
}
