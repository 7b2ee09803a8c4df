package b64u

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, ""},
		{[]byte{0}, "AA"},
		{[]byte{0xff}, "_w"},
		{[]byte{0xfb, 0xff}, "-_8"},
		{[]byte("foobar"), "Zm9vYmFy"},
		{[]byte{0xfa, 0xfb, 0xfc, 0xfd}, "-vv8_Q"},
	}
	for _, tt := range tests {
		if got := Encode(tt.in); got != tt.want {
			t.Errorf("Encode(%x) = %q, want %q", tt.in, got, tt.want)
		}
		got, err := Decode(tt.want)
		if err != nil || !bytes.Equal(got, tt.in) {
			t.Errorf("Decode(%q) = %x, %v; want %x", tt.want, got, err, tt.in)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, s := range []string{
		"AA==", "AA=", "Zm9vYmE=", // padding
		"Zm9v+mFy", "Zm9v/mFy", // standard alphabet
		"Zm9v\nYmFy", "Zm9v\rYmFy", "Zm9v YmFy", " AA", "AA\n", "\tAA", // whitespace
		"A", "AAAAA", // impossible length
		"AB", "_x", "AAB", // non-zero trailing bits
		"Zm9v\x00", "é", "Zm9vYmF\xff",
	} {
		if b, err := Decode(s); !errors.Is(err, ErrMalformed) || b != nil {
			t.Errorf("Decode(%q) = %x, %v; want ErrMalformed", s, b, err)
		}
	}
}

func TestSHA256(t *testing.T) {
	// SHA-256 of the empty string.
	if got, want := SHA256(nil), "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"; got != want {
		t.Fatalf("SHA256(nil) = %q, want %q", got, want)
	}
	h, err := DecodeHash(SHA256([]byte("x")))
	if err != nil || Encode(h[:]) != SHA256([]byte("x")) {
		t.Fatalf("DecodeHash round trip: %v", err)
	}
	for _, s := range []string{"", "AA", SHA256(nil) + "A", SHA256(nil)[:42] + "="} {
		if _, err := DecodeHash(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeHash(%q) err = %v, want ErrMalformed", s, err)
		}
	}
}

// FuzzDecode checks that whatever Decode accepts re-encodes to the identical
// string, and that nothing is returned on error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "AA", "_w", "Zm9vYmFy", "AA==", "Zm9v\nYmFy", "AB", "-vv8_Q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Decode(s)
		if err != nil {
			if b != nil {
				t.Fatalf("Decode(%q) returned data with error", s)
			}
			return
		}
		if got := Encode(b); got != s {
			t.Fatalf("Decode(%q) re-encodes to %q", s, got)
		}
	})
}

// TestAlphabetTable: the lookup table Decode scans with admits exactly the
// RFC 4648 section 5 alphabet, and Decode refuses every other byte in
// every position of a 4-character group.
func TestAlphabetTable(t *testing.T) {
	for c := range 256 {
		b := byte(c)
		want := b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_'
		if inAlphabet(b) != want {
			t.Fatalf("inAlphabet(0x%02x) = %v", b, !want)
		}
		for pos := range 4 {
			s := []byte("AAAA")
			s[pos] = b
			got, err := Decode(string(s))
			if want != (err == nil) {
				t.Fatalf("Decode(%q): %v", s, err)
			}
			if err != nil && (got != nil || !errors.Is(err, ErrMalformed)) {
				t.Fatalf("Decode(%q) = %x, %v", s, got, err)
			}
		}
	}
}
