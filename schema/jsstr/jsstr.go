// Package jsstr implements the few JavaScript (ECMAScript) string behaviours
// that prompt recipes must reproduce exactly: String.prototype.trim,
// String.prototype.toLowerCase, the UTF-16 code-unit ordering used by
// Array.prototype.sort and the < operator, the UTF-16 length, and the own
// property order of objects produced by JSON.parse.
//
// Strings are Go strings holding UTF-8. A JS string can hold a lone
// surrogate, which has no UTF-8 form; callers must refuse such input before
// it gets here (JSON escapes such as "\ud800" are the only way to make one).
// Invalid UTF-8 bytes are treated as U+FFFD, one per byte, as the Go range
// loop does.
package jsstr

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// IsSpace reports whether r is stripped by String.prototype.trim: the
// ECMAScript WhiteSpace and LineTerminator code points (ECMA-262 sections
// 12.2 and 12.3; WhiteSpace includes every Zs code point). U+0085, U+180E
// and U+200B are not in the set.
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ',
		0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// Trim returns s without leading and trailing IsSpace code points, as
// String.prototype.trim does. Unlike strings.TrimSpace it keeps U+0085 and
// strips U+FEFF.
func Trim(s string) string {
	return strings.TrimFunc(s, IsSpace)
}

// Len returns the length of s in UTF-16 code units (the JS .length).
func Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// utf16Key maps a code point to a key whose order is the order of its UTF-16
// encoding: supplementary code points (a high surrogate, 0xD800-0xDBFF,
// first) sort after U+D7FF and before U+E000. The mapping is injective, so
// comparing keys of the first differing code points compares the strings.
func utf16Key(r rune) rune {
	switch {
	case r >= 0x10000:
		return r - 0x10000 + 0xD800 // 0xD800 .. 0x10F7FF, below shifted BMP
	case r >= 0xE000:
		return r + 0x100000 // above every supplementary key
	default:
		return r
	}
}

// Compare compares a and b by UTF-16 code units, lexicographically, as the
// JS < operator and the default Array.prototype.sort comparator do. It
// returns -1, 0 or +1.
func Compare(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ka, kb := utf16Key(ra), utf16Key(rb)
			if ka < kb {
				return -1
			}
			if ka > kb {
				return 1
			}
			// Only distinct invalid bytes (both U+FFFD) get here; fall
			// through and keep scanning as JS would see two U+FFFD.
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	default:
		return 1
	}
}

// filterEmpty returns the elements of ss that are not "" (JS
// .filter(Boolean) on an array of strings), in order. It always returns a
// new slice.
func filterEmpty(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// IsArrayIndex reports whether key is a canonical numeric string of an
// array index: "0", or a decimal without sign or leading zero, whose value
// is below 2^32-1. Such keys are enumerated first, in ascending numeric
// order, on ordinary JS objects.
func IsArrayIndex(key string) bool {
	if key == "" || len(key) > 10 {
		return false
	}
	if key[0] == '0' {
		return key == "0"
	}
	var v uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return false
		}
		v = v*10 + uint64(c-'0')
	}
	return v < 1<<32-1
}

func arrayIndexValue(key string) uint64 {
	var v uint64
	for i := 0; i < len(key); i++ {
		v = v*10 + uint64(key[i]-'0')
	}
	return v
}

// PropertyOrder returns the positions of keys (given in insertion order,
// each key once) in the order JS enumerates the own properties of an
// ordinary object (Object.keys, Object.entries, for-in): array-index keys
// first in ascending numeric order, then the other keys in insertion order.
func PropertyOrder(keys []string) []int {
	idx := make([]int, 0, len(keys))
	var rest []int
	for i, k := range keys {
		if IsArrayIndex(k) {
			idx = append(idx, i)
		} else {
			rest = append(rest, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		va, vb := arrayIndexValue(keys[a]), arrayIndexValue(keys[b])
		switch {
		case va < vb:
			return -1
		case va > vb:
			return 1
		}
		return 0
	})
	return append(idx, rest...)
}
