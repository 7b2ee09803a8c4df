// Package jsonobj reads JSON documents strictly into checked Go values.
//
// It is the one strict JSON object reader of the module. Documents are
// parsed by schema/pohjson (RFC 8259, UTF-8 only, unpaired surrogates and
// duplicate keys refused, keys compared case-sensitively, nothing after the
// value); a Reader then walks the tree and checks members, types and
// limits. A Reader keeps the first error, so a caller reads a whole
// document and asks Err once at the end.
//
// Every error is a *PathError carrying the JSON path of the value it is
// about (for example `$.templates[2].sha256`) and wrapping one of the
// sentinels below; paths quote keys with safetext.Clip, never values.
package jsonobj

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// Errors. Each *PathError wraps exactly one of them (ErrSyntax also wraps
// the pohjson error).
var (
	// ErrSyntax: the input is not one strict JSON value.
	ErrSyntax = errors.New("invalid json")
	// ErrUnknownField: a member the format does not define.
	ErrUnknownField = errors.New("unknown field")
	// ErrMissingField: a required member is absent, or a collection has
	// fewer entries than its minimum.
	ErrMissingField = errors.New("missing field")
	// ErrWrongType: a value has another JSON type, or an invalid value.
	ErrWrongType = errors.New("wrong type or value")
	// ErrTooLarge: a value exceeds a size or count limit.
	ErrTooLarge = errors.New("too large")
)

// Root is the path of the document itself.
const Root = "$"

// maxKeyInPath bounds a key quoted in a path.
const maxKeyInPath = 64

// PathError reports where a document was refused. Path is a JSON path such
// as `$.sources.templates["x.txt"].text`; it never holds a value.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *PathError) Unwrap() error { return e.Err }

// Key returns the path of member key of the object at path: `path.key` for
// an identifier-like key, `path["key"]` (clipped) otherwise.
func Key(path, key string) string {
	if isIdent(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(safetext.Clip(key, maxKeyInPath)) + "]"
}

// Index returns the path of element i of the array at path.
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func isIdent(s string) bool {
	return s != "" && len(s) <= maxKeyInPath && identStart.Contains(s[0]) && identChars.All(s[1:])
}

var (
	identStart = charclass.Lower().Or(charclass.Upper(), charclass.Of("_"))
	identChars = identStart.Or(charclass.Digit())
)

// pathOf formats a pohjson.Error path (keys and indexes) as a JSON path.
func pathOf(elems []any) string {
	path := Root
	for _, e := range elems {
		switch e := e.(type) {
		case string:
			path = Key(path, e)
		case int:
			path = Index(path, e)
		}
	}
	return path
}

// ParseObject parses data strictly with opts and returns the root value,
// which must be an object. Errors are *PathError wrapping ErrSyntax and the
// pohjson error (so errors.Is(err, pohjson.ErrDuplicateKey) works), at the
// path where parsing failed (a repeated key: the path of that key);
// ErrTooLarge at Root when the input exceeds opts.MaxBytes; ErrWrongType at
// Root when the root is not an object.
func ParseObject(data []byte, opts pohjson.ParseOptions) (*pohjson.Value, error) {
	v, err := pohjson.ParseWith(data, opts)
	if err != nil {
		if errors.Is(err, pohjson.ErrTooLarge) {
			return nil, &PathError{Path: Root, Err: fmt.Errorf("%w: %w", ErrTooLarge, err)}
		}
		path := Root
		if pe, ok := errors.AsType[*pohjson.Error](err); ok {
			path = pathOf(pe.Path)
		}
		return nil, &PathError{Path: path, Err: fmt.Errorf("%w: %w", ErrSyntax, err)}
	}
	if v.Kind() != pohjson.Object {
		return nil, &PathError{Path: Root, Err: fmt.Errorf("%w: not an object", ErrWrongType)}
	}
	return v, nil
}

// Reader walks a parsed tree and keeps the first error. The zero value is
// ready to use. Methods given a nil value (an absent optional member) do
// nothing and return the zero result, except where noted.
type Reader struct{ err *PathError }

// Err returns the first error, a *PathError, or nil.
func (r *Reader) Err() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// Fail records err at path unless an error is already recorded. err should
// wrap one of the package sentinels (or a caller's own sentinel).
func (r *Reader) Fail(path string, err error) {
	if r.err == nil {
		r.err = &PathError{Path: path, Err: err}
	}
}

// Failf records a formatted error wrapping sentinel at path.
func (r *Reader) Failf(path string, sentinel error, format string, args ...any) {
	r.Fail(path, fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...)))
}

// Object checks that v is an object whose members are all in allowed
// (true: required, false: optional) and returns them by name. Unknown
// members are reported before missing ones; the returned map never holds
// an unknown member. A nil v is reported as a wrong type (use Optional
// values with an "if v != nil" guard).
func (r *Reader) Object(v *pohjson.Value, path string, allowed map[string]bool) map[string]*pohjson.Value {
	out := make(map[string]*pohjson.Value, len(allowed))
	if v.Kind() != pohjson.Object {
		r.Fail(path, fmt.Errorf("%w: not an object", ErrWrongType))
		return out
	}
	for _, m := range v.Members() {
		if _, ok := allowed[m.Key]; !ok {
			r.Fail(Key(path, m.Key), ErrUnknownField)
			continue
		}
		out[m.Key] = m.Value
	}
	if r.err == nil {
		if name, ok := firstMissing(allowed, out); ok {
			r.Fail(Key(path, name), ErrMissingField)
		}
	}
	return out
}

