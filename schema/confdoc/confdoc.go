// Package confdoc reads configuration and policy documents strictly from a
// declaration of their fields.
//
// A document format is a Go struct whose `conf` tags give, in one place,
// each member's exact key, its JSON type (the field's Go type), whether it
// is required, its range, length or count, its allowed values and its
// default. Decode walks a tree parsed strictly by schema/jsonobj
// (duplicate keys refused, keys case-sensitive, nothing after the
// document) and fills the struct. A key the struct does not declare is
// refused with its path (`tools.denny`) unless Options.Foreign passes it
// over explicitly; a key that differs from a declared one only in case is
// always refused. Every error is a *ConfigError.
//
// Tag syntax: `conf:"key[,option]..."` with the options
//
//	required        the member must be present
//	min=N, max=N    integers: the value; strings: the length in bytes;
//	                slices and maps: the number of entries
//	enum=a|b|c      strings: the allowed values
//	default=V       strings, integers, booleans: the value when absent
//	unique          slices of strings or integers: no entry twice
//
// Field types: string, bool, int, int64, *T (nil when absent), []T, map[string]T
// (a JSON object with any keys), a struct (a JSON object with the declared
// keys), *pohjson.Value (any JSON value, read by the caller) and any type
// whose pointer implements Unmarshaler. A struct whose pointer implements
// Checker is checked after its members are read, for rules that span them.
package confdoc

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Options configure one document.
type Options struct {
	// Doc is set as the Doc of every *ConfigError (the document's
	// sentinel).
	Doc error
	// Foreign lists, per section, keys of a wider document that this one
	// passes over without reading them. A section is named by its key with
	// "[]" for any array index ("" is the document itself, then "agents",
	// "agents.list[]", "agents.list[].tools"); the key "*" passes over every
	// undeclared key of that section. Keys that differ from a declared key
	// only in case are refused anyway.
	Foreign map[string][]string
	// NullIsAbsent reads a member whose value is null as an absent member
	// (a required one is then missing, a default applies), and refuses a
	// null array element or map value as missing (jsonobj.ErrMissingField).
	// Without it, null is a value of the wrong type.
	NullIsAbsent bool
}

// unmarshaler is implemented by a field type that reads its own JSON
// value. v is never nil; path is the value's jsonobj path.
type unmarshaler interface {
	UnmarshalConf(d *Decoder, v *pohjson.Value, path string)
}

// checker is implemented by a struct type with rules across its members.
// CheckConf runs after every member of the object at path was read
// without error.
type checker interface {
	CheckConf(d *Decoder, path string)
}

// Decoder holds the state of one Decode: the options and the first error.
type Decoder struct {
	o   Options
	err *ConfigError
}

// Failed reports whether an error was recorded.
func (d *Decoder) Failed() bool { return d.err != nil }

// Fail records the first error: class (a jsonobj sentinel, ErrBadValue or
// the document's own) at jsonobj path, with a message that never quotes a
// value.
func (d *Decoder) Fail(path string, class error, format string, args ...any) {
	if d.err == nil {
		d.err = &ConfigError{Doc: d.o.Doc, Key: KeyOf(path), Err: class, Msg: fmt.Sprintf(format, args...)}
	}
}

// Decode reads the value at path into dst, a pointer to any supported
// field type; a caller's Unmarshaler uses it for the parts it declares.
func (d *Decoder) Decode(v *pohjson.Value, path string, dst any) {
	d.value(v, path, sectionOf(path), reflect.ValueOf(dst).Elem(), tag{})
}

// Parse parses data strictly with popts (its root must be an object) and
// decodes it into dst, a pointer to a struct. Errors are *ConfigError; a
// document that is not strict JSON is refused with the class
// jsonobj.ErrSyntax (also matching jsonobj.ErrWrongType) at the path where
// parsing stopped, size limits with jsonobj.ErrTooLarge.
func Parse(data []byte, popts pohjson.ParseOptions, dst any, o Options) error {
	root, err := jsonobj.ParseObject(data, popts)
	if err != nil {
		ce := FromPathError(o.Doc, err)
		if errors.Is(err, jsonobj.ErrSyntax) {
			ce.Err = &class{msg: ce.Err.Error(), errs: []error{ce.Err, jsonobj.ErrWrongType}}
		}
		return ce
	}
	return Decode(root, dst, o)
}

// Decode decodes root into dst, a pointer to a struct. On error dst may be
// partly filled; callers discard it.
func Decode(root *pohjson.Value, dst any, o Options) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic("confdoc: Decode needs a pointer to a struct")
	}
	d := &Decoder{o: o}
	d.value(root, jsonobj.Root, "", rv.Elem(), tag{})
	if d.err != nil {
		return d.err
	}
	return nil
}

