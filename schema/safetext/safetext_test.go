package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd..."},
		{"abc\xffd", 8, "abc?d"},
		{"ééé", 3, "é..."}, // 2-byte runes: never cut inside one
		{"ééé", 4, "éé..."},
		{"abc", -1, "..."},
	} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestFit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abcd", 4, "abcd"},
		{"abcdef", 5, "ab…"},
		{"ééé", 5, "é…"},
		{"abcdef", 2, ""},
	} {
		got := Fit(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if len(got) > tc.n {
			t.Errorf("Fit(%q, %d) is %d bytes", tc.in, tc.n, len(got))
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("abc\xff\xfeé", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 256
		c := Clip(s, n)
		if !utf8.ValidString(c) {
			t.Fatalf("Clip(%q, %d) = %q: invalid UTF-8", s, n, c)
		}
		if body := strings.TrimSuffix(c, Ellipsis); len(body) > max(n, 0) && body != c {
			t.Fatalf("Clip(%q, %d) = %q: too long", s, n, c)
		}
		f := Fit(s, n)
		if !utf8.ValidString(f) || len(f) > max(n, 0) && f != s {
			t.Fatalf("Fit(%q, %d) = %q", s, n, f)
		}
	})
}
