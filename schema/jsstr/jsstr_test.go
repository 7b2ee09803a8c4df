package jsstr

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestTrim(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"  abc  ", "abc"},
		{"\t\n\v\f\r abc \r\n", "abc"},
		{"\u00a0\u3000x\ufeff", "x"},
		{"\ufeffBOM", "BOM"},
		{"\u1680\u2000\u2005\u200ax\u2028\u2029\u202f\u205f", "x"},
		{"\u200bx\u200b", "\u200bx\u200b"}, // zero-width space kept
		{"\u0085x\u0085", "\u0085x\u0085"}, // NEL kept
		{"\u180ex\u180e", "\u180ex\u180e"}, // Mongolian vowel separator kept
		{"\u001cx\u001f", "\u001cx\u001f"}, // information separators kept
		{"a \u00a0 b", "a \u00a0 b"},       // inner space kept
		{" \u3000 ", ""},
		{"\u2009\u200b", "\u200b"},
	}
	for _, tc := range tests {
		if got := Trim(tc.in); got != tc.want {
			t.Errorf("Trim(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
	// Go's strings.TrimSpace differs exactly on U+0085 and U+FEFF.
	if strings.TrimSpace("\u0085") != "" || Trim("\u0085") == "" {
		t.Error("U+0085 difference with strings.TrimSpace not reproduced")
	}
	if strings.TrimSpace("\ufeff") == "" || Trim("\ufeff") != "" {
		t.Error("U+FEFF difference with strings.TrimSpace not reproduced")
	}
}

func TestIsSpaceExact(t *testing.T) {
	// The complete set, as Node reports it for every code point.
	want := []rune{0x9, 0xa, 0xb, 0xc, 0xd, 0x20, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002,
		0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029,
		0x202f, 0x205f, 0x3000, 0xfeff}
	var got []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if IsSpace(r) {
			got = append(got, r)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("IsSpace set = %x, want %x", got, want)
	}
}

func TestLen(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 1},
		{"e\u0301", 2},
		{"😀", 2},
		{"👩‍💻", 5},
		{"\U0010FFFF", 2},
		{"\uffff", 1},
		{"\xff", 1}, // invalid byte counts as U+FFFD
	}
	for _, tc := range tests {
		if got := Len(tc.in); got != tc.want {
			t.Errorf("Len(%+q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestToLower(t *testing.T) {
	// Expected values are Node v20.20.2 String.prototype.toLowerCase results.
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc_1", "abc_1"},
		{"READ", "read"},
		{"ΟΔΟΣ", "οδος"},
		{"Σ", "σ"},
		{"ΑΣ.", "ας."},
		{"ΑΣ.Α", "ασ.α"},
		{"Σ Α", "σ α"},
		{"ΑΣ\u0301", "ας\u0301"},
		{"Α\u0345Σ", "α\u0345ς"},
		{"ΑΣ\u00adΒ", "ασ\u00adβ"},
		{"ΑΣΣ", "ασς"},
		{"ΑΣ😀", "ας😀"},
		{"Σ😀", "σ😀"},
		{"ΑΣ1", "ας1"},
		{"\u0295Σ", "\u0295σ"}, // U+0295 is not Cased in Unicode 17
		{"İstanbul", "i\u0307stanbul"},
		{"ÄRGER", "ärger"},
		{"STRASSE", "strasse"},
		{"Straße", "straße"},
		{"ẞ", "ß"},
		{"ＦＵＬＬ", "ｆｕｌｌ"},
		{"\u1c89", "\u1c8a"},
		{"\ua7cb\ua7dc", "ɤƛ"},
		{"\U00010d50", "\U00010d70"},
		{"\U00016ea0", "\U00016ebb"},
		{"Ω", "ω"},
		{"K", "k"},
		{"Å", "å"},
		{"ǅ", "ǆ"},
		{"\U00010400", "\U00010428"},
	}
	for _, tc := range tests {
		if got := ToLower(tc.in); got != tc.want {
			t.Errorf("ToLower(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
	// The two differences with strings.ToLower that the recipe depends on.
	if strings.ToLower("İ") == ToLower("İ") || strings.ToLower("ΟΔΟΣ") == ToLower("ΟΔΟΣ") {
		t.Error("expected ToLower to differ from strings.ToLower on İ and final sigma")
	}
}

func TestCompareAndSort(t *testing.T) {
	in := []string{"zeta", "😀smile", "\ue000private", "ｆｕｌｌ", "Z", "a", "", "ab", "\uffff", "\U00010000", "é"}
	// Node: [...].sort()
	want := []string{"", "Z", "a", "ab", "zeta", "é", "\U00010000", "😀smile", "\ue000private", "ｆｕｌｌ", "\uffff"}
	got := slices.Clone(in)
	slices.SortStableFunc(got, Compare)
	if !slices.Equal(got, want) {
		t.Errorf("sorted by Compare = %+q, want %+q", got, want)
	}
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "a", 0},
		{"a", "b", -1},
		{"b", "a", 1},
		{"a", "ab", -1},
		{"😀", "\ue000", -1}, // byte order would say +1
		{"\ue000", "😀", 1},
		{"😀", "\ud7ff", 1},
		{"\U00010000", "\U0010ffff", -1},
	}
	for _, tc := range tests {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%+q, %+q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFilterEmpty(t *testing.T) {
	in := []string{"", "a", " ", "", "\u200b"}
	got := filterEmpty(in)
	if want := []string{"a", " ", "\u200b"}; !slices.Equal(got, want) {
		t.Errorf("FilterEmpty = %+q, want %+q", got, want)
	}
	if got := filterEmpty(nil); got == nil || len(got) != 0 {
		t.Errorf("FilterEmpty(nil) = %#v, want empty non-nil", got)
	}
}

func TestIsArrayIndex(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0", true}, {"7", true}, {"42", true}, {"4294967294", true},
		{"4294967295", false}, {"4294967296", false}, {"99999999999", false},
		{"", false}, {"01", false}, {"00", false}, {"-1", false}, {"+1", false},
		{" 7", false}, {"7 ", false}, {"1e3", false}, {"1.0", false}, {"٣", false},
	}
	for _, tc := range tests {
		if got := IsArrayIndex(tc.in); got != tc.want {
			t.Errorf("IsArrayIndex(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPropertyOrder(t *testing.T) {
	keys := []string{"b", " 7", "7", "01", "4294967294", "4294967295", "0", "-1", "10", "2"}
	// Node: Object.keys(JSON.parse(...)) with these keys in this order.
	want := []string{"0", "2", "7", "10", "4294967294", "b", " 7", "01", "4294967295", "-1"}
	var got []string
	for _, i := range PropertyOrder(keys) {
		got = append(got, keys[i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("PropertyOrder = %q, want %q", got, want)
	}
	if got := PropertyOrder(nil); len(got) != 0 {
		t.Errorf("PropertyOrder(nil) = %v", got)
	}
}

func utf16Compare(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func FuzzCompare(f *testing.F) {
	f.Add("a", "b")
	f.Add("😀", "\ue000")
	f.Add("ｆ", "\U00010000")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		if got, want := Compare(a, b), utf16Compare(a, b); got != want {
			t.Fatalf("Compare(%+q, %+q) = %d, UTF-16 order %d", a, b, got, want)
		}
		if Compare(a, b) != -Compare(b, a) {
			t.Fatal("Compare is not antisymmetric")
		}
		if Len(a) != len(utf16.Encode([]rune(a))) {
			t.Fatal("Len differs from UTF-16 length")
		}
	})
}

func FuzzIsArrayIndex(f *testing.F) {
	for _, s := range []string{"0", "01", "4294967294", "4294967295", "-1", "", "7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := strconv.ParseUint(s, 10, 64)
		// Canonical: parses, re-encodes to the identical string, below 2^32-1.
		want := err == nil && strconv.FormatUint(v, 10) == s && v < 1<<32-1
		if got := IsArrayIndex(s); got != want {
			t.Fatalf("IsArrayIndex(%q) = %v, want %v", s, got, want)
		}
	})
}

func FuzzToLowerTrim(f *testing.F) {
	f.Add("ΟΔΟΣ İ")
	f.Add("\ufeff x \u0085")
	f.Fuzz(func(t *testing.T, s string) {
		l := ToLower(s)
		if utf8.ValidString(s) && !utf8.ValidString(l) {
			t.Fatalf("ToLower(%+q) produced invalid UTF-8", s)
		}
		tr := Trim(s)
		if Trim(tr) != tr {
			t.Fatalf("Trim not idempotent on %+q", s)
		}
		if !strings.Contains(s, tr) {
			t.Fatalf("Trim(%+q) = %+q is not a substring", s, tr)
		}
	})
}
