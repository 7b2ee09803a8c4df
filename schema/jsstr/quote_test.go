package jsstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonQuote is the reference: encoding/json without HTML escaping writes
// the JSON.stringify escapes except that it escapes U+2028 and U+2029,
// which JSON.stringify (and JCS) write as is; so each character is encoded
// on its own and those two are kept raw.
func jsonQuote(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == 0x2028 || r == 0x2029 {
			b.WriteRune(r)
			continue
		}
		var one strings.Builder
		enc := json.NewEncoder(&one)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(r)); err != nil {
			t.Fatal(err)
		}
		q := strings.TrimSuffix(one.String(), "\n")
		b.WriteString(q[1 : len(q)-1])
	}
	b.WriteByte('"')
	return b.String()
}

func TestAppendQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"abc", `"abc"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"\x7f<>&/", "\"\x7f<>&/\""},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"é€😀", `"é€😀"`},
		// Longer than a word: the eight-byte fast path, with the byte to
		// escape at each place of a word and after non-ASCII text.
		{"abcdefgh\"ijklmnop", `"abcdefgh\"ijklmnop"`},
		{"abcdefghijklmno\\", `"abcdefghijklmno\\"`},
		{"abcdefg\nhijklmnopq\x1f", `"abcdefg\nhijklmnopq\u001f"`},
		{"éééééééé\x00ééé", `"éééééééé\u0000ééé"`},
		{"ÿÀ\u009f¢Ü€ÿ\u0080\x7f", "\"ÿÀ\u009f¢Ü€ÿ\u0080\x7f\""},
	}
	for _, tt := range tests {
		if got := string(AppendQuote([]byte("x"), tt.in)); got != "x"+tt.want {
			t.Errorf("AppendQuote(%q) = %s, want x%s", tt.in, got, tt.want)
		}
		if got := string(AppendEscape(nil, tt.in)); got != tt.want[1:len(tt.want)-1] {
			t.Errorf("AppendEscape(%q) = %s, want %s", tt.in, got, tt.want[1:len(tt.want)-1])
		}
	}
}

// TestAppendEscapeWord puts each ASCII byte at each place of five words,
// after plain or non-ASCII text: the word test of the fast path must find
// exactly the bytes the reference escapes.
func TestAppendEscapeWord(t *testing.T) {
	for _, fill := range []string{"a", "é"} {
		for b := range 0x80 {
			for at := range 40 {
				s := strings.Repeat(fill, at) + string(rune(b)) + strings.Repeat(fill, 40-at)
				if got, want := string(AppendQuote(nil, s)), jsonQuote(t, s); got != want {
					t.Fatalf("AppendQuote(%q) = %s, encoding/json %s", s, got, want)
				}
			}
		}
	}
}

func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "a\"\\\x00\x1f\x7f", "\u2028<&>", `\u2028`, "😀\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := string(AppendQuote(nil, s)), jsonQuote(t, s); got != want {
			t.Fatalf("AppendQuote(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}
