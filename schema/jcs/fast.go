package jcs

import (
	"slices"
	"unicode/utf8"

	"github.com/clawea/attester/schema/jsstr"
)

// appendCanonical appends the RFC 8785 canonical form of data to dst, with
// the same checks and result as canonicalize. Small documents of the common
// shape (ASCII member names, integer numbers, no surrogate escapes) are
// canonicalized in one pass without building a tree; everything else, and
// every input that would be refused, goes through canonicalize, which alone
// decides errors.
func appendCanonical(dst, data []byte) ([]byte, error) {
	if len(data) <= fastMaxBytes {
		f := fast{data: data, out: dst}
		if f.value(0) && f.end() {
			return f.out, nil
		}
	}
	c, err := canonicalize(data)
	if err != nil {
		return dst, err
	}
	return append(dst, c...), nil
}

// Limits of the fast path (beyond them, the general path runs).
const (
	fastMaxBytes = 64 << 10
	fastMaxDepth = 16
	fastMaxInt   = 15 // digits: always an exact IEEE 754 double
)

// fast is a one-pass canonicalizer that gives up (returns false) on
// anything it does not handle exactly; its output is then discarded.
type fast struct {
	data []byte
	i    int
	out  []byte
}

type member struct {
	key        []byte // raw ASCII name, no escapes
	start, end int    // the value's bytes in data
}

func (f *fast) ws() {
	for f.i < len(f.data) {
		switch f.data[f.i] {
		case ' ', '\t', '\n', '\r':
			f.i++
		default:
			return
		}
	}
}

func (f *fast) end() bool {
	f.ws()
	return f.i == len(f.data)
}

func (f *fast) value(depth int) bool {
	f.ws()
	if f.i >= len(f.data) {
		return false
	}
	switch c := f.data[f.i]; {
	case c == '{':
		return depth < fastMaxDepth && f.object(depth+1)
	case c == '[':
		return depth < fastMaxDepth && f.array(depth+1)
	case c == '"':
		return f.str()
	case c == '-' || c >= '0' && c <= '9':
		return f.number()
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(f.data)-f.i >= len(lit) && string(f.data[f.i:f.i+len(lit)]) == lit {
				f.out = append(f.out, lit...)
				f.i += len(lit)
				return true
			}
		}
		return false
	}
}

func (f *fast) array(depth int) bool {
	f.i++ // '['
	f.out = append(f.out, '[')
	f.ws()
	if f.i < len(f.data) && f.data[f.i] == ']' {
		f.i++
		f.out = append(f.out, ']')
		return true
	}
	for {
		if !f.value(depth) {
			return false
		}
		f.ws()
		if f.i >= len(f.data) {
			return false
		}
		switch f.data[f.i] {
		case ',':
			f.i++
			f.out = append(f.out, ',')
		case ']':
			f.i++
			f.out = append(f.out, ']')
			return true
		default:
			return false
		}
	}
}

