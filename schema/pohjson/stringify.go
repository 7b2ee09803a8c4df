package pohjson

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

// Stringify returns the JSON.stringify form of v: compact, members in
// JavaScript property order, JSON.stringify's escapes. It refuses values that
// JavaScript would not reproduce exactly: non-integer numbers, integers beyond
// ±(2^53-1), invalid UTF-8 and duplicate keys.
func Stringify(v *Value) ([]byte, error) {
	return appendValue(nil, v, 0)
}

// Hash returns b64u(SHA-256(Stringify(v))), the PoH payload hash. A
// container parsed with OneCopy whose input text is its Stringify form is
// hashed as that text, without encoding it again.
func Hash(v *Value) (string, error) {
	if form, ok := v.form(); ok {
		return b64u.Encode(hashString(form)), nil
	}
	b, err := Stringify(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return b64u.Encode(sum[:]), nil
}

// hashString is SHA-256 of s, written through a stack buffer rather than
// converted to a []byte copy of s (hash.Hash has no WriteString).
func hashString(s string) []byte {
	h := sha256.New()
	var buf [256]byte
	for len(s) > 0 {
		n := copy(buf[:], s)
		h.Write(buf[:n])
		s = s[n:]
	}
	return h.Sum(buf[:0])
}

// form is the Stringify form the parser kept for a container (OneCopy,
// keepForm), if any.
func (v *Value) form() (string, bool) {
	if v == nil || (v.kind != Object && v.kind != Array) || v.s == "" {
		return "", false
	}
	return v.s, true
}

// FromGo converts a Go value to a Value through encoding/json: struct fields
// keep their declaration order, which is how this project writes documents
// whose field order must match the PoH emitted order. Floats and other
// unsupported values are refused by the strict parser.
func FromGo(x any) (*Value, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return nil, &Error{Offset: -1, Err: errSyntax, Msg: err.Error()}
	}
	return Parse(b)
}

// Marshal is FromGo followed by Stringify.
func Marshal(x any) ([]byte, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return nil, &Error{Offset: -1, Err: errSyntax, Msg: err.Error()}
	}
	// encoding/json usually writes the JSON.stringify form already (it
	// differs in escaping <, >, & and U+2028/9 and in the order of
	// integer-like keys): the parser then keeps b as the root's form
	// (OneCopy), which is exactly what the encoder below would write
	// (FuzzOneCopyForm), so b is returned as it is.
	v, err := ParseWith(b, ParseOptions{OneCopy: true})
	if err != nil {
		return nil, err
	}
	if _, ok := v.form(); ok {
		return b, nil
	}
	// The JSON.stringify form is no longer than encoding/json's, which
	// escapes <, >, & and U+2028/9 where JSON.stringify does not: size the
	// buffer once instead of growing it (a hint only; append still grows).
	return appendValue(make([]byte, 0, len(b)), v, 0)
}

func appendValue(dst []byte, v *Value, depth int) ([]byte, error) {
	if v == nil {
		return nil, &Error{Offset: -1, Err: errSyntax, Msg: "nil value"}
	}
	if depth > defaultMaxDepth {
		return nil, &Error{Offset: -1, Err: ErrTooDeep, Msg: "more than " + strconv.Itoa(defaultMaxDepth) + " levels"}
	}
	// A kept form is used for the value written itself, not for one
	// nested in another: its depth there is not what the parser limited.
	if form, ok := v.form(); ok && depth == 0 {
		return append(dst, form...), nil
	}
	switch v.kind {
	case Null:
		return append(dst, "null"...), nil
	case Bool:
		if v.b {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case Number:
		if v.s != "" {
			return nil, &Error{Offset: -1, Err: errNumber, Msg: "non-integer number " + v.s}
		}
		if v.n > MaxSafeInteger || v.n < -MaxSafeInteger {
			return nil, &Error{Offset: -1, Err: errNumber, Msg: "integer " + strconv.FormatInt(v.n, 10) + " is outside ±(2^53-1)"}
		}
		return strconv.AppendInt(dst, v.n, 10), nil
	case String:
		return appendString(dst, v.s)
	case Array:
		dst = append(dst, '[')
		for i, e := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case Object:
		members, err := jsOrder(v.members)
		if err != nil {
			return nil, err
		}
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendString(dst, m.Key); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendValue(dst, m.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, &Error{Offset: -1, Err: errSyntax, Msg: "unknown kind"}
}

// jsOrder returns members in JavaScript own-property order (array-index keys
// first in ascending numeric order, then the others in insertion order; see
// jsstr.PropertyOrder) and refuses duplicate keys.
func jsOrder(members []Member) ([]Member, error) {
	seen := make(map[string]struct{}, len(members))
	indexed := false
	for _, m := range members {
		if _, dup := seen[m.Key]; dup {
			return nil, &Error{Offset: -1, Err: ErrDuplicateKey, Msg: strconv.Quote(m.Key)}
		}
		seen[m.Key] = struct{}{}
		indexed = indexed || jsstr.IsArrayIndex(m.Key)
	}
	if !indexed {
		return members, nil
	}
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = m.Key
	}
	out := make([]Member, 0, len(members))
	for _, i := range jsstr.PropertyOrder(keys) {
		out = append(out, members[i])
	}
	return out, nil
}

// appendString writes s as JSON.stringify does (ECMAScript QuoteJSONString).
// It refuses invalid UTF-8 (a lone surrogate cannot reach here: the parser
// refuses it).
func appendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, &Error{Offset: -1, Err: errString, Msg: "invalid UTF-8"}
	}
	return jsstr.AppendQuote(dst, s), nil
}
