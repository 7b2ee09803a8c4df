package pohjson

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// arenaSeed is a document parsed with Release before each fuzzed input,
// so that the input's parse reuses chunks an earlier parse wrote.
var arenaSeed = []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 300) +
	`"},{"role":"assistant","content":[{"type":"text","text":"a\n"}],"n":[1,2,3,{"k":true,"l":null}]}],"f":1.5}`)

// FuzzArena: a parse with Release, in memory that earlier parses used and
// gave back, gives the tree a parse without it gives, and the same error,
// under every option.
func FuzzArena(f *testing.F) {
	f.Add([]byte(`{"a":1,"a":2}`), uint8(0))
	f.Add(arenaSeed, uint8(1))
	f.Add([]byte(`[[],{},[{}],"\u0041",-0,1e3]`), uint8(1))
	f.Add([]byte(`{"1":0,"b":{"2":[1,"\u001f"]},"c":"\ud83d\ude00x","d":[1.5, -0]}`), uint8(4))
	f.Add([]byte(`{"o":{`+strings.Repeat(`"k":0,`, 3)+`"z":[`+strings.Repeat(`1,`, 200)+`2]}}`), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		opts := ParseOptions{AllowFloats: flags&1 != 0, Canonical: flags&2 != 0, MaxDepth: int(flags>>3) % 8}
		if flags&4 != 0 {
			opts.Borrow = true
		}
		want, werr := ParseWith(data, opts)
		var release func()
		for range 2 {
			if _, err := ParseWith(arenaSeed, ParseOptions{AllowFloats: true, Release: &release}); err != nil {
				t.Fatal(err)
			}
			release()
			_, _ = ParseWith(data, ParseOptions{Release: &release})
			release()
		}
		pooled := opts
		pooled.Release = &release
		got, gerr := ParseWith(data, pooled)
		defer release()
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(want, got) {
			t.Fatalf("without Release %v, %v; with it %v, %v", want, werr, got, gerr)
		}
	})
}

// TestArenaReset: giving the memory back clears the values of the parse
// (no pointer into the input stays in the pool), and an arena keeps at
// most maxArenaChunks chunks of each kind after a document that needed
// more; the function given back is safe to call twice.
func TestArenaReset(t *testing.T) {
	var release func()
	v, err := ParseWith([]byte(`{"a":["x","y"]}`), ParseOptions{Borrow: true, Release: &release})
	if err != nil {
		t.Fatal(err)
	}
	arr := v.Get("a").Elems()
	release()
	release()
	if !reflect.DeepEqual(*v, Value{}) || arr[0] != nil {
		t.Fatalf("after release: %+v, %v", *v, arr)
	}
	a, give := takeArena()
	n := (maxArenaChunks + 3) * maxSlab
	big := []byte("[" + strings.Repeat(`{"k":[0]},`, n) + "0]")
	p := &parser{data: big, maxDepth: defaultMaxDepth, arena: a}
	if _, err := p.value(0); err != nil {
		t.Fatal(err)
	}
	a.stackE = p.elems
	if len(a.vals.list) <= maxArenaChunks || len(a.members.list) <= maxArenaChunks || cap(a.stackE) <= maxArenaStack {
		t.Fatalf("the document used %d value chunks, %d member chunks", len(a.vals.list), len(a.members.list))
	}
	a.reset()
	if len(a.vals.list) != maxArenaChunks || len(a.members.list) != maxArenaChunks || len(a.elems.list) != maxArenaChunks {
		t.Fatalf("kept %d, %d, %d chunks", len(a.vals.list), len(a.members.list), len(a.elems.list))
	}
	if cap(a.stackE) > maxArenaStack {
		t.Fatalf("kept a work list of %d", cap(a.stackE))
	}
	give()
}

// TestArenaAllocs: a parse in memory given back allocates nothing for its
// values, members and lists: what it allocates is the strings with an
// escape sequence (arenaSeed has one), the Number's literal and the
// function that gives the memory back (two).
func TestArenaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	var release func()
	opts := ParseOptions{Borrow: true, AllowFloats: true, Release: &release}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := ParseWith(arenaSeed, opts); err != nil {
			t.Fatal(err)
		}
		release()
	})
	without := testing.AllocsPerRun(20, func() {
		if _, err := ParseWith(arenaSeed, ParseOptions{Borrow: true, AllowFloats: true}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 || without < allocs+8 {
		t.Fatalf("%v allocations per parse with Release, %v without", allocs, without)
	}
}
