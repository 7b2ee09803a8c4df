package pohjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

func mustStringify(t *testing.T, in string) string {
	t.Helper()
	v, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse(%q): %v", in, err)
	}
	out, err := Stringify(v)
	if err != nil {
		t.Fatalf("Stringify(%q): %v", in, err)
	}
	return string(out)
}

// stringifyCases are inputs with the output JSON.stringify(JSON.parse(in))
// gives in Node.js; TestNodeInterop checks them against a real node when one
// is installed.
var stringifyCases = []struct{ in, want string }{
	{`{"a":1,"b":[true,false,null]}`, `{"a":1,"b":[true,false,null]}`},
	{" {\n \"b\" : 1 ,\t\"a\" : 2 } ", `{"b":1,"a":2}`},
	{`{"b":1,"2":2,"a":3,"1":4,"01":5,"-1":6,"4294967294":7,"4294967295":8}`,
		`{"1":4,"2":2,"4294967294":7,"b":1,"a":3,"01":5,"-1":6,"4294967295":8}`},
	{`"<>&\u2028\u2029"`, "\"<>&\u2028\u2029\""},
	{`"\u0000\u0001\b\f\n\r\t\u001f\u007f\/"`, `"\u0000\u0001\b\f\n\r\t\u001f` + "\x7f" + `/"`},
	{`"\"\\"`, `"\"\\"`},
	{`"\ud83d\ude00 é €"`, `"😀 é €"`},
	{`[9007199254740991,-9007199254740991,0,-1]`, `[9007199254740991,-9007199254740991,0,-1]`},
	{`{"__proto__":{"x":1},"constructor":"c"}`, `{"__proto__":{"x":1},"constructor":"c"}`},
	{`[]`, `[]`}, {`{}`, `{}`}, {`""`, `""`}, {`null`, `null`},
	{`{"a":{"10":1,"9":2,"b":3}}`, `{"a":{"9":2,"10":1,"b":3}}`},
}

func TestStringify(t *testing.T) {
	for _, tt := range stringifyCases {
		if got := mustStringify(t, tt.in); got != tt.want {
			t.Errorf("Stringify(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{``, errSyntax}, {` `, errSyntax}, {`{`, errSyntax}, {`{"a"}`, errSyntax}, {`{"a":1,}`, errSyntax},
		{`[1,]`, errSyntax}, {`[1 2]`, errSyntax}, {`{} {}`, errSyntax}, {`nul`, errSyntax}, {`True`, errSyntax},
		{`'a'`, errSyntax}, {`{a:1}`, errSyntax}, {`01`, errSyntax}, {`+1`, errSyntax}, {`1.`, errSyntax},
		{`.5`, errSyntax}, {`1e`, errSyntax}, {`"a` + "\n" + `"`, errSyntax}, {`"\x"`, errSyntax},
		{`"\u12G4"`, errSyntax}, {`"abc`, errSyntax}, {"\xef\xbb\xbf{}", errSyntax}, {`NaN`, errSyntax},
		{`{"a":1,"a":2}`, ErrDuplicateKey}, {`{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{`1.5`, errNumber}, {`1.0`, errNumber}, {`1e3`, errNumber}, {`-0`, errNumber},
		{`9007199254740992`, errNumber}, {`-9007199254740992`, errNumber}, {`123456789012345678901234567890`, errNumber},
		{`"\ud800"`, errString}, {`"\udc00"`, errString}, {`"\ud800\u0041"`, errString}, {`"\ud800x"`, errString},
		{"\"\xff\"", errString}, {"\"\xed\xa0\x80\"", errString}, {"\"\xc0\xaf\"", errString},
		{strings.Repeat("[", 65) + strings.Repeat("]", 65), ErrTooDeep},
	}
	for _, tt := range tests {
		v, err := Parse([]byte(tt.in))
		if !errors.Is(err, tt.want) || v != nil {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, v, err, tt.want)
		}
		if _, ok := errors.AsType[*Error](err); err != nil && !ok {
			t.Errorf("Parse(%q) error %T is not *Error", tt.in, err)
		}
	}
	// Duplicates in large objects (found by a set, not a scan), on each
	// side of the switch and across it; distinct keys are accepted.
	object := func(keys ...int) []byte {
		b := []byte("{")
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"k%d":%d`, k, i)
		}
		return append(b, '}')
	}
	seq := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	}
	for _, keys := range [][]int{append(seq(15), 3), append(seq(16), 3), append(seq(16), 15), append(seq(40), 39), append(seq(40), 0), append(seq(40), 20)} {
		if v, err := Parse(object(keys...)); !errors.Is(err, ErrDuplicateKey) || v != nil {
			t.Errorf("Parse(%s) = %v, %v; want a duplicate key", object(keys...), v, err)
		}
	}
	if v, err := Parse(object(seq(40)...)); err != nil || len(v.Members()) != 40 {
		t.Errorf("40 distinct keys: %v, %v", v, err)
	}
	if _, err := ParseWith([]byte(`[1,2]`), ParseOptions{MaxBytes: 4}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("MaxBytes: err = %v, want ErrTooLarge", err)
	}
}

