package confdoc

import (
	"errors"
	"strings"

	"github.com/clawea/attester/schema/jsonobj"
)

// Classes of ConfigError.Err beyond the jsonobj sentinels. A decoder
// error matches the jsonobj sentinel of its class (ErrUnknownField,
// ErrMissingField, ErrWrongType, ErrTooLarge, ErrSyntax) and, for a value
// of the right JSON type that is out of its range or set, or a required
// key that is absent, also ErrBadValue.
var (
	// ErrBadValue: a value outside its range, length or set, or a required
	// key that is absent.
	ErrBadValue = errors.New("invalid value")
)

// ConfigError reports where and why a configuration or policy document
// was refused. It is the one error type of every document read through
// this package (the gate configuration, the admission policy, the verify
// policy, the attester configuration). It never quotes a value: values may
// be secrets.
type ConfigError struct {
	// Doc is the document's sentinel (for example the gate's errInvalidConfig);
	// errors.Is matches it, and its text starts the message. May be nil.
	Doc error
	// Key is the JSON path of the value at fault as a user writes it,
	// without the leading "$.": `tools.verifier.scope`, `agents.list[0].id`,
	// `headers["X-A"]`. "" is the document itself.
	Key string
	// Err is the class of the problem: a jsonobj sentinel, ErrBadValue, or
	// the document's own (errors.Is matches it).
	Err error
	// Msg says what is wrong; "" prints Err.
	Msg string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Doc != nil {
		b.WriteString(e.Doc.Error())
		b.WriteString(": ")
	}
	switch {
	case e.Key == "" && e.Msg != "" && e.Err != nil:
		b.WriteString(e.Err.Error() + ": " + e.Msg)
	case e.Key == "":
		b.WriteString(e.problem())
	default:
		b.WriteString(e.Key + ": " + e.problem())
	}
	return b.String()
}

func (e *ConfigError) problem() string {
	if e.Msg != "" || e.Err == nil {
		return e.Msg
	}
	return e.Err.Error()
}

// Unwrap returns Doc and Err.
func (e *ConfigError) Unwrap() []error {
	out := make([]error, 0, 2)
	for _, err := range []error{e.Doc, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Path returns the JSON path of Key: `$.tools.verifier.scope`, or `$` for
// the document itself.
func (e *ConfigError) Path() string { return pathOfKey(e.Key) }

// KeyOf returns the key of a jsonobj path: the path without its leading
// "$." (`$.a.b` -> `a.b`, `$["x y"]` -> `["x y"]`, `$` -> “).
func KeyOf(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, jsonobj.Root), ".")
}

// pathOfKey is the inverse of KeyOf.
func pathOfKey(key string) string {
	switch {
	case key == "":
		return jsonobj.Root
	case key[0] == '[':
		return jsonobj.Root + key
	}
	return jsonobj.Root + "." + key
}

// class is an error of several classes: its text is the first one's (or
// msg), and errors.Is matches each.
type class struct {
	msg  string
	errs []error
}

func (c *class) Error() string   { return c.msg }
func (c *class) Unwrap() []error { return c.errs }

// badValue is ErrBadValue that also matches the jsonobj sentinel of its
// class.
func badValue(sentinel error) error {
	return &class{msg: ErrBadValue.Error(), errs: []error{ErrBadValue, sentinel}}
}

// FromPathError turns a jsonobj error (a *jsonobj.PathError, or anything
// else at the document's root) into a *ConfigError of document doc.
// A *ConfigError is returned as it is, with Doc set when it has none.
func FromPathError(doc, err error) *ConfigError {
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		if ce.Doc == nil {
			ce.Doc = doc
		}
		return ce
	}
	key := ""
	if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
		key, err = KeyOf(pe.Path), pe.Err
	}
	ce := &ConfigError{Doc: doc, Key: key, Err: err}
	if errors.Is(err, jsonobj.ErrUnknownField) {
		ce.Msg = "unknown key"
	}
	return ce
}