// object reads the members, sorts them by name and writes each value in
// that order. Names MUST be plain ASCII (no escapes), for which UTF-16
// order is byte order.
func (f *fast) object(depth int) bool {
	f.i++ // '{'
	var stack [16]member
	ms := stack[:0]
	f.ws()
	if f.i < len(f.data) && f.data[f.i] == '}' {
		f.i++
		f.out = append(f.out, '{', '}')
		return true
	}
	for {
		f.ws()
		if f.i >= len(f.data) || f.data[f.i] != '"' {
			return false
		}
		f.i++
		ks := f.i
		for f.i < len(f.data) && f.data[f.i] != '"' {
			if c := f.data[f.i]; c < 0x20 || c >= 0x80 || c == '\\' {
				return false
			}
			f.i++
		}
		if f.i >= len(f.data) {
			return false
		}
		key := f.data[ks:f.i]
		f.i++
		f.ws()
		if f.i >= len(f.data) || f.data[f.i] != ':' {
			return false
		}
		f.i++
		f.ws()
		// Canonicalize the value now (it checks it and finds its end),
		// then drop the output: it is written again in sorted order.
		mark, vs := len(f.out), f.i
		if !f.value(depth) {
			return false
		}
		f.out = f.out[:mark]
		ms = append(ms, member{key: key, start: vs, end: f.i})
		f.ws()
		if f.i >= len(f.data) {
			return false
		}
		if f.data[f.i] == ',' {
			f.i++
			continue
		}
		if f.data[f.i] != '}' {
			return false
		}
		f.i++
		break
	}
	slices.SortFunc(ms, func(a, b member) int { return compareBytes(a.key, b.key) })
	f.out = append(f.out, '{')
	for j, m := range ms {
		if j > 0 {
			if compareBytes(ms[j-1].key, m.key) == 0 {
				return false // duplicate name: the general path refuses it
			}
			f.out = append(f.out, ',')
		}
		f.out = append(f.out, '"')
		f.out = append(f.out, m.key...)
		f.out = append(f.out, '"', ':')
		data, i := f.data, f.i
		f.data, f.i = data[:m.end], m.start
		ok := f.value(depth)
		f.data, f.i = data, i
		if !ok {
			return false
		}
	}
	f.out = append(f.out, '}')
	return true
}

func compareBytes(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

// number accepts integers of at most fastMaxInt digits, other than -0,
// whose canonical form is their literal.
func (f *fast) number() bool {
	s := f.i
	if f.data[f.i] == '-' {
		f.i++
	}
	ds := f.i
	for f.i < len(f.data) && f.data[f.i] >= '0' && f.data[f.i] <= '9' {
		f.i++
	}
	digits := f.data[ds:f.i]
	switch {
	case len(digits) == 0 || len(digits) > fastMaxInt:
		return false
	case digits[0] == '0' && (len(digits) > 1 || ds > s): // leading zero, -0
		return false
	}
	if f.i < len(f.data) {
		switch f.data[f.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	f.out = append(f.out, f.data[s:f.i]...)
	return true
}

// str copies a string in JCS form: escapes resolved, then only '"', '\\'
// and control characters escaped (the short forms where JSON has them).
// Surrogate escapes and invalid UTF-8 are left to the general path.
func (f *fast) str() bool {
	f.i++ // '"'
	f.out = append(f.out, '"')
	for f.i < len(f.data) {
		c := f.data[f.i]
		switch {
		case c == '"':
			f.i++
			f.out = append(f.out, '"')
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if f.i+1 >= len(f.data) {
				return false
			}
			e := f.data[f.i+1]
			f.i += 2
			switch e {
			case '"', '\\':
				f.out = append(f.out, '\\', e)
			case '/':
				f.out = append(f.out, '/')
			case 'b', 'f', 'n', 'r', 't':
				f.out = append(f.out, '\\', e)
			case 'u':
				if f.i+4 > len(f.data) {
					return false
				}
				var r rune
				for _, h := range f.data[f.i : f.i+4] {
					var v byte
					switch {
					case h >= '0' && h <= '9':
						v = h - '0'
					case h >= 'a' && h <= 'f':
						v = h - 'a' + 10
					case h >= 'A' && h <= 'F':
						v = h - 'A' + 10
					default:
						return false
					}
					r = r<<4 | rune(v)
				}
				f.i += 4
				if r >= 0xd800 && r <= 0xdfff {
					return false
				}
				f.out = jsstr.AppendEscape(f.out, string(r))
			default:
				return false
			}
		case c < utf8.RuneSelf:
			f.out = append(f.out, c)
			f.i++
		default:
			r, n := utf8.DecodeRune(f.data[f.i:])
			if r == utf8.RuneError && n <= 1 {
				return false
			}
			f.out = append(f.out, f.data[f.i:f.i+n]...)
			f.i += n
		}
	}
	return false
}