func TestAllowFloats(t *testing.T) {
	v, err := ParseWith([]byte(`[1.5,1e400]`), ParseOptions{AllowFloats: true})
	if err == nil {
		t.Fatalf("1e400 accepted: %v", v)
	}
	// -0 stays refused even with floats allowed.
	if _, err := ParseWith([]byte(`[1.5,-0]`), ParseOptions{AllowFloats: true}); !errors.Is(err, errNumber) {
		t.Fatalf("-0: err = %v, want ErrNumber", err)
	}
	v, err = ParseWith([]byte(`[1.5,1E30,99999999999999999999]`), ParseOptions{AllowFloats: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Stringify(v); !errors.Is(err, errNumber) {
		t.Fatalf("Stringify of floats: err = %v, want ErrNumber", err)
	}
}

func TestStringifyRejects(t *testing.T) {
	for name, v := range map[string]*Value{
		"dup":      NewObject(M("a", NewNull()), M("a", NewNull())),
		"big":      NewInt(MaxSafeInteger + 1),
		"badutf8":  NewString("\xff"),
		"badkey":   NewObject(M("\xff", NewNull())),
		"nilelem":  NewArray(nil),
		"nilvalue": nil,
	} {
		if b, err := Stringify(v); err == nil {
			t.Errorf("%s: Stringify = %q, want error", name, b)
		}
	}
}

func TestBuildAndFromGo(t *testing.T) {
	type inner struct {
		Z string `json:"z"`
		A int    `json:"a"`
	}
	type doc struct {
		Version string  `json:"v"`
		Inner   inner   `json:"inner"`
		Opt     *string `json:"opt,omitempty"`
		Null    *string `json:"null"`
	}
	got, err := Marshal(doc{Version: "1", Inner: inner{Z: "<&>\u2028", A: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"v\":\"1\",\"inner\":{\"z\":\"<&>\u2028\",\"a\":7},\"null\":null}"; string(got) != want {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}
	if _, err := Marshal(struct{ F float64 }{1.5}); !errors.Is(err, errNumber) {
		t.Fatalf("float field: err = %v, want ErrNumber", err)
	}
	v := NewObject(M("b", NewString("x")), M("a", NewArray(NewInt(1), NewBool(true))))
	if s, _ := v.GetString("b"); s != "x" || v.Get("a").Elems()[1].Kind() != Bool {
		t.Fatal("accessors")
	}
}

// TestNonePanicsOnNodeCorpus runs the cases through Node.js, the reference
// implementation of JSON.stringify, when node is installed (CI has it).
func TestNodeInterop(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		citest.SkipOrFail(t, "node not installed")
	}
	var ins []string
	for _, tt := range stringifyCases {
		ins = append(ins, tt.in)
	}
	// Extra cases generated here and compared only against node.
	for _, s := range []string{"\u00e9\u0085\u200b\ufeff", "\x7f", "a\u2028b", "\u0000"} {
		b, _ := json.Marshal(s)
		ins = append(ins, string(b))
	}
	input, _ := json.Marshal(ins)
	cmd := exec.Command(node, "-e", `let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{process.stdout.write(JSON.stringify(JSON.parse(d).map(s=>JSON.stringify(JSON.parse(s)))))})`)
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(ins) {
		t.Fatalf("node output %q: %v", out, err)
	}
	for i, in := range ins {
		if got := mustStringify(t, in); got != want[i] {
			t.Errorf("input %q: ours %q, node %q", in, got, want[i])
		}
	}
}

// FuzzParse: nothing panics; whatever parses stringifies, and the
// stringified form is a fixed point (parse + stringify gives the same bytes).
func FuzzParse(f *testing.F) {
	for _, tt := range stringifyCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`"\ud800"`))
	f.Add([]byte(`[1.5]`))
	f.Add([]byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			if v != nil {
				t.Fatal("value returned with error")
			}
			return
		}
		out, err := Stringify(v)
		if err != nil {
			t.Fatalf("accepted input does not stringify: %v", err)
		}
		v2, err := Parse(out)
		if err != nil {
			t.Fatalf("stringified output does not parse: %v", err)
		}
		out2, err := Stringify(v2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not a fixed point: %q -> %q", out, out2)
		}
		// encoding/json must agree that the output is valid JSON.
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		checkOneCopy(t, data, out)
	})
}

