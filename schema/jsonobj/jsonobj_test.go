package jsonobj

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/pohjson"
)

type doc struct {
	Name      string
	Templates []string
	Hash      []byte
	Count     int64
	On        bool
}

var hash32 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func read(data string) (*doc, error) {
	root, err := ParseObject([]byte(data), pohjson.ParseOptions{})
	if err != nil {
		return nil, err
	}
	var r Reader
	f := r.Object(root, Root, map[string]bool{"name": true, "templates": true, "hash": false, "count": false, "on": false, "opt": false})
	d := &doc{
		Name:      r.Ident(f["name"], Key(Root, "name"), 8),
		Templates: r.stringList(f["templates"], Key(Root, "templates"), 1, 3, 4),
		Hash:      r.B64u(f["hash"], Key(Root, "hash"), 32),
		Count:     r.Int(f["count"], Key(Root, "count"), 0, 10),
		On:        r.Bool(f["on"], Key(Root, "on")),
	}
	if o := f["opt"]; o != nil {
		of := r.Object(o, Key(Root, "opt"), map[string]bool{"a-b": true})
		r.Array(of["a-b"], Key(Key(Root, "opt"), "a-b"), 0, 1)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

func TestRead(t *testing.T) {
	d, err := read(`{"name":"n","templates":["a","b"],"hash":"` + hash32 + `","count":3,"on":true,"opt":{"a-b":[]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "n" || len(d.Templates) != 2 || len(d.Hash) != 32 || d.Count != 3 || !d.On {
		t.Fatalf("got %+v", d)
	}
}

func TestReadRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in, path string
		want           error
	}{
		{"syntax", `{"name":`, "$.name", ErrSyntax},
		{"trailing data", `{"name":"a","templates":["a"]} x`, "$", ErrSyntax},
		{"duplicate", `{"name":"a","name":"b","templates":["a"]}`, "$.name", pohjson.ErrDuplicateKey},
		{"nested duplicate", `{"name":"a","templates":["a"],"opt":{"a-b":[],"x":[{"k":1,"k":2}]}}`, `$.opt.x[0].k`, pohjson.ErrDuplicateKey},
		{"nested syntax", `{"name":"a","templates":["a", tru]}`, `$.templates[1]`, ErrSyntax},
		{"case-sensitive", `{"Name":"a","templates":["a"]}`, "$.Name", ErrUnknownField},
		{"lone surrogate", `{"name":"\ud800","templates":["a"]}`, "$.name", ErrSyntax},
		{"not object", `[]`, "$", ErrWrongType},
		{"missing", `{"templates":["a"]}`, "$.name", ErrMissingField},
		{"unknown quoted", `{"name":"a","templates":["a"],"x y":1}`, `$["x y"]`, ErrUnknownField},
		{"empty ident", `{"name":"","templates":["a"]}`, "$.name", ErrMissingField},
		{"long ident", `{"name":"123456789","templates":["a"]}`, "$.name", ErrTooLarge},
		{"wrong type", `{"name":1,"templates":["a"]}`, "$.name", ErrWrongType},
		{"too few", `{"name":"a","templates":[]}`, "$.templates", ErrMissingField},
		{"too many", `{"name":"a","templates":["a","b","c","d"]}`, "$.templates", ErrTooLarge},
		{"element type", `{"name":"a","templates":["a",2]}`, "$.templates[1]", ErrWrongType},
		{"element length", `{"name":"a","templates":["a","bbbbb"]}`, "$.templates[1]", ErrTooLarge},
		{"b64u", `{"name":"a","templates":["a"],"hash":"+"}`, "$.hash", ErrWrongType},
		{"b64u length", `{"name":"a","templates":["a"],"hash":"AAAA"}`, "$.hash", ErrWrongType},
		{"int range", `{"name":"a","templates":["a"],"count":11}`, "$.count", ErrTooLarge},
		{"int negative", `{"name":"a","templates":["a"],"count":-1}`, "$.count", ErrWrongType},
		{"int float", `{"name":"a","templates":["a"],"count":1.5}`, "$.count", ErrSyntax},
		{"bool", `{"name":"a","templates":["a"],"on":"true"}`, "$.on", ErrWrongType},
		{"nested", `{"name":"a","templates":["a"],"opt":{"a-b":[1,2]}}`, `$.opt["a-b"]`, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			pe, ok := errors.AsType[*PathError](err)
			if !ok {
				t.Fatalf("err %v is not a *PathError", err)
			}
			if pe.Path != tc.path {
				t.Fatalf("path = %q, want %q", pe.Path, tc.path)
			}
			if !strings.HasPrefix(err.Error(), tc.path+": ") {
				t.Fatalf("message %q does not start with the path", err)
			}
		})
	}
}

func TestFirstErrorKept(t *testing.T) {
	var r Reader
	r.Fail("$.a", ErrWrongType)
	r.Fail("$.b", ErrTooLarge)
	pe, ok := errors.AsType[*PathError](r.Err())
	if !ok || pe.Path != "$.a" || !errors.Is(pe, ErrWrongType) {
		t.Fatalf("err = %v", r.Err())
	}
}

func TestKeyClipsAndQuotes(t *testing.T) {
	long := strings.Repeat("k", 200)
	p := Key(Root, long+"\"")
	if len(p) > 100 || !strings.HasPrefix(p, `$["kkk`) || !strings.HasSuffix(p, `..."]`) {
		t.Fatalf("Key = %q", p)
	}
	if got := Index(Key(Root, "templates"), 2) + ".sha256"; got != "$.templates[2].sha256" {
		t.Fatalf("path = %q", got)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(`{"name":"n","templates":["a"]}`)
	f.Add(`{"name":"n","templates":["a"],"opt":{"a-b":[]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := read(s)
		if (d == nil) == (err == nil) {
			t.Fatalf("doc %v and err %v", d, err)
		}
		if err != nil {
			pe, ok := errors.AsType[*PathError](err)
			if !ok || !strings.HasPrefix(pe.Path, "$") {
				t.Fatalf("err %v has no path", err)
			}
		}
	})
}

// objectSorted is Object as it was before firstMissing: the reference the
// missing-member error is compared with, byte for byte.
func objectSorted(r *Reader, v *pohjson.Value, path string, allowed map[string]bool) map[string]*pohjson.Value {
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
	for _, name := range slices.Sorted(maps.Keys(allowed)) {
		if allowed[name] && out[name] == nil {
			r.Fail(Key(path, name), ErrMissingField)
		}
	}
	return out
}

// TestObjectErrorsAsSorted checks that Object reports the same first error
// as a walk of the sorted allowed keys, for every subset of members present
// (with and without an unknown one and an earlier error).
func TestObjectErrorsAsSorted(t *testing.T) {
	allowed := map[string]bool{"zeta": true, "alpha": true, "Beta": true, "a b": true, "mid": false, "alpha2": true}
	names := slices.Sorted(maps.Keys(allowed))
	for mask := range 1 << len(names) {
		for _, extra := range []string{"", `"unknown":1`, `"ALPHA":1`} {
			for _, earlier := range []bool{false, true} {
				var members []string
				for i, n := range names {
					if mask&(1<<i) != 0 {
						members = append(members, fmt.Sprintf("%q:%d", n, i))
					}
				}
				if extra != "" {
					members = append([]string{extra}, members...)
				}
				in := "{" + strings.Join(members, ",") + "}"
				v, err := ParseObject([]byte(in), pohjson.ParseOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var got, want Reader
				if earlier {
					got.Fail("$.x", ErrTooLarge)
					want.Fail("$.x", ErrTooLarge)
				}
				gm := got.Object(v, "$.o", allowed)
				wm := objectSorted(&want, v, "$.o", allowed)
				if fmt.Sprint(got.Err()) != fmt.Sprint(want.Err()) || !maps.Equal(gm, wm) {
					t.Fatalf("%s (earlier %v): Object %v, sorted walk %v", in, earlier, got.Err(), want.Err())
				}
				if want.Err() != nil && !errors.Is(got.Err(), errors.Unwrap(want.Err())) {
					t.Fatalf("%s: sentinel %v, want %v", in, got.Err(), want.Err())
				}
			}
		}
	}
}

func BenchmarkObject(b *testing.B) {
	v, err := ParseObject([]byte(`{"name":"n","templates":["a"],"hash":"`+hash32+`","count":1,"on":true}`), pohjson.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	allowed := map[string]bool{"name": true, "templates": true, "hash": false, "count": false, "on": false, "opt": false}
	b.ReportAllocs()
	for b.Loop() {
		var r Reader
		r.Object(v, Root, allowed)
		if r.Err() != nil {
			b.Fatal(r.Err())
		}
	}
}
