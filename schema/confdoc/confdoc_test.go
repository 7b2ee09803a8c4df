package confdoc_test

import (
	"errors"
	"testing"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

var errDoc = errors.New("test config")

type hook struct {
	URL     string            `conf:"url,required,max=64"`
	Timeout int64             `conf:"timeout,min=1,max=300,default=30"`
	Mode    string            `conf:"mode,enum=allow|deny,default=deny"`
	Headers map[string]string `conf:"headers,max=2"`
}

type section struct {
	Deny    []string `conf:"deny,max=3,unique"`
	Enabled *bool    `conf:"enabled"`
	Hook    *hook    `conf:"hook"`
	Agents  []agent  `conf:"list"`
}

type agent struct {
	ID   string  `conf:"id,required,min=1,max=8"`
	Tool section `conf:"tools"`
}

type doc struct {
	Tools     section `conf:"tools"`
	seenCheck bool
}

func (d *doc) CheckConf(dec *confdoc.Decoder, path string) {
	d.seenCheck = true
	if d.Tools.Enabled != nil && *d.Tools.Enabled && d.Tools.Hook == nil {
		dec.Fail(jsonobj.Key(path, "tools"), confdoc.ErrBadValue, "enabled without a hook")
	}
}

func parse(data string, o confdoc.Options) (*doc, error) {
	o.Doc = errDoc
	var d doc
	if err := confdoc.Parse([]byte(data), pohjson.ParseOptions{MaxBytes: 1 << 16, MaxDepth: 16}, &d, o); err != nil {
		return nil, err
	}
	return &d, nil
}

func TestDecode(t *testing.T) {
	d, err := parse(`{"tools":{"deny":["exec"],"enabled":true,"hook":{"url":"u","headers":{"a":"b"}}}}`, confdoc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.seenCheck || d.Tools.Hook.Timeout != 30 || d.Tools.Hook.Mode != "deny" || *d.Tools.Enabled != true || d.Tools.Deny[0] != "exec" || d.Tools.Hook.Headers["a"] != "b" {
		t.Fatalf("decoded %+v %+v", d, d.Tools.Hook)
	}
}

var nullAbsent = confdoc.Options{NullIsAbsent: true}

// TestNullIsAbsent: a null member reads as absent (no value, defaults
// apply), and the same document is refused without the option.
func TestNullIsAbsent(t *testing.T) {
	const in = `{"tools":{"enabled":null,"deny":null,"hook":{"url":"u","timeout":null,"mode":null,"headers":null}}}`
	d, err := parse(in, nullAbsent)
	if err != nil {
		t.Fatal(err)
	}
	if h := d.Tools.Hook; d.Tools.Enabled != nil || d.Tools.Deny != nil || h.Timeout != 30 || h.Mode != "deny" || h.Headers != nil {
		t.Fatalf("decoded %+v %+v", d.Tools, d.Tools.Hook)
	}
	if d, err := parse(`{"tools":{"hook":null}}`, nullAbsent); err != nil || d.Tools.Hook != nil {
		t.Fatalf("null hook: %+v, %v", d, err)
	}
	if _, err := parse(in, confdoc.Options{}); !errors.Is(err, jsonobj.ErrWrongType) {
		t.Fatalf("null accepted without NullIsAbsent: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	foreign := confdoc.Options{Foreign: map[string][]string{"": {"*"}, "tools": {"web"}, "tools.list[]": {"workspace"}}}
	for _, tc := range []struct {
		doc  string
		o    confdoc.Options
		key  string
		want []error
	}{
		{`[]`, confdoc.Options{}, "", []error{jsonobj.ErrWrongType}},
		{`{"tools":{},"tools":{}}`, confdoc.Options{}, "tools", []error{jsonobj.ErrSyntax, pohjson.ErrDuplicateKey, jsonobj.ErrWrongType}},
		{`{"tools":{"denny":["exec"]}}`, confdoc.Options{}, "tools.denny", []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"denny":["exec"]}}`, foreign, "tools.denny", []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"Deny":["exec"]}}`, foreign, "tools.Deny", []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"list":[{"id":"a","workspace":1,"tool":{}}]}}`, foreign, "tools.list[0].tool", []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"list":[{"id":"a","tools":{"web":1}}]}}`, foreign, "tools.list[0].tools.web", []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"hook":{}}}`, confdoc.Options{}, "tools.hook.url", []error{confdoc.ErrBadValue, jsonobj.ErrMissingField}},
		{`{"tools":{"hook":{"url":"u","timeout":0}}}`, confdoc.Options{}, "tools.hook.timeout", []error{confdoc.ErrBadValue, jsonobj.ErrWrongType}},
		{`{"tools":{"hook":{"url":"u","timeout":301}}}`, confdoc.Options{}, "tools.hook.timeout", []error{confdoc.ErrBadValue, jsonobj.ErrTooLarge}},
		{`{"tools":{"hook":{"url":"u","timeout":"1"}}}`, confdoc.Options{}, "tools.hook.timeout", []error{jsonobj.ErrWrongType}},
		{`{"tools":{"hook":{"url":"u","mode":"open"}}}`, confdoc.Options{}, "tools.hook.mode", []error{confdoc.ErrBadValue}},
		{`{"tools":{"hook":{"url":"u","headers":{"a":"","b":"","c":""}}}}`, confdoc.Options{}, "tools.hook.headers", []error{jsonobj.ErrTooLarge}},
		{`{"tools":{"deny":["a","a"]}}`, confdoc.Options{}, "tools.deny[1]", []error{confdoc.ErrBadValue}},
		{`{"tools":{"deny":["a",1]}}`, confdoc.Options{}, "tools.deny[1]", []error{jsonobj.ErrWrongType}},
		{`{"tools":{"list":[{"id":""}]}}`, confdoc.Options{}, "tools.list[0].id", []error{confdoc.ErrBadValue}},
		{`{"tools":{"enabled":true}}`, confdoc.Options{}, "tools", []error{confdoc.ErrBadValue}},
		{`{"tools":{"x y":1}}`, confdoc.Options{}, `tools["x y"]`, []error{jsonobj.ErrUnknownField}},
		{`{"tools":{"enabled":null}}`, confdoc.Options{}, "tools.enabled", []error{jsonobj.ErrWrongType}},
		{`{"tools":{"hook":{"url":null}}}`, nullAbsent, "tools.hook.url", []error{confdoc.ErrBadValue, jsonobj.ErrMissingField}},
		{`{"tools":{"deny":["a",null]}}`, nullAbsent, "tools.deny[1]", []error{jsonobj.ErrMissingField}},
		{`{"tools":{"hook":{"url":"u","headers":{"a":null}}}}`, nullAbsent, "tools.hook.headers.a", []error{jsonobj.ErrMissingField}},
		{`{"tools":{"list":[null]}}`, nullAbsent, "tools.list[0]", []error{jsonobj.ErrMissingField}},
		{`{"tools":{"Deny":null}}`, nullAbsent, "tools.Deny", []error{jsonobj.ErrUnknownField}},
	} {
		_, err := parse(tc.doc, tc.o)
		ce, ok := errors.AsType[*confdoc.ConfigError](err)
		if !ok || ce.Key != tc.key || !errors.Is(err, errDoc) {
			t.Errorf("%s: %v, want key %q", tc.doc, err, tc.key)
			continue
		}
		for _, w := range tc.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v does not match %v", tc.doc, err, w)
			}
		}
	}
	if _, err := parse(`{"tools":{"web":{},"list":[{"id":"a","workspace":"/w"}]},"channels":{}}`, foreign); err != nil {
		t.Fatalf("foreign keys: %v", err)
	}
}

func TestErrorText(t *testing.T) {
	_, err := parse(`{"tools":{"hook":{"url":"u","timeout":0}}}`, confdoc.Options{})
	if got := err.Error(); got != "test config: tools.hook.timeout: must be between 1 and 300" {
		t.Fatalf("message %q", got)
	}
	if got := (&confdoc.ConfigError{Key: `a["x y"][2]`}).Path(); got != `$.a["x y"][2]` {
		t.Fatalf("path %q", got)
	}
	for _, p := range []string{"$", "$.a", `$["x y"].b[0]`} {
		if (&confdoc.ConfigError{Key: confdoc.KeyOf(p)}).Path() != p {
			t.Errorf("%s does not round-trip", p)
		}
	}
}

// FuzzDecode: Decode never panics; on error it returns a *ConfigError of
// the document whose Key is a path of the input, and nothing else.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"tools":{"deny":["exec"],"enabled":true,"hook":{"url":"u","headers":{"a":"b"}}}}`))
	f.Add([]byte(`{"tools":{"list":[{"id":"a","workspace":"/w","tools":{"web":{}}}]},"channels":{}}`))
	foreign := confdoc.Options{Foreign: map[string][]string{"": {"*"}, "tools": {"web"}, "tools.list[]": {"workspace"}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, o := range []confdoc.Options{{}, foreign, nullAbsent} {
			d, err := parse(string(data), o)
			if err == nil {
				if d == nil || !d.seenCheck {
					t.Fatal("accepted without its check")
				}
				continue
			}
			if d != nil {
				t.Fatal("document returned with an error")
			}
			if _, ok := errors.AsType[*confdoc.ConfigError](err); !ok || !errors.Is(err, errDoc) {
				t.Fatalf("untyped error %T %v", err, err)
			}
		}
	})
}
