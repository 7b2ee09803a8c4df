package b64u

import (
	"bytes"
	"errors"
	"strings"
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
		got, err = Decode([]byte(tt.want))
		if err != nil || !bytes.Equal(got, tt.in) {
			t.Errorf("Decode([]byte(%q)) = %x, %v; want %x", tt.want, got, err, tt.in)
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
		if b, err := Decode(s); !errors.Is(err, errMalformed) || b != nil {
			t.Errorf("Decode(%q) = %x, %v; want errMalformed", s, b, err)
		}
		if b, err := Decode([]byte(s)); !errors.Is(err, errMalformed) || b != nil {
			t.Errorf("Decode([]byte(%q)) = %x, %v; want errMalformed", s, b, err)
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
		if _, err := DecodeHash(s); !errors.Is(err, errMalformed) {
			t.Errorf("DecodeHash(%q) err = %v, want errMalformed", s, err)
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
		if bb, berr := Decode([]byte(s)); !bytes.Equal(bb, b) || (berr == nil) != (err == nil) || (err != nil && berr.Error() != err.Error()) {
			t.Fatalf("Decode(%q) = %x, %v; from bytes %x, %v", s, b, err, bb, berr)
		}
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
			if err != nil && (got != nil || !errors.Is(err, errMalformed)) {
				t.Fatalf("Decode(%q) = %x, %v", s, got, err)
			}
		}
	}
}

func TestAppendEncode(t *testing.T) {
	var buf [43]byte
	sum := make([]byte, 32)
	sum[0] = 0xfb
	got := AppendEncode(buf[:0], sum)
	if string(got) != Encode(sum) || &got[0] != &buf[0] || EncodedLen(32) != 43 {
		t.Fatalf("AppendEncode = %q, want %q in place", got, Encode(sum))
	}
	if n := testing.AllocsPerRun(100, func() { AppendEncode(buf[:0], sum) }); n != 0 {
		t.Fatalf("AppendEncode allocates %v times", n)
	}
}

// TestValidHash: ValidHash accepts exactly what DecodeHash accepts, for
// every byte in every position of a digest and for every length.
func TestValidHash(t *testing.T) {
	agree := func(s string) {
		t.Helper()
		_, err := DecodeHash(s)
		if ValidHash(s) != (err == nil) {
			t.Fatalf("ValidHash(%q) = %v, DecodeHash error %v", s, ValidHash(s), err)
		}
	}
	h := SHA256([]byte("x"))
	for _, pos := range []int{0, 1, 21, 41, 42} {
		for c := range 256 {
			s := []byte(h)
			s[pos] = byte(c)
			agree(string(s))
		}
	}
	for n := range 46 {
		agree(strings.Repeat("A", n))
	}
	for i := range 100 {
		agree(SHA256([]byte{byte(i)}))
	}
	var ok bool
	if n := testing.AllocsPerRun(100, func() { ok = ValidHash(h) }); n != 0 || !ok {
		t.Fatalf("ValidHash allocates %v times", n)
	}
}

func TestDecodeTo(t *testing.T) {
	for n := range 40 {
		want := bytes.Repeat([]byte{0xa5}, n)
		dst := make([]byte, n)
		if err := DecodeTo(dst, []byte(Encode(want))); err != nil || !bytes.Equal(dst, want) {
			t.Fatalf("DecodeTo %d bytes: %x, %v", n, dst, err)
		}
	}
	good := Encode(bytes.Repeat([]byte{0xa5}, 32))
	for _, s := range []string{
		"", good[:42], good + "A", good[:42] + "=", good[:41] + "==", // length, padding
		good[:20] + "\n" + good[21:], good[:20] + "\r" + good[21:], good[:42] + "\n", // CR, LF
		good[:20] + "+" + good[21:], good[:20] + "/" + good[21:], good[:20] + " " + good[21:], // alphabet
		good[:42] + "B", // non-zero trailing bits
	} {
		dst := bytes.Repeat([]byte{0xff}, 32)
		err := DecodeTo(dst, []byte(s))
		if !errors.Is(err, errMalformed) {
			t.Errorf("DecodeTo(%q) err = %v, want errMalformed", s, err)
		}
		if !bytes.Equal(dst, make([]byte, 32)) {
			t.Errorf("DecodeTo(%q) left %x in dst", s, dst)
		}
		if err != nil && strings.Contains(err.Error(), s[:min(len(s), 8)]) && s != "" {
			t.Errorf("DecodeTo(%q) quotes its input: %v", s, err)
		}
	}
	var dst [32]byte
	src := []byte(good)
	if n := testing.AllocsPerRun(100, func() { _ = DecodeTo(dst[:], src) }); n != 0 {
		t.Fatalf("DecodeTo allocates %v times", n)
	}
}

// FuzzDecodeTo checks that DecodeTo accepts exactly what Decode accepts.
func FuzzDecodeTo(f *testing.F) {
	for _, s := range []string{"", "AA", "_w", "Zm9vYmFy", "AA==", "Zm9v\nYmFy", "AB", SHA256(nil), SHA256(nil)[:42] + "B"} {
		f.Add(s, uint8(len(s)*3/4))
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		want, err := Decode(s)
		ok := err == nil && len(want) == int(n)
		dst := make([]byte, n)
		if err := DecodeTo(dst, []byte(s)); (err == nil) != ok || ok && !bytes.Equal(dst, want) {
			t.Fatalf("DecodeTo(%d bytes, %q) = %x, %v; Decode = %x, %v", n, s, dst, err, want, err)
		}
	})
}

// FuzzValidHash checks that ValidHash accepts exactly what DecodeHash
// accepts (moved here from wire/auditrec's FuzzIsHash with the check).
func FuzzValidHash(f *testing.F) {
	f.Add(SHA256(nil))
	f.Add(strings.Repeat("A", 42) + "B")
	f.Add(strings.Repeat("A", 41) + "\nA")
	f.Fuzz(func(t *testing.T, s string) {
		_, err := DecodeHash(s)
		if ValidHash(s) != (err == nil) {
			t.Fatalf("ValidHash(%q) = %v, DecodeHash err %v", s, ValidHash(s), err)
		}
	})
}

// BenchmarkDecodeBytes decodes a 6 KiB segment given as bytes (a compact
// JWS payload, as evidencedoc splits it): in place, or through a string
// copy (what the caller did before Decode took bytes).
func BenchmarkDecodeBytes(b *testing.B) {
	seg := []byte(Encode(bytes.Repeat([]byte("evidence"), 768)))
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(seg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("string-copy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(string(seg)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