// firstMissing returns the least (in byte order) required name of allowed
// that present lacks: the one a sorted walk would report first. It neither
// sorts nor allocates, as Object runs on every object of every request.
func firstMissing(allowed map[string]bool, present map[string]*pohjson.Value) (string, bool) {
	var first string
	found := false
	for name, required := range allowed {
		if required && present[name] == nil && (!found || name < first) {
			first, found = name, true
		}
	}
	return first, found
}

// Members checks that v is an object with min..max members and returns
// them in document order (for maps keyed by the document). Fewer than min
// is ErrMissingField, more than max ErrTooLarge.
func (r *Reader) Members(v *pohjson.Value, path string, min, max int) []pohjson.Member {
	if v.Kind() != pohjson.Object {
		r.Fail(path, fmt.Errorf("%w: not an object", ErrWrongType))
		return nil
	}
	return counted(r, path, v.Members(), min, max)
}

// Array checks that v is an array with min..max elements and returns them.
// Fewer than min is ErrMissingField, more than max ErrTooLarge.
func (r *Reader) Array(v *pohjson.Value, path string, min, max int) []*pohjson.Value {
	if v.Kind() != pohjson.Array {
		r.Fail(path, fmt.Errorf("%w: not an array", ErrWrongType))
		return nil
	}
	return counted(r, path, v.Elems(), min, max)
}

// counted returns items when there are min..max of them; fewer than min is
// ErrMissingField, more than max ErrTooLarge.
func counted[T any](r *Reader, path string, items []T, min, max int) []T {
	switch {
	case len(items) > max:
		r.Fail(path, ErrTooLarge)
		return nil
	case len(items) < min:
		r.Fail(path, ErrMissingField)
		return nil
	}
	return items
}

// Str returns the string v and whether it is one; a nil v returns ("",
// false) without an error, any other type records ErrWrongType.
func (r *Reader) Str(v *pohjson.Value, path string) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.Str()
	if !ok {
		r.Fail(path, fmt.Errorf("%w: not a string", ErrWrongType))
	}
	return s, ok
}

// Ident returns the string v, checked non-empty (ErrMissingField) and at
// most max bytes (ErrTooLarge). pohjson already guarantees valid UTF-8.
func (r *Reader) Ident(v *pohjson.Value, path string, max int) string {
	s, ok := r.Str(v, path)
	if !ok {
		return ""
	}
	switch {
	case s == "":
		r.Fail(path, ErrMissingField)
	case len(s) > max:
		r.Fail(path, ErrTooLarge)
	}
	return s
}

// Bytes returns the string v as bytes (nil when v is nil or not a string).
func (r *Reader) Bytes(v *pohjson.Value, path string) []byte {
	s, ok := r.Str(v, path)
	if !ok {
		return nil
	}
	return []byte(s)
}

// B64u returns the decoded unpadded base64url string v. n > 0 requires
// exactly n decoded bytes; n <= 0 accepts any length.
func (r *Reader) B64u(v *pohjson.Value, path string, n int) []byte {
	s, ok := r.Str(v, path)
	if !ok {
		return nil
	}
	b, err := b64u.Decode(s)
	if err != nil {
		r.Fail(path, fmt.Errorf("%w: not base64url", ErrWrongType))
		return nil
	}
	if n > 0 && len(b) != n {
		r.Fail(path, fmt.Errorf("%w: not base64url of %d bytes", ErrWrongType, n))
		return nil
	}
	return b
}

// Bool returns the boolean v; a nil v returns false without an error.
func (r *Reader) Bool(v *pohjson.Value, path string) bool {
	if v == nil {
		return false
	}
	b, ok := v.Bool()
	if !ok {
		r.Fail(path, fmt.Errorf("%w: not a boolean", ErrWrongType))
	}
	return b
}

// Int returns the integer v checked in [min, max]; a nil v returns 0
// without an error. Non-integers are ErrWrongType, integers out of range
// ErrTooLarge above max and ErrWrongType below min.
func (r *Reader) Int(v *pohjson.Value, path string, min, max int64) int64 {
	if v == nil {
		return 0
	}
	n, ok := v.Int()
	switch {
	case !ok:
		r.Fail(path, fmt.Errorf("%w: not an integer", ErrWrongType))
		return 0
	case n > max:
		r.Fail(path, ErrTooLarge)
	case n < min:
		r.Fail(path, fmt.Errorf("%w: below %d", ErrWrongType, min))
	}
	return n
}

// stringList returns the array of strings v with min..max elements, each at
// most maxLen bytes (maxLen <= 0: no limit; empty strings are allowed).
func (r *Reader) stringList(v *pohjson.Value, path string, min, max, maxLen int) []string {
	es := r.Array(v, path, min, max)
	if es == nil {
		return nil
	}
	out := make([]string, 0, len(es))
	for i, e := range es {
		p := Index(path, i)
		s, ok := r.Str(e, p)
		if !ok {
			if e == nil {
				r.Fail(p, fmt.Errorf("%w: not a string", ErrWrongType))
			}
			return nil
		}
		if maxLen > 0 && len(s) > maxLen {
			r.Fail(p, ErrTooLarge)
			return nil
		}
		out = append(out, s)
	}
	return out
}
