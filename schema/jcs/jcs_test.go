package jcs

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/clawea/attester/schema/pohjson"
)

// TestRFC8785Examples runs the examples of RFC 8785 sections 3.2.2 and 3.2.3.
func TestRFC8785Examples(t *testing.T) {
	tests := []struct{ in, want string }{
		{
			`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte(tt.in))
		if err != nil {
			t.Fatalf("Canonicalize: %v", err)
		}
		if string(got) != tt.want {
			t.Errorf("Canonicalize =\n%s\nwant\n%s", got, tt.want)
		}
	}
}

// TestRFC8785Numbers runs the IEEE 754 serialization table of RFC 8785
// appendix B (NaN and Infinity cannot appear in JSON text).
func TestRFC8785Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		// Feed the shortest round-trip literal Go produces for the double.
		lit := strconv.FormatFloat(f, 'g', -1, 64)
		if lit == "-0" {
			lit = "-0.0"
		}
		got, err := Canonicalize([]byte("[" + lit + "]"))
		if err != nil {
			t.Errorf("%016x (%s): %v", tt.bits, lit, err)
			continue
		}
		if string(got) != "["+tt.want+"]" {
			t.Errorf("%016x: got %s, want [%s]", tt.bits, got, tt.want)
		}
	}
}

func TestRejects(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`, `"\ud800"`, "\"\xff\"", `[1e400]`, `{`, `[1] x`, ``,
	} {
		if out, err := Canonicalize([]byte(in)); !errors.Is(err, errInvalid) || out != nil {
			t.Errorf("Canonicalize(%q) = %q, %v; want errInvalid", in, out, err)
		}
	}
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	if !errors.Is(err, pohjson.ErrDuplicateKey) {
		t.Errorf("duplicate key error does not wrap pohjson.ErrDuplicateKey: %v", err)
	}
}

// FuzzCanonicalize: no panics; canonical output is a fixed point.
func FuzzCanonicalize(f *testing.F) {
	f.Add([]byte(`{"b":[1.5,2e-3],"a":"\u20ac"}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[333333333.33333329]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if err != nil {
			return
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
	})
}

// TestMarshal checks that Marshal canonicalizes json.Marshal's output and
// returns the error of either step.
func TestMarshal(t *testing.T) {
	got, err := Marshal(struct {
		B string  `json:"b"`
		A float64 `json:"a"`
	}{B: "<&>", A: 4.50})
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if want := `{"a":4.5,"b":"<&>"}`; string(got) != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	if _, err := Marshal(math.Inf(1)); err == nil {
		t.Error("Marshal(+Inf): no error")
	}
	// json.Marshal copies a RawMessage after a syntax check only; the
	// duplicate key is refused by Canonicalize.
	if _, err := Marshal(map[string]any{"x": json.RawMessage(`{"a":1,"a":2}`)}); !errors.Is(err, errInvalid) {
		t.Errorf("Marshal(duplicate key) = %v, want errInvalid", err)
	}
}
