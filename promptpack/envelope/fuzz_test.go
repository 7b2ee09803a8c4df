package envelope

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse: whatever Parse accepts re-encodes to the identical bytes; on
// error nothing is returned and the error is a *ParseError, ErrTooLarge or
// ErrMalformed.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse(data)
		if err != nil {
			if h != nil {
				t.Fatal("header returned with an error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		out, err := h.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted header does not marshal: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("round trip differs:\n%x\n%x", data, out)
		}
		if n, err := PlaintextLen(data); err != nil || n != len(h.Ciphertext)-tagSize {
			t.Fatal("PlaintextLen disagrees")
		}
	})
}

// FuzzParseManifest: an accepted manifest re-encodes to a manifest that
// parses to the same value and re-encodes identically.
func FuzzParseManifest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if m != nil || !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) &&
				!errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrUnknownAlgorithm) &&
				!errors.Is(err, ErrDuplicateKeyID) && !errors.Is(err, ErrTooManyRecipients) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		js, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted manifest does not marshal: %v", err)
		}
		m2, err := ParseManifest(js)
		if err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
		js2, _ := m2.MarshalJSON()
		if !bytes.Equal(js, js2) {
			t.Fatalf("not stable:\n%s\n%s", js, js2)
		}
	})
}

// FuzzParsePublicKey: accepted text is canonical.
func FuzzParsePublicKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatal(err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("round trip %q -> %q", s, k.String())
		}
	})
}

// FuzzParsePrivateKey: accepted text is canonical; errors never echo input.
func FuzzParsePrivateKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParsePrivateKey(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatal(err)
			}
			if len(b) > len(PrivateKeyPrefix)+4 && bytes.Contains([]byte(err.Error()), b[len(PrivateKeyPrefix):]) {
				t.Fatal("error quotes the input")
			}
			return
		}
		out, err := k.AppendSecretText(nil)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatal("round trip differs")
		}
	})
}
