package schemas

import (
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clawea/attester/schema/charclass"
)

// compilePattern is the regexp engine of the compiled schemas: the
// standard library's (the validator's default), except for the two shapes
// nearly every pattern of the embedded schemas has, which it matches
// without the regexp machine: an anchored run of one ASCII character class
// (^[A-Za-z0-9_-]+$, ^[A-Za-z0-9_-]{43}$) and an anchored literal prefix
// (^did:). A hash or signature string is matched at a bit test per byte
// (charclass), about a tenth of what the one-pass regexp engine spends. The shape
// is read from the pattern's parse by regexp/syntax with the flags
// regexp.Compile uses, so the classes and counts are the standard
// library's own; TestPatternMatchesRegexp and FuzzPattern hold the two
// engines to the same answer.
func compilePattern(expr string) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	if m := simplePattern(re); m != nil {
		return m, nil
	}
	return re, nil
}

// asciiPattern matches ^class{min,max}$ (max < 0: no bound) or ^prefix.
// The compiled regexp it stands for gives it String (the pattern).
type asciiPattern struct {
	*regexp.Regexp
	class    charclass.Set
	min, max int
	prefix   string // set for ^prefix; class, min and max are unused
}

// MatchString reports whether s matches. Every character the class admits
// is ASCII, so a string that matches is all ASCII and its length in bytes
// is its length in characters; a byte of a multi-byte character (or of an
// invalid sequence, which regexp reads as U+FFFD) is outside the class, as
// its character is.
func (p *asciiPattern) MatchString(s string) bool {
	if p.prefix != "" {
		return strings.HasPrefix(s, p.prefix)
	}
	if len(s) < p.min || (p.max >= 0 && len(s) > p.max) {
		return false
	}
	return p.class.All(s)
}

// simplePattern returns the matcher of compiled when its parse is one of
// the two shapes asciiPattern matches, else nil.
func simplePattern(compiled *regexp.Regexp) *asciiPattern {
	re, err := syntax.Parse(compiled.String(), syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return nil
	}
	switch {
	case len(re.Sub) == 2 && re.Sub[1].Op == syntax.OpLiteral && re.Sub[1].Flags&syntax.FoldCase == 0:
		lit := string(re.Sub[1].Rune)
		for _, r := range re.Sub[1].Rune {
			if r >= 128 {
				return nil
			}
		}
		if lit == "" {
			return nil
		}
		return &asciiPattern{Regexp: compiled, prefix: lit}
	case len(re.Sub) == 3 && re.Sub[2].Op == syntax.OpEndText:
		return classRun(compiled, re.Sub[1])
	}
	return nil
}

// classRun returns the matcher of a repetition of one ASCII character
// class (class+ or class{min,max}), else nil.
func classRun(compiled *regexp.Regexp, rep *syntax.Regexp) *asciiPattern {
	p := &asciiPattern{Regexp: compiled}
	switch rep.Op {
	case syntax.OpPlus:
		p.min, p.max = 1, -1
	case syntax.OpRepeat:
		p.min, p.max = rep.Min, rep.Max
	default:
		return nil
	}
	if len(rep.Sub) != 1 || p.min < 1 {
		return nil
	}
	cc := rep.Sub[0]
	if cc.Op != syntax.OpCharClass || len(cc.Rune)%2 != 0 {
		return nil
	}
	for i := 0; i < len(cc.Rune); i += 2 {
		lo, hi := cc.Rune[i], cc.Rune[i+1]
		if lo < 0 || hi >= 128 || lo > hi {
			return nil
		}
		p.class = p.class.Or(charclass.Range(byte(lo), byte(hi)))
	}
	return p
}
