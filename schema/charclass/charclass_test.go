package charclass

import (
	"strings"
	"testing"
)

// Every class admits exactly the bytes its definition names, over all 256.
func TestClasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  Set
		want func(c byte) bool
	}{
		{"empty", Set{}, func(byte) bool { return false }},
		{"Lower", Lower(), func(c byte) bool { return 'a' <= c && c <= 'z' }},
		{"Upper", Upper(), func(c byte) bool { return 'A' <= c && c <= 'Z' }},
		{"Digit", Digit(), func(c byte) bool { return '0' <= c && c <= '9' }},
		{"Alnum", Alnum(), func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }},
		{"LowerHex", LowerHex(), func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }},
		{"Of", Of("_.:-"), func(c byte) bool { return c == '_' || c == '.' || c == ':' || c == '-' }},
		{"Of edges", Of("\x00?@\x7f"), func(c byte) bool { return c == 0 || c == '?' || c == '@' || c == 0x7f }},
		{"Range printable", Range(0x21, 0x7e), func(c byte) bool { return 0x21 <= c && c <= 0x7e }},
		{"Range all", Range(0, 0x7f), func(c byte) bool { return c < 0x80 }},
		{"Range empty", Range('b', 'a'), func(byte) bool { return false }},
		{"Or", Lower().Or(Digit(), Of("_-")), func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' }},
	} {
		for i := range 256 {
			c := byte(i)
			if got := tc.set.Contains(c); got != tc.want(c) {
				t.Errorf("%s: Contains(0x%02x) = %v", tc.name, c, got)
			}
			if got := tc.set.All("a" + string(c)); got != (tc.want('a') && tc.want(c)) {
				t.Errorf("%s: All(%q) = %v", tc.name, "a"+string(c), got)
			}
		}
	}
}

func TestAll(t *testing.T) {
	id := Lower().Or(Digit(), Of("_-"))
	for s, want := range map[string]bool{
		"":                              true,
		"agent_1-x":                     true,
		"Agent":                         false,
		"a b":                           false,
		"a\x00":                         false,
		"é":                             false,
		"a\xff":                         false,
		strings.Repeat("a", 1000) + "Z": false,
	} {
		if got := id.All(s); got != want {
			t.Errorf("All(%q) = %v", s, got)
		}
	}
	var ok bool
	if n := testing.AllocsPerRun(100, func() { ok = id.All("agent_1-x") }); n != 0 || !ok {
		t.Errorf("All allocates %v times", n)
	}
}

func TestNonASCIIPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"Of":    func() { Of("a\x80") },
		"Range": func() { Range('a', 0xff) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a non-ASCII byte did not panic", name)
				}
			}()
			f()
		}()
	}
}