// sectionOf returns the section name of a jsonobj path: the key with
// every index replaced by "[]".
func sectionOf(path string) string {
	key := KeyOf(path)
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] == '[' && i+1 < len(key) && key[i+1] >= '0' && key[i+1] <= '9' {
			j := strings.IndexByte(key[i:], ']')
			b.WriteString("[]")
			i += j
			continue
		}
		b.WriteByte(key[i])
	}
	return b.String()
}

func childSection(section, key string) string {
	if section == "" {
		return key
	}
	return section + "." + key
}

// tag is one parsed `conf` tag.
type tag struct {
	key      string
	required bool
	unique   bool
	min, max *int64
	enum     []string
	def      *string
}

func parseTag(field reflect.StructField) (tag, bool) {
	s, ok := field.Tag.Lookup("conf")
	if !ok || s == "-" {
		return tag{}, false
	}
	parts := strings.Split(s, ",")
	t := tag{key: parts[0]}
	for _, p := range parts[1:] {
		name, val, _ := strings.Cut(p, "=")
		switch name {
		case "required":
			t.required = true
		case "unique":
			t.unique = true
		case "min", "max":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				panic("confdoc: bad " + name + " in tag of " + field.Name)
			}
			if name == "min" {
				t.min = &n
			} else {
				t.max = &n
			}
		case "enum":
			t.enum = strings.Split(val, "|")
		case "default":
			t.def = &val
		default:
			panic("confdoc: unknown tag option " + name + " on " + field.Name)
		}
	}
	return t, true
}

var (
	valueType       = reflect.TypeFor[*pohjson.Value]()
	unmarshalerType = reflect.TypeFor[unmarshaler]()
	checkerType     = reflect.TypeFor[checker]()
)

