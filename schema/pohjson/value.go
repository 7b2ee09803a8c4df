// Package pohjson is the JSON layer of the Proof-of-Harness (PoH) protocol.
//
// PoH hashes payloads as JavaScript's JSON.stringify emits them (not JCS):
// compact, object keys in JavaScript property order (array-index keys first in
// ascending numeric order, then the other keys in insertion order), no HTML
// escaping, U+2028 and U+2029 written raw, and only the escapes JSON.stringify
// itself produces. This package parses JSON into an ordered Value, refusing
// what it cannot reproduce exactly (floats, integers beyond 2^53-1, negative
// zero, lone surrogates, invalid UTF-8, duplicate keys), and writes the
// JSON.stringify form.
//
// The rules are normative in docs/spec/hashing-and-envelopes.md.
package pohjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON kinds.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
	// absent is the Kind of a nil *Value: a member that does not exist.
	absent Kind = 255
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	case absent:
		return "absent"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER: the largest integer
// every JSON implementation in the PoH ecosystem reads exactly.
const MaxSafeInteger = 1<<53 - 1

// Value is an immutable-by-convention JSON value that keeps object member order.
type Value struct {
	kind Kind
	b    bool
	// plain: a string Parse read without an escape sequence (Unescaped).
	plain bool
	n     int64
	// s is, for a String, the string; for a Number with floats allowed,
	// the literal; for an Array or Object parsed with OneCopy, its input
	// text when that is its Stringify form (keepForm), else "".
	s       string
	arr     []*Value
	members []Member
}

// Member is one object member.
type Member struct {
	Key   string
	Value *Value
}

// NewNull returns JSON null.
func NewNull() *Value { return &Value{kind: Null} }

// NewBool returns a JSON boolean.
func NewBool(b bool) *Value { return &Value{kind: Bool, b: b} }

// NewString returns a JSON string. s must be valid UTF-8; Stringify refuses
// it otherwise.
func NewString(s string) *Value { return &Value{kind: String, s: s} }

// NewInt returns a JSON integer. Stringify refuses integers outside the safe
// range.
func NewInt(n int64) *Value { return &Value{kind: Number, n: n} }

// NewArray returns a JSON array of the given elements.
func NewArray(elems ...*Value) *Value { return &Value{kind: Array, arr: elems} }

// NewObject returns a JSON object with members in insertion order. Duplicate
// keys make Stringify fail.
func NewObject(members ...Member) *Value { return &Value{kind: Object, members: members} }

// M is shorthand for a Member.
func M(key string, v *Value) Member { return Member{Key: key, Value: v} }

// The accessors below are safe on a nil *Value (an absent member), so
// lookups can be chained: v.Get("a").Get("b").Str().

// Kind returns v's JSON type, or Absent for nil.
func (v *Value) Kind() Kind {
	if v == nil {
		return absent
	}
	return v.kind
}

// Bool returns the boolean and whether v is one.
func (v *Value) Bool() (bool, bool) {
	if v == nil {
		return false, false
	}
	return v.b, v.kind == Bool
}

// Int returns the integer and whether v is an integer number.
func (v *Value) Int() (int64, bool) {
	if v == nil {
		return 0, false
	}
	return v.n, v.kind == Number && v.s == ""
}

// Str returns the string and whether v is one.
func (v *Value) Str() (string, bool) {
	if v == nil || v.kind != String {
		return "", false
	}
	return v.s, true
}

// Unescaped reports whether v is a string that Parse read without an
// escape sequence: its text then holds no quote, backslash or control
// character, so JSON.stringify (and JCS, RFC 8785) write it as its bytes
// between two quotes, with nothing to escape. It is false for a string
// made with NewString.
func (v *Value) Unescaped() bool { return v != nil && v.kind == String && v.plain }

// Elems returns the array elements (nil unless v is an array).
func (v *Value) Elems() []*Value {
	if v == nil || v.kind != Array {
		return nil
	}
	return v.arr
}

// Members returns the object members in insertion order (nil unless v is an
// object).
func (v *Value) Members() []Member {
	if v == nil || v.kind != Object {
		return nil
	}
	return v.members
}

// Get returns the member value for key, or nil.
func (v *Value) Get(key string) *Value {
	for _, m := range v.Members() {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// Has reports whether v is an object with a member named key.
func (v *Value) Has(key string) bool { return v.Get(key) != nil }

// GetString returns the string member key and whether it exists as a string.
func (v *Value) GetString(key string) (string, bool) {
	m := v.Get(key)
	if m == nil {
		return "", false
	}
	return m.Str()
}

// Sentinel errors; every error from this package wraps one of them.
var (
	errSyntax       = errors.New("invalid JSON")
	ErrDuplicateKey = errors.New("duplicate object key")
	errNumber       = errors.New("unsupported number")
	errString       = errors.New("unrepresentable string")
	ErrTooLarge     = errors.New("input too large")
	ErrTooDeep      = errors.New("nesting too deep")
	// ErrNotCanonical: valid JSON, but not the JSON.stringify form of its
	// value (ParseOptions.Canonical).
	ErrNotCanonical = errors.New("not in JSON.stringify form")
)

// Error is a parse or encoding error with the byte offset where it occurred
// (-1 when encoding).
type Error struct {
	Offset int
	Err    error // one of the sentinels
	Msg    string
	// Path leads from the root to the value where parsing failed: object
	// keys (string) and array indexes (int), outermost first. For
	// ErrDuplicateKey it ends with the repeated key. Nil when encoding.
	Path []any
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("pohjson: %v: %s", e.Err, e.Msg)
	}
	return fmt.Sprintf("pohjson: %v: %s at offset %d", e.Err, e.Msg, e.Offset)
}

func (e *Error) Unwrap() error { return e.Err }

// Interface returns v as encoding/json decodes it with UseNumber: objects
// as map[string]any, arrays as []any, numbers as json.Number holding the
// literal as written (an integer literal re-formats to itself: the parser
// refuses leading zeros, "+" and "-0"), strings, bools and nil. It lets a
// document parsed once be handed to code that takes decoded JSON (a JSON
// Schema validator) without decoding the bytes a second time.
func (v *Value) Interface() any {
	switch v.Kind() {
	case Bool:
		return v.b
	case Number:
		if v.s != "" {
			return json.Number(v.s)
		}
		return json.Number(strconv.FormatInt(v.n, 10))
	case String:
		return v.s
	case Array:
		out := make([]any, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.Interface()
		}
		return out
	case Object:
		out := make(map[string]any, len(v.members))
		for _, m := range v.members {
			out[m.Key] = m.Value.Interface()
		}
		return out
	}
	return nil
}
