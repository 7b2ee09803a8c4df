package schemas

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/pohjson"
)

// embeddedPatterns returns every "pattern" of the embedded schemas.
func embeddedPatterns(t testing.TB) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(v *pohjson.Value)
	walk = func(v *pohjson.Value) {
		for _, m := range v.Members() {
			if s, ok := m.Value.Str(); ok && m.Key == "pattern" {
				seen[s] = true
			}
			walk(m.Value)
		}
		for _, e := range v.Elems() {
			walk(e)
		}
	}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		v, err := pohjson.ParseWith(raw, pohjson.ParseOptions{MaxBytes: maxDocumentBytes, AllowFloats: true})
		if err != nil {
			return err
		}
		walk(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	return out
}

// patternInputs are strings around the edges of the embedded patterns:
// lengths, each class's neighbours, non-ASCII and invalid UTF-8, newlines
// (which $ does not match before).
var patternInputs = []string{
	"", "a", "A", "z", "Z", "0", "9", "_", "-", "=", "+", "/", ".", ":", "*", " ", "\n",
	strings.Repeat("A", 42), strings.Repeat("A", 43), strings.Repeat("A", 44), strings.Repeat("_-", 21) + "a",
	strings.Repeat("A", 42) + "\n", strings.Repeat("A", 42) + "=", "\n" + strings.Repeat("A", 43),
	"did:", "did:key:z6Mk", "DID:key", "xdid:", "did", "did:\n",
	"sha256:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("0", 63), "sha256:" + strings.Repeat("A", 64),
	"eip155:1:0x" + strings.Repeat("a", 40), "0123456789ab", strings.Repeat("f", 64), strings.Repeat("f", 65),
	"abc\u00e9", "\u00e9", "a\xffb", "\xff", "AAAA\x80", "abc.def:*-", "123", "12a",
}

// TestPatternMatchesRegexp holds compilePattern to regexp.Compile's answer
// on every embedded pattern, and checks that the common ones take the
// fast path.
func TestPatternMatchesRegexp(t *testing.T) {
	pats := embeddedPatterns(t)
	fast := 0
	for _, p := range pats {
		if simplePattern(regexp.MustCompile(p)) != nil {
			fast++
		}
		for _, s := range patternInputs {
			samePatternAnswer(t, p, s)
		}
	}
	for _, p := range []string{"^[A-Za-z0-9_-]+$", "^[A-Za-z0-9_-]{43}$", "^did:"} {
		if simplePattern(regexp.MustCompile(p)) == nil {
			t.Errorf("%s does not take the fast path", p)
		}
	}
	if len(pats) < 5 || fast < 3 {
		t.Fatalf("%d embedded patterns, %d on the fast path", len(pats), fast)
	}
}

// samePatternAnswer fails when compilePattern and regexp.Compile disagree
// on whether expr compiles or whether it matches s.
func samePatternAnswer(t *testing.T, expr, s string) {
	t.Helper()
	want, werr := regexp.Compile(expr)
	got, gerr := compilePattern(expr)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: regexp error %v, compilePattern error %v", expr, werr, gerr)
	}
	if werr != nil {
		return
	}
	if got.String() != expr {
		t.Fatalf("%q: String() is %q", expr, got.String())
	}
	if w, g := want.MatchString(s), got.MatchString(s); w != g {
		t.Fatalf("%q on %q: regexp says %v, compilePattern %v", expr, s, w, g)
	}
}

func FuzzPattern(f *testing.F) {
	for _, p := range []string{"^[A-Za-z0-9_-]+$", "^[A-Za-z0-9_-]{43}$", "^did:", "^[a-z]{2,}$", "^[^a]+$", "(?i)^did:", "^[a-c]{0,3}$", "^x$"} {
		for _, s := range []string{"", "abc", "did:x", "DID:", strings.Repeat("a", 43), "\xff"} {
			f.Add(p, s)
		}
	}
	f.Fuzz(func(t *testing.T, expr, s string) {
		if len(expr) > 256 {
			return
		}
		samePatternAnswer(t, expr, s)
	})
}
