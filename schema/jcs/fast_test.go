package jcs

import (
	"bytes"
	"testing"
)

var fastSeeds = []string{
	`{"path":"/workspace/README.md","offset":0,"limit":200}`,
	`{"command":"ls -la","workdir":"/workspace","env":{"B":"1","A":"2"},"args":["a",1,-3,true,false,null,[],{}]}`,
	` { "b" : [ 1 , 2 ] , "a" : "x\/y\u0041\u00e9\u2028\n\t\"\\\u001f\u007f" } `,
	`{"a":1,"a":2}`, `{"a":1.5}`, `{"a":-0}`, `{"a":01}`, `{"a":1e3}`, `{"\u0061":1}`,
	`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"é":1,"z":2}`,
	`[1,2,3]`, `"s"`, `123456789012345`, `1234567890123456`, `{"a":[{"c":1,"b":2}]}`,
	`{}`, `[]`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `tru`, `nul`, `{"a":true}x`,
}

func TestAppendCanonicalMatches(t *testing.T) {
	for _, s := range fastSeeds {
		checkFast(t, []byte(s))
	}
	// The common case takes the fast path.
	f := fast{data: []byte(fastSeeds[0])}
	if !f.value(0) || !f.end() {
		t.Fatal("fast path refused a plain object")
	}
	if got := string(f.out); got != `{"limit":200,"offset":0,"path":"/workspace/README.md"}` {
		t.Fatalf("fast path: %s", got)
	}
}

func checkFast(t *testing.T, data []byte) {
	t.Helper()
	want, werr := canonicalize(data)
	got, gerr := appendCanonical([]byte("p:"), data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: appendCanonical err %v, canonicalize err %v", data, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("p:"), want...)) {
		t.Fatalf("%q: appendCanonical %q, canonicalize %q", data, got, want)
	}
	if c, err := Canonicalize(data); (err == nil) != (werr == nil) || !bytes.Equal(c, want) {
		t.Fatalf("%q: Canonicalize %q %v, general path %q %v", data, c, err, want, werr)
	}
	// Whatever the fast path accepts, the general path accepts identically.
	f := fast{data: data}
	if f.value(0) && f.end() {
		if werr != nil || !bytes.Equal(f.out, want) {
			t.Fatalf("%q: fast path %q, general %q %v", data, f.out, want, werr)
		}
	}
}

func FuzzAppendCanonical(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFast(t, data) })
}

func BenchmarkAppendCanonical(b *testing.B) {
	data := []byte(fastSeeds[1])
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendCanonical(buf[:0], data); err != nil {
			b.Fatal(err)
		}
	}
}
