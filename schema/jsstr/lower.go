package jsstr

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ToLower returns s lower-cased as JS String.prototype.toLowerCase does
// (V8 with ICU, locale independent): the Unicode default full lower-case
// mapping. Compared with strings.ToLower it adds
//
//   - the unconditional SpecialCasing rule U+0130 -> U+0069 U+0307;
//   - the Final_Sigma rule: U+03A3 becomes U+03C2 when it is preceded by a
//     cased letter and not followed by one (case-ignorable code points in
//     between are skipped), else U+03C3;
//   - the case mappings and Cased / Case_Ignorable properties that Unicode
//     16.0 and 17.0 added after the Unicode 15.0 tables of the Go standard
//     library (see unicode17.go). The result matches Node v20.20.2
//     (Unicode 17.0, ICU 78.2) on every code point.
func ToLower(s string) string {
	// Fast path: ASCII without upper case letters is unchanged.
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch r {
		case 0x0130:
			b.WriteString("i\u0307")
		case 0x03A3:
			if precededByCased(s[:i]) && !followedByCased(s[i+utf8.RuneLen(r):]) {
				b.WriteRune(0x03C2)
			} else {
				b.WriteRune(0x03C3)
			}
		default:
			b.WriteRune(lowerRune(r))
		}
	}
	return b.String()
}

// lowerRune is the simple lower-case mapping of r at Unicode 17.0.
func lowerRune(r rune) rune {
	if l, ok := lower17[r]; ok {
		return l
	}
	if off, ok := lowerRange17(r); ok {
		return r + off
	}
	return unicode.ToLower(r)
}

// isCased reports the Unicode 17.0 Cased property of r.
func isCased(r rune) bool {
	if inTable(r, casedAdded17) {
		return true
	}
	if inTable(r, casedRemoved17) {
		return false
	}
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// isCaseIgnorable reports the Unicode 17.0 Case_Ignorable property of r.
func isCaseIgnorable(r rune) bool {
	if inTable(r, ignorableAdded17) {
		return true
	}
	if inTable(r, ignorableRemoved17) {
		return false
	}
	switch r {
	// Word_Break MidLetter, MidNumLet and Single_Quote.
	case 0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
		0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// precededByCased scans before backwards: case-ignorable code points are
// skipped (even when also cased, as ICU does); the first other code point
// decides.
func precededByCased(before string) bool {
	for before != "" {
		r, n := utf8.DecodeLastRuneInString(before)
		before = before[:len(before)-n]
		if isCaseIgnorable(r) {
			continue
		}
		return isCased(r)
	}
	return false
}

// followedByCased is precededByCased in the forward direction.
func followedByCased(after string) bool {
	for after != "" {
		r, n := utf8.DecodeRuneInString(after)
		after = after[n:]
		if isCaseIgnorable(r) {
			continue
		}
		return isCased(r)
	}
	return false
}

func inTable(r rune, t [][2]rune) bool {
	for _, rg := range t {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}