// checkOneCopy: data, which Parse accepted and stringified to out, parses
// the same with OneCopy, and every string Unescaped reports is written by
// JSON.stringify as its bytes between quotes.
func checkOneCopy(t *testing.T, data, out []byte) {
	t.Helper()
	v, err := ParseWith(data, ParseOptions{OneCopy: true})
	if err != nil {
		t.Fatalf("OneCopy refuses what Parse accepts: %v", err)
	}
	if again, err := Stringify(v); err != nil || !bytes.Equal(again, out) {
		t.Fatalf("OneCopy reads another value: %q, %v", again, err)
	}
	var walk func(v *Value)
	walk = func(v *Value) {
		if s, ok := v.Str(); ok && v.Unescaped() && string(jsstr.AppendQuote(nil, s)) != `"`+s+`"` {
			t.Fatalf("Unescaped string %q needs an escape", s)
		}
		for _, e := range v.Elems() {
			walk(e)
		}
		for _, m := range v.Members() {
			walk(m.Value)
		}
	}
	walk(v)
}

// TestOneCopy: with OneCopy, the strings of a document without escapes are
// read as without it, Unescaped tells the strings read without an escape
// sequence, and a list longer than a slab gets its own.
func TestOneCopy(t *testing.T) {
	long := `[` + strings.Repeat(`"x",`, 3*maxSlab) + `"y"]`
	doc := []byte(`{"a":"plain","b":"line\nfeed","c":"\u0041","d":["é",1,{"e":"f"}],"g":` + long + `,"h":[1],"i":[2]}`)
	v, err := ParseWith(doc, ParseOptions{OneCopy: true})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"a": true, "b": false, "c": false} {
		if got := v.Get(key).Unescaped(); got != want {
			t.Errorf("%s: Unescaped %v, want %v", key, got, want)
		}
	}
	if d := v.Get("d").Elems(); !d[0].Unescaped() || d[1].Unescaped() || d[2].Unescaped() || !d[2].Get("e").Unescaped() {
		t.Error("Unescaped is not the strings read without an escape")
	}
	if NewString("x").Unescaped() || (*Value)(nil).Unescaped() {
		t.Error("a made or absent value is Unescaped")
	}
	if n := len(v.Get("g").Elems()); n != 3*maxSlab+1 {
		t.Errorf("%d elements, want %d", n, 3*maxSlab+1)
	}
	out, err := Stringify(v)
	if err != nil {
		t.Fatal(err)
	}
	checkOneCopy(t, doc, out)
	// An append to a kept list does not write over the next one.
	_ = append(v.Get("h").Elems(), NewNull())
	if n, _ := v.Get("i").Elems()[0].Int(); n != 2 {
		t.Error("an append to a list wrote over its neighbour")
	}
}