// value reads v into dst according to t.
func (d *Decoder) value(v *pohjson.Value, path, section string, dst reflect.Value, t tag) {
	if d.err != nil {
		return
	}
	if dst.Type() == valueType {
		dst.Set(reflect.ValueOf(v))
		return
	}
	if d.o.NullIsAbsent && v.Kind() == pohjson.Null {
		d.Fail(path, jsonobj.ErrMissingField, "is null")
		return
	}
	if dst.CanAddr() && dst.Addr().Type().Implements(unmarshalerType) {
		dst.Addr().Interface().(unmarshaler).UnmarshalConf(d, v, path)
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		p := reflect.New(dst.Type().Elem())
		d.value(v, path, section, p.Elem(), t)
		dst.Set(p)
	case reflect.Struct:
		d.object(v, path, section, dst)
	case reflect.String:
		s, ok := v.Str()
		if !ok {
			d.Fail(path, jsonobj.ErrWrongType, "not a string")
			return
		}
		d.checkLen(path, int64(len(s)), t, "bytes long")
		if t.enum != nil && !slices.Contains(t.enum, s) {
			d.Fail(path, badValue(jsonobj.ErrWrongType), "must be one of %s", strings.Join(t.enum, ", "))
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.Bool()
		if !ok {
			d.Fail(path, jsonobj.ErrWrongType, "not a boolean")
			return
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := v.Int()
		if !ok {
			d.Fail(path, jsonobj.ErrWrongType, "not an integer")
			return
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if dst.Kind() == reflect.Int {
			lo, hi = math.MinInt, math.MaxInt
		}
		if t.min != nil {
			lo = *t.min
		}
		if t.max != nil {
			hi = *t.max
		}
		switch {
		case n > hi:
			d.Fail(path, badValue(jsonobj.ErrTooLarge), "must be between %d and %d", lo, hi)
		case n < lo:
			d.Fail(path, badValue(jsonobj.ErrWrongType), "must be between %d and %d", lo, hi)
		}
		dst.SetInt(n)
	case reflect.Slice:
		if v.Kind() != pohjson.Array {
			d.Fail(path, jsonobj.ErrWrongType, "not an array")
			return
		}
		es := v.Elems()
		d.checkLen(path, int64(len(es)), t, "entries")
		out := reflect.MakeSlice(dst.Type(), 0, len(es))
		seen := map[any]bool{}
		for i, e := range es {
			ep := jsonobj.Index(path, i)
			ev := reflect.New(dst.Type().Elem()).Elem()
			d.value(e, ep, section+"[]", ev, tag{})
			if d.err != nil {
				return
			}
			if t.unique {
				k := ev.Interface()
				if seen[k] {
					d.Fail(ep, badValue(jsonobj.ErrWrongType), "duplicate entry")
					return
				}
				seen[k] = true
			}
			out = reflect.Append(out, ev)
		}
		dst.Set(out)
	case reflect.Map:
		if v.Kind() != pohjson.Object || dst.Type().Key().Kind() != reflect.String {
			d.Fail(path, jsonobj.ErrWrongType, "not an object")
			return
		}
		ms := v.Members()
		d.checkLen(path, int64(len(ms)), t, "entries")
		out := reflect.MakeMapWithSize(dst.Type(), len(ms))
		for _, m := range ms {
			ev := reflect.New(dst.Type().Elem()).Elem()
			d.value(m.Value, jsonobj.Key(path, m.Key), section+"{}", ev, tag{})
			out.SetMapIndex(reflect.ValueOf(m.Key).Convert(dst.Type().Key()), ev)
		}
		dst.Set(out)
	default:
		panic("confdoc: unsupported field type " + dst.Type().String())
	}
}

// checkLen checks n (a length or count) against t's min and max.
func (d *Decoder) checkLen(path string, n int64, t tag, unit string) {
	switch {
	case t.max != nil && n > *t.max:
		d.Fail(path, badValue(jsonobj.ErrTooLarge), "more than %d %s", *t.max, unit)
	case t.min != nil && n < *t.min:
		d.Fail(path, badValue(jsonobj.ErrMissingField), "fewer than %d %s", *t.min, unit)
	}
}

// object reads the JSON object v into the struct dst.
func (d *Decoder) object(v *pohjson.Value, path, section string, dst reflect.Value) {
	if v.Kind() != pohjson.Object {
		d.Fail(path, jsonobj.ErrWrongType, "not an object")
		return
	}
	typ := dst.Type()
	fields := make(map[string]int, typ.NumField())
	tags := make([]tag, typ.NumField())
	for i := range typ.NumField() {
		t, ok := parseTag(typ.Field(i))
		if !ok {
			continue
		}
		fields[t.key], tags[i] = i, t
	}
	// Unknown keys first, then missing ones, then the values in document
	// order: the order of jsonobj.Reader.Object.
	foreign := d.o.Foreign[section]
	seen := make(map[string]bool, len(fields))
	for _, m := range v.Members() {
		if _, ok := fields[m.Key]; !ok {
			d.unknown(path, m.Key, fields, foreign)
			continue
		}
		if d.o.NullIsAbsent && m.Value.Kind() == pohjson.Null {
			continue
		}
		seen[m.Key] = true
	}
	for i := range typ.NumField() {
		if t := tags[i]; t.required && !seen[t.key] {
			d.Fail(jsonobj.Key(path, t.key), badValue(jsonobj.ErrMissingField), "is required")
		}
	}
	for _, m := range v.Members() {
		if i, ok := fields[m.Key]; ok && seen[m.Key] {
			d.value(m.Value, jsonobj.Key(path, m.Key), childSection(section, m.Key), dst.Field(i), tags[i])
		}
	}
	if d.err != nil {
		return
	}
	for i := range typ.NumField() {
		if t := tags[i]; t.key != "" && !seen[t.key] && t.def != nil {
			d.setDefault(jsonobj.Key(path, t.key), dst.Field(i), *t.def)
		}
	}
	if dst.CanAddr() && dst.Addr().Type().Implements(checkerType) {
		dst.Addr().Interface().(checker).CheckConf(d, path)
	}
}

// unknown refuses key of the object at path unless it is foreign.
func (d *Decoder) unknown(path, key string, fields map[string]int, foreign []string) {
	kp := jsonobj.Key(path, key)
	for k := range fields {
		if strings.EqualFold(k, key) {
			d.Fail(kp, jsonobj.ErrUnknownField, "unknown key (keys are case-sensitive)")
			return
		}
	}
	if slices.Contains(foreign, key) || slices.Contains(foreign, "*") {
		return
	}
	d.Fail(kp, jsonobj.ErrUnknownField, "unknown key")
}

func (d *Decoder) setDefault(path string, dst reflect.Value, def string) {
	switch dst.Kind() {
	case reflect.String:
		dst.SetString(def)
		return
	case reflect.Bool:
		if b, err := strconv.ParseBool(def); err == nil {
			dst.SetBool(b)
			return
		}
	case reflect.Int, reflect.Int64:
		if n, err := strconv.ParseInt(def, 10, 64); err == nil {
			dst.SetInt(n)
			return
		}
	}
	panic("confdoc: bad default for " + path)
}
