// Package safetext bounds untrusted text before it is quoted in an error
// or a log line: the result is valid UTF-8, never longer than asked, and
// says that it was cut.
//
// It is the one clip helper of the module; every package that quotes a
// value it did not produce uses it.
package safetext

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks a value that Clip cut.
const Ellipsis = "..."

// Clip returns s cut to at most n bytes on a rune boundary, followed by
// Ellipsis when it was cut. Invalid UTF-8 is replaced by "?" (before the
// cut), so the result is always valid UTF-8. A negative n counts as 0.
func Clip(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if len(s) <= n {
		return s
	}
	return cut(s, max(n, 0)) + Ellipsis
}

// Fit returns s cut so that the result, including the mark "…" (U+2026)
// when it was cut, is at most n bytes and valid UTF-8. It is for outputs
// with a hard byte limit (a chat message). An n too small for the mark
// yields "" for a string that does not fit.
func Fit(s string, n int) string {
	const mark = "…"
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if len(s) <= n {
		return s
	}
	if n < len(mark) {
		return ""
	}
	return cut(s, n-len(mark)) + mark
}

// cut returns the longest prefix of the valid UTF-8 string s of at most n
// bytes that ends on a rune boundary.
func cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
