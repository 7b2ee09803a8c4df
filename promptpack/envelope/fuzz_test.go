package envelope

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
)

// FuzzParse: whatever Parse accepts re-encodes to the identical bytes; on
// error nothing is returned and the error is a *parseError, ErrTooLarge or
// ErrMalformed.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, ok := fuzzcheck.RoundTrip(t, data, parse, (*Header).MarshalBinary)
		if !ok {
			if _, err := parse(data); !errors.Is(err, ErrTooLarge) {
				if _, ok := errors.AsType[*parseError](err); !ok {
					t.Fatalf("untyped error %v", err)
				}
			}
			return
		}
		if n, err := plaintextLen(data); err != nil || n != len(h.Ciphertext)-tagSize {
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
				!errors.Is(err, errUnknownVersion) && !errors.Is(err, errUnknownAlgorithm) &&
				!errors.Is(err, errDuplicateKeyID) && !errors.Is(err, errTooManyRecipients) {
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

// FuzzParsePublicKey: accepted text is canonical; the key file form accepts
// exactly the accepted text with or without one trailing LF.
func FuzzParsePublicKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		fk, ferr := parsePublicKeyFile([]byte(s))
		if ferr != nil && !errors.Is(ferr, errInvalidKey) {
			t.Fatal(ferr)
		}
		if ferr == nil && fk.String() != strings.TrimSuffix(s, "\n") {
			t.Fatalf("key file %q -> %q", s, fk.String())
		}
		k, err := ParsePublicKey(s)
		if err == nil && ferr != nil {
			t.Fatalf("text accepted, key file refused: %v", ferr)
		}
		if err != nil {
			if !errors.Is(err, errInvalidKey) {
				t.Fatal(err)
			}
			return
		}
		if k.String() != s {
			t.Fatalf("round trip %q -> %q", s, k.String())
		}
	})
}

// privateKeyErrors are the only error texts ParsePrivateKey and
// ParsePrivateKeyFile may return. They are fixed strings: an error that
// carried any byte of the input (a secret) would not be one of them.
var privateKeyErrors = map[string]bool{
	"envelope: invalid key: malformed private key":      true,
	"envelope: invalid key: non-canonical private key":  true,
	"envelope: invalid key: malformed private key file": true,
}

// FuzzParsePrivateKey: accepted text is canonical, the key file form adds at
// most one LF, and errors never echo input: an error text is one of the
// fixed messages. (Checking that the error does not contain the input's
// bytes flagged inputs that happen to be part of the fixed text, such as
// "...priva".)
func FuzzParsePrivateKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParsePrivateKey(b)
		fk, ferr := ParsePrivateKeyFile(b)
		for _, e := range []error{err, ferr} {
			if e == nil {
				continue
			}
			if !errors.Is(e, errInvalidKey) {
				t.Fatal(e)
			}
			if !privateKeyErrors[e.Error()] {
				t.Fatalf("error text is not a fixed message (it may quote the input): %q", e.Error())
			}
		}
		if (err == nil) != (ferr == nil) {
			// Only the key file form accepts the text and one LF.
			if err == nil || !bytes.HasSuffix(b, []byte("\n")) {
				t.Fatalf("ParsePrivateKey err=%v, ParsePrivateKeyFile err=%v", err, ferr)
			}
			if _, err := ParsePrivateKey(b[:len(b)-1]); err != nil {
				t.Fatalf("key file accepted, its text refused: %v", err)
			}
		}
		if ferr == nil {
			out, err := fk.AppendSecretText(nil)
			if err != nil || !bytes.Equal(out, bytes.TrimSuffix(b, []byte("\n"))) {
				t.Fatal("key file round trip differs")
			}
		}
		if err != nil {
			return
		}
		out, err := k.AppendSecretText(nil)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatal("round trip differs")
		}
	})
}
