package openclawsig

import (
	"errors"
	"strconv"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// fieldError is the error of the strict JSON reader: where and why.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.err.Error()
	}
	return strconv.Quote(e.path) + ": " + e.err.Error()
}

func (e *fieldError) Unwrap() error { return e.err }

// jsonReader walks one JSON document that jsonobj parsed strictly (valid
// UTF-8, no unpaired surrogate escapes, which a JS string would keep and
// encoding/json would turn into U+FFFD; no duplicate keys; keys compared
// case-sensitively; nothing after the value). Object members are visited in
// document order. The reader has a cursor: object and array set it to each
// member or element before calling their function, and the read functions
// read the value under it.
type jsonReader struct {
	cur *pohjson.Value
}

func newJSONReader(data []byte) (*jsonReader, error) {
	// The callers bound the size; AllowFloats keeps a non-integer number
	// a value of the wrong type rather than a syntax error.
	root, err := jsonobj.Parse(data, pohjson.ParseOptions{MaxBytes: max(len(data), 1), AllowFloats: true})
	if err != nil {
		if pe, ok := errors.AsType[*pohjson.Error](err); ok && errors.Is(pe, pohjson.ErrDuplicateKey) {
			return nil, &fieldError{path: elemsPath(pe.Path), err: errDuplicateField}
		}
		return nil, &fieldError{err: errMalformedJSON}
	}
	return &jsonReader{cur: root}, nil
}

// elemsPath formats a pohjson error path in this package's path syntax.
func elemsPath(elems []any) string {
	path := ""
	for _, e := range elems {
		switch e := e.(type) {
		case string:
			path = childPath(path, e)
		case int:
			path = indexPath(path, e)
		}
	}
	return path
}

func childPath(path, key string) string {
	key = quoteKey(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// object reads an object or null. fn is called once per key, in document
// order, with the cursor on the member's value.
func (r *jsonReader) object(path string, fn func(key, keyPath string) error) (present bool, err error) {
	v := r.cur
	switch v.Kind() {
	case pohjson.Null:
		return false, nil
	case pohjson.Object:
	default:
		return false, &fieldError{path: path, err: errWrongType}
	}
	ms := v.Members()
	if len(ms) > maxJSONContainerLen {
		return false, &fieldError{path: path, err: errTooLarge}
	}
	for _, m := range ms {
		r.cur = m.Value
		if err := fn(m.Key, childPath(path, m.Key)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// array reads an array or null; fn is called per element with the cursor
// on it.
func (r *jsonReader) array(path string, fn func(i int, elemPath string) error) (present bool, err error) {
	v := r.cur
	switch v.Kind() {
	case pohjson.Null:
		return false, nil
	case pohjson.Array:
	default:
		return false, &fieldError{path: path, err: errWrongType}
	}
	es := v.Elems()
	if len(es) > maxJSONContainerLen {
		return false, &fieldError{path: path, err: errTooLarge}
	}
	for i, e := range es {
		r.cur = e
		if err := fn(i, indexPath(path, i)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// str reads a string or null (nil).
func (r *jsonReader) str(path string) (*string, error) {
	switch v := r.cur; v.Kind() {
	case pohjson.Null:
		return nil, nil
	case pohjson.String:
		s, _ := v.Str()
		return &s, nil
	}
	return nil, &fieldError{path: path, err: errWrongType}
}

// reqStr reads a string; null is refused.
func (r *jsonReader) reqStr(path string) (string, error) {
	s, err := r.str(path)
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", &fieldError{path: path, err: errMissingField}
	}
	return *s, nil
}

// optStr reads a string; null gives "".
func (r *jsonReader) optStr(path string) (string, error) {
	s, err := r.str(path)
	if err != nil || s == nil {
		return "", err
	}
	return *s, nil
}

// boolean reads a boolean or null (nil).
func (r *jsonReader) boolean(path string) (*bool, error) {
	switch v := r.cur; v.Kind() {
	case pohjson.Null:
		return nil, nil
	case pohjson.Bool:
		b, _ := v.Bool()
		return &b, nil
	}
	return nil, &fieldError{path: path, err: errWrongType}
}

// strings reads an array of strings (null elements refused) or null.
func (r *jsonReader) strings(path string) ([]string, error) {
	var out []string
	_, err := r.array(path, func(_ int, p string) error {
		s, err := r.reqStr(p)
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// uint reads a non-negative integer written without fraction or exponent.
func (r *jsonReader) uint(path string) (int64, error) {
	n, ok := r.cur.Int()
	if !ok || n < 0 {
		return 0, &fieldError{path: path, err: errWrongType}
	}
	return n, nil
}
