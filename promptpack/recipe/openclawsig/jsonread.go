package openclawsig

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"
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

// jsonReader reads one JSON value token by token, so that object keys come
// in document order, keys are matched case-sensitively (unlike
// encoding/json struct decoding), duplicates are seen, and anything the
// caller does not expect is refused. The input must be valid UTF-8 without
// unpaired surrogate escapes: encoding/json would silently turn those into
// U+FFFD, while a JS string keeps them.
type jsonReader struct {
	dec *json.Decoder
}

func newJSONReader(data []byte) (*jsonReader, error) {
	if !utf8.Valid(data) || !surrogatesPaired(data) {
		return nil, &fieldError{err: ErrMalformedJSON}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &jsonReader{dec: dec}, nil
}

// surrogatesPaired reports whether every \uD800-\uDBFF escape inside a JSON
// string is directly followed by a \uDC00-\uDFFF escape, and no low
// surrogate escape stands alone. Syntax errors are left to the decoder.
func surrogatesPaired(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(data) {
				return true // truncated: the decoder reports it
			}
			if data[i+1] != 'u' {
				i++ // skip the escaped byte
				continue
			}
			v, ok := hex4(data, i+2)
			if !ok {
				return true // malformed escape: the decoder reports it
			}
			i += 5
			switch {
			case v >= 0xDC00 && v <= 0xDFFF:
				return false
			case v >= 0xD800 && v <= 0xDBFF:
				if i+2 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
					return false
				}
				lo, ok := hex4(data, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return false
				}
				i += 6
			}
		}
	}
	return true
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var v rune
	for _, c := range data[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
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

func (r *jsonReader) token(path string) (json.Token, error) {
	t, err := r.dec.Token()
	if err != nil {
		return nil, &fieldError{path: path, err: ErrMalformedJSON}
	}
	return t, nil
}

// end checks that nothing follows the value that was read.
func (r *jsonReader) end() error {
	if _, err := r.dec.Token(); err != io.EOF {
		return &fieldError{err: ErrMalformedJSON}
	}
	return nil
}

// object reads an object or null. fn is called once per key, in document
// order, and must consume the value. Duplicate keys are refused.
func (r *jsonReader) object(path string, fn func(key, keyPath string) error) (present bool, err error) {
	t, err := r.token(path)
	if err != nil {
		return false, err
	}
	if t == nil {
		return false, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return false, &fieldError{path: path, err: ErrWrongType}
	}
	seen := make(map[string]struct{})
	for r.dec.More() {
		kt, err := r.token(path)
		if err != nil {
			return false, err
		}
		key, ok := kt.(string)
		if !ok {
			return false, &fieldError{path: path, err: ErrMalformedJSON}
		}
		kp := childPath(path, key)
		if _, dup := seen[key]; dup {
			return false, &fieldError{path: kp, err: ErrDuplicateField}
		}
		if len(seen) >= maxJSONContainerLen {
			return false, &fieldError{path: path, err: ErrTooLarge}
		}
		seen[key] = struct{}{}
		if err := fn(key, kp); err != nil {
			return false, err
		}
	}
	if _, err := r.token(path); err != nil { // '}'
		return false, err
	}
	return true, nil
}

// array reads an array or null; fn is called per element and must consume it.
func (r *jsonReader) array(path string, fn func(i int, elemPath string) error) (present bool, err error) {
	t, err := r.token(path)
	if err != nil {
		return false, err
	}
	if t == nil {
		return false, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return false, &fieldError{path: path, err: ErrWrongType}
	}
	for i := 0; r.dec.More(); i++ {
		if i >= maxJSONContainerLen {
			return false, &fieldError{path: path, err: ErrTooLarge}
		}
		if err := fn(i, indexPath(path, i)); err != nil {
			return false, err
		}
	}
	if _, err := r.token(path); err != nil { // ']'
		return false, err
	}
	return true, nil
}

// str reads a string or null (nil).
func (r *jsonReader) str(path string) (*string, error) {
	t, err := r.token(path)
	if err != nil {
		return nil, err
	}
	switch v := t.(type) {
	case nil:
		return nil, nil
	case string:
		return &v, nil
	}
	return nil, r.wrongType(path, t)
}

// reqStr reads a string; null is refused.
func (r *jsonReader) reqStr(path string) (string, error) {
	s, err := r.str(path)
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", &fieldError{path: path, err: ErrMissingField}
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
	t, err := r.token(path)
	if err != nil {
		return nil, err
	}
	switch v := t.(type) {
	case nil:
		return nil, nil
	case bool:
		return &v, nil
	}
	return nil, r.wrongType(path, t)
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

// wrongType reports a value of an unexpected type. An object or array that
// starts here is not consumed: the caller stops at the first error.
func (r *jsonReader) wrongType(path string, _ json.Token) error {
	return &fieldError{path: path, err: ErrWrongType}
}

// uint reads a non-negative integer written without fraction or exponent.
func (r *jsonReader) uint(path string) (int64, error) {
	t, err := r.token(path)
	if err != nil {
		return 0, err
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, &fieldError{path: path, err: ErrWrongType}
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || v < 0 {
		return 0, &fieldError{path: path, err: ErrWrongType}
	}
	return v, nil
}