// TestParseCanonical: Canonical accepts the JSON.stringify form and
// refuses, with ErrNotCanonical, valid JSON in any other form.
func TestParseCanonical(t *testing.T) {
	canon := ParseOptions{Canonical: true}
	for _, in := range []string{
		`{}`, `[]`, `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `{"1":0,"10":1,"b":2,"a":3}`,
		`"\""`, `"\\"`, `"\b\f\n\r\t"`, `"\u0000\u001f\u000b"`, "\"é\u2028/\"", `-12`, `9007199254740991`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
	} {
		v, err := ParseWith([]byte(in), canon)
		if err != nil {
			t.Errorf("canonical %q: %v", in, err)
			continue
		}
		if out, err := Stringify(v); err != nil || string(out) != in {
			t.Errorf("canonical %q stringifies to %q, %v", in, out, err)
		}
	}
	for _, tt := range []struct {
		in   string
		opts ParseOptions
	}{
		{` {}`, canon}, {`{} `, canon}, {`{"a": 1}`, canon}, {`{ "a":1}`, canon}, {"[1,\n2]", canon},
		{`"\/"`, canon}, {`"\u0041"`, canon}, {`"\u001F"`, canon}, {`"\u000a"`, canon}, {`"\u0022"`, canon},
		{`"\u00e9"`, canon}, {`"\u2028"`, canon}, {`"\ud83d\ude00"`, canon},
		{`{"b":1,"1":0}`, canon}, {`{"10":1,"1":0}`, canon}, {`{"a":{"b":1,"2":0}}`, canon},
		{`1.5`, ParseOptions{Canonical: true, AllowFloats: true}},
		{`9007199254740992`, ParseOptions{Canonical: true, AllowFloats: true}},
	} {
		if v, err := ParseWith([]byte(tt.in), tt.opts); !errors.Is(err, ErrNotCanonical) || v != nil {
			t.Errorf("ParseWith(%q, %+v) = %v, %v; want ErrNotCanonical", tt.in, tt.opts, v, err)
		}
		if _, err := ParseWith([]byte(tt.in), ParseOptions{AllowFloats: tt.opts.AllowFloats}); err != nil {
			t.Errorf("%q is not even valid: %v", tt.in, err)
		}
	}
	// Stringify's depth limit holds whatever MaxDepth says.
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	if _, err := ParseWith([]byte(deep), ParseOptions{Canonical: true, MaxDepth: 100}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("65 levels under Canonical with MaxDepth 100: %v", err)
	}
}

// FuzzParseCanonical: Canonical accepts exactly the inputs that parse and
// are their own Stringify output, and then returns the same value.
func FuzzParseCanonical(f *testing.F) {
	for _, tt := range stringifyCases {
		f.Add([]byte(tt.in))
		f.Add([]byte(tt.want))
	}
	f.Add([]byte(`{"1":0,"b":{"2":[1,"\u001f"]}}`))
	f.Add([]byte(`{"b":1,"1":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vc, errc := ParseWith(data, ParseOptions{Canonical: true})
		v, err := Parse(data)
		var out []byte
		if err == nil {
			out, err = Stringify(v)
		}
		want := err == nil && bytes.Equal(out, data)
		if (errc == nil) != want {
			t.Fatalf("Canonical: %v; Parse and Stringify: %q, %v", errc, out, err)
		}
		if errc != nil {
			if vc != nil {
				t.Fatal("value returned with error")
			}
			return
		}
		if again, err := Stringify(vc); err != nil || !bytes.Equal(again, data) {
			t.Fatalf("canonical value stringifies to %q, %v", again, err)
		}
	})
}

// FuzzOneCopyForm: a container parsed with OneCopy keeps its text only
// when the text is byte for byte what the encoder writes for it (the
// encoder run on the same value parsed without OneCopy, which keeps
// nothing), and Stringify and Hash of every container agree with that
// encoder, kept or not.
func FuzzOneCopyForm(f *testing.F) {
	for _, tt := range stringifyCases {
		f.Add([]byte(tt.in), false)
		f.Add([]byte(tt.want), true)
	}
	f.Add([]byte(`{"1":0,"b":{"2":[1,"\u001f"]}}`), false)
	f.Add([]byte(`{"b":1,"1":0,"c":[{"d":"\n"},{"e":"\/"}]}`), false)
	f.Add([]byte(`{"a":[1.5],"b":[1],"c":{ "d":2},"e":{"f":"\u00e9"},"g":[9007199254740992]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, floats bool) {
		vo, erro := ParseWith(data, ParseOptions{OneCopy: true, AllowFloats: floats})
		v, err := ParseWith(data, ParseOptions{AllowFloats: floats})
		if (erro == nil) != (err == nil) {
			t.Fatalf("OneCopy: %v; without: %v", erro, err)
		}
		if err != nil {
			return
		}
		var walk func(a, b *Value)
		walk = func(a, b *Value) {
			if a.Kind() != b.Kind() {
				t.Fatalf("kinds differ: %v, %v", a.Kind(), b.Kind())
			}
			if b.s != "" && (b.kind == Object || b.kind == Array) {
				t.Fatalf("a container parsed without OneCopy kept %q", b.s)
			}
			want, werr := Stringify(b)
			if form, ok := a.form(); ok && (werr != nil || form != string(want)) {
				t.Fatalf("kept %q, the encoder writes %q, %v", form, want, werr)
			}
			got, gerr := Stringify(a)
			if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("Stringify: %q, %v; the encoder: %q, %v", got, gerr, want, werr)
			}
			hg, herr := Hash(a)
			hw, hwerr := Hash(b)
			if hg != hw || (herr == nil) != (hwerr == nil) {
				t.Fatalf("Hash: %q, %v; the encoder: %q, %v", hg, herr, hw, hwerr)
			}
			for i, e := range a.Elems() {
				walk(e, b.Elems()[i])
			}
			for i, m := range a.Members() {
				walk(m.Value, b.Members()[i].Value)
			}
		}
		walk(vo, v)
	})
}

// FuzzMarshal: Marshal, which returns encoding/json's bytes as they are
// when they are already the JSON.stringify form, agrees with the encoder
// it skips (Stringify of the strict parse of encoding/json's bytes) on the
// Go values encoding/json decodes from the input, in every case.
func FuzzMarshal(f *testing.F) {
	for _, tt := range stringifyCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"b":"<&>","a":[1,{"2":"\u2028","10":null}]}`))
	f.Add([]byte(`{"z":{"y":[true,false,-0,12345678901234567890]},"a":"\u00e9\ud83d\ude00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var x any
		if d.Decode(&x) != nil {
			return
		}
		got, gerr := Marshal(x)
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		v, werr := Parse(b)
		if werr == nil {
			want, werr = Stringify(v)
		}
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Marshal: %q, %v; Stringify(Parse(json.Marshal)): %q, %v", got, gerr, want, werr)
		}
	})
}

// TestOneCopyKeepsForm: OneCopy keeps the text of the containers that are
// in Stringify form and of no other, and Hash reads it.
func TestOneCopyKeepsForm(t *testing.T) {
	doc := `{"payload":{"a":[1,"x"],"b":{"c":"\u001f"}},"spaced":{"a": 1},"order":{"b":1,"1":2},"esc":["\/"],"float":[1.5]}`
	v, err := ParseWith([]byte(doc), ParseOptions{OneCopy: true, AllowFloats: true})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"payload": `{"a":[1,"x"],"b":{"c":"\u001f"}}`,
		"spaced":  "", "order": "", "esc": "", "float": "",
	} {
		if got, _ := v.Get(key).form(); got != want {
			t.Errorf("%s: kept %q, want %q", key, got, want)
		}
	}
	if _, ok := v.form(); ok {
		t.Error("the whole document, with departures inside, kept its text")
	}
	h, err := Hash(v.Get("payload"))
	if err != nil || h != b64u.SHA256([]byte(`{"a":[1,"x"],"b":{"c":"\u001f"}}`)) {
		t.Fatalf("Hash of the kept form: %q, %v", h, err)
	}
	plain, err := Parse([]byte(doc[len(`{"payload":`):strings.Index(doc, `,"spaced"`)]))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.form(); ok {
		t.Fatal("Parse without OneCopy kept a form")
	}
}

// BenchmarkHashPayload is Hash of a 4 KiB payload in Stringify form, as
// poh.Verify hashes a received envelope's payload: encoded again (parsed
// without OneCopy) or read as the text kept (OneCopy).
func BenchmarkHashPayload(b *testing.B) {
	var items []string
	for i := range 24 {
		items = append(items, fmt.Sprintf(`{"event_id":"evt_%03d","event_type":"tool_call","payload_hash_b64u":"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU","timestamp":"2026-06-01T12:00:00.000Z","seq":%d}`, i, i))
	}
	doc := []byte(`{"bundle_version":"1","bundle_id":"bundle_001","event_chain":[` + strings.Join(items, ",") + `]}`)
	for _, tc := range []struct {
		name string
		opts ParseOptions
	}{{"encode", ParseOptions{}}, {"kept", ParseOptions{OneCopy: true}}} {
		v, err := ParseWith(doc, tc.opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Hash(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPlain8 checks the word tests of the string scan against the byte
// tests: stops8 (the stops of a string: quote, backslash, control and
// non-ASCII bytes) and plainRun8 (control and non-ASCII bytes only).
func TestPlain8(t *testing.T) {
	checkWordTest(t, func(w uint64) bool { return stops8(w) == 0 },
		func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' })
	checkWordTest(t, func(w uint64) bool { return plainRun8(w) == 0 },
		func(c byte) bool { return c >= 0x20 && c < 0x80 })
}

// checkWordTest checks plain8 against plainByte on each byte: every byte
// value at every position among plain fillers, and random words of mostly
// plain bytes.
func checkWordTest(t *testing.T, plain8 func(uint64) bool, plainByte func(byte) bool) {
	t.Helper()
	ref := func(w uint64) bool {
		for i := range 8 {
			if !plainByte(byte(w >> (8 * i))) {
				return false
			}
		}
		return true
	}
	word := func(b [8]byte) uint64 { return binary.LittleEndian.Uint64(b[:]) }
	for _, filler := range []byte{'A', ' ', '~', 0x7f, '!', '#', '[', ']', '0'} {
		for pos := range 8 {
			for c := range 256 {
				var b [8]byte
				for i := range b {
					b[i] = filler
				}
				b[pos] = byte(c)
				if w := word(b); plain8(w) != ref(w) {
					t.Fatalf("plain8(%q) = %v", b[:], plain8(w))
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var b [8]byte
		for i := range b {
			if r.IntN(8) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		if w := word(b); plain8(w) != ref(w) {
			t.Fatalf("plain8(%q) = %v", b[:], plain8(w))
		}
	}
}

// BenchmarkMarshal encodes a struct the size of an evidence context's
// commitments (verify compares one with the attestation's metadata).
func BenchmarkMarshal(b *testing.B) {
	type model struct {
		Version  string `json:"model_identity_version"`
		Provider string `json:"provider"`
		Model    string `json:"model"`
	}
	h := "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
	x := struct {
		Version, Prompt, Report, Pack, Policy, Root string
		Count                                       int64
		Model                                       model
		Digest                                      string
		Sensitive                                   bool
		Simulated                                   bool `json:"simulated"`
	}{"clawea.dev/attestation/v2", h, h, h, h, h, 2, model{"clawea.dev/model-identity/v1", "anthropic", "claude-opus-4-6"}, h, false, true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(x); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzBorrow: Borrow gives the tree OneCopy gives (kinds, booleans,
// numbers, strings, Unescaped, member keys and kept forms) and the same
// error, under every other option; its strings lie in the input (no copy
// made) and OneCopy's do not.
func FuzzBorrow(f *testing.F) {
	for _, tt := range stringifyCases {
		f.Add([]byte(tt.in), uint8(0))
		f.Add([]byte(tt.want), uint8(3))
	}
	f.Add([]byte(`{"a":1,"a":2}`), uint8(0))
	f.Add([]byte(`{"1":0,"b":{"2":[1,"\u001f"]},"c":"\ud83d\ude00x","d":[1.5, -0]}`), uint8(1))
	f.Add([]byte(`{"m":[{"role":"user","content":"hi"},{"role":"tool","content":[{"type":"text","text":"é\n"}]}],"n":9007199254740993}`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		opts := ParseOptions{AllowFloats: flags&1 != 0, Canonical: flags&2 != 0, MaxDepth: int(flags>>2) % 8}
		copied := opts
		copied.OneCopy = true
		borrowed := opts
		borrowed.Borrow = true
		vc, errc := ParseWith(data, copied)
		vb, errb := ParseWith(data, borrowed)
		if fmt.Sprint(errc) != fmt.Sprint(errb) || (vc == nil) != (vb == nil) {
			t.Fatalf("OneCopy: %v; Borrow: %v", errc, errb)
		}
		if errc != nil {
			return
		}
		inData := func(s string) bool {
			if len(s) == 0 || len(data) == 0 {
				return false
			}
			p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&data[0]))
			return p >= lo && p < lo+uintptr(len(data))
		}
		var walk func(c, b *Value)
		walk = func(c, b *Value) {
			if c.kind != b.kind || c.b != b.b || c.plain != b.plain || c.n != b.n || c.s != b.s ||
				len(c.arr) != len(b.arr) || len(c.members) != len(b.members) {
				t.Fatalf("OneCopy read %+v, Borrow %+v", *c, *b)
			}
			if (c.plain || c.kind == Array || c.kind == Object) && c.s != "" && (inData(c.s) || !inData(b.s)) {
				t.Fatalf("%q: OneCopy's in the input %v, Borrow's %v", c.s, inData(c.s), inData(b.s))
			}
			for i, m := range c.members {
				if m.Key != b.members[i].Key {
					t.Fatalf("keys %q, %q", m.Key, b.members[i].Key)
				}
				walk(m.Value, b.members[i].Value)
			}
			for i, e := range c.arr {
				walk(e, b.arr[i])
			}
		}
		walk(vc, vb)
	})
}

// TestBorrowShares: a Borrow parse's strings and kept forms are the input's
// bytes, so a change to the input shows through them (why the caller
// promises none), where OneCopy's do not change.
func TestBorrowShares(t *testing.T) {
	doc := []byte(`{"a":"xyz","b":[1,"q"]}`)
	vb, err := ParseWith(doc, ParseOptions{Borrow: true})
	if err != nil {
		t.Fatal(err)
	}
	vc, err := ParseWith(doc, ParseOptions{OneCopy: true})
	if err != nil {
		t.Fatal(err)
	}
	doc[bytes.IndexByte(doc, 'x')] = 'X'
	if s, _ := vb.GetString("a"); s != "Xyz" {
		t.Fatalf("Borrow: %q, want the input's bytes", s)
	}
	if s, _ := vc.GetString("a"); s != "xyz" {
		t.Fatalf("OneCopy: %q, want its copy", s)
	}
	if form, ok := vb.form(); !ok || form != string(doc) {
		t.Fatalf("Borrow kept %q, %v", form, ok)
	}
}

// BenchmarkParseText is Parse of a 100 KB document that is mostly long
// plain texts, as a model request's history is, without a copy (Borrow)
// and with one (OneCopy).
func BenchmarkParseText(b *testing.B) {
	var msgs []string
	for i := range 40 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q}`, strings.Repeat(string(rune('a'+i%26)), 2500)))
	}
	doc := []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`)
	for _, tc := range []struct {
		name string
		opts ParseOptions
	}{{"borrow", ParseOptions{Borrow: true}}, {"onecopy", ParseOptions{OneCopy: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseWith(doc, tc.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refStr is str as a byte-by-byte scan (what str does without its word
// and memchr steps): the reference of FuzzStr.
func refStr(p *parser) (s string, plain bool, err error) {
	p.i++
	var buf []byte
	escaped := false
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			return string(buf), !escaped, nil
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", false, err
			}
			buf, escaped = utf8.AppendRune(buf, r), true
		case c < 0x20:
			return "", false, p.errf(errSyntax, "unescaped control character in string")
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false, p.errf(errString, "invalid UTF-8")
			}
			buf = append(buf, p.data[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", false, p.errf(errSyntax, "unterminated string")
}

// FuzzStr is the differential test of str (its runs found with
// bytes.IndexByte and word tests) against refStr: the same string, the
// same plain flag, the same end offset, the same error.
func FuzzStr(f *testing.F) {
	f.Add([]byte(`"` + strings.Repeat("plain text ", 20) + `"`))
	f.Add([]byte(`"a\"b\\c\n\u00e9\ud83d\ude00 é\u2028 ` + strings.Repeat("x", 40) + `\"" tail "`))
	f.Add([]byte("\"abc\x01def\""))
	f.Add([]byte("\"abcdefghijklmnopqrs\xff\""))
	f.Add([]byte(`"unterminated ` + strings.Repeat("y", 30)))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = append([]byte{'"'}, data...)
		for _, opts := range []ParseOptions{{}, {OneCopy: true}} {
			p, q := &parser{data: data, opts: opts, text: string(data)}, &parser{data: data, opts: opts}
			s, plain, err := p.str()
			rs, rplain, rerr := refStr(q)
			if (err == nil) != (rerr == nil) || err != nil && err.Error() != rerr.Error() {
				t.Fatalf("str %q: error %v, reference %v", data, err, rerr)
			}
			if err == nil && (s != rs || plain != rplain || p.i != q.i) {
				t.Fatalf("str %q = %q %v at %d, reference %q %v at %d", data, s, plain, p.i, rs, rplain, q.i)
			}
		}
	})
}
