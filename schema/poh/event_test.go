package poh

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

func TestEntryAndNext(t *testing.T) {
	h1 := EventHeader{"e1", "run_1", "prompt_committed", "2026-11-22T00:00:00.000Z", b64u.SHA256([]byte("a")), nil}
	e1, err := h1.Entry()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := h1.Hash(); e1.EventHashB64u != want || e1.PrevHashB64u != nil {
		t.Fatalf("entry %+v, want hash %s and no prev", e1, want)
	}
	e2, err := e1.Next("e2", "llm_call", "2026-11-22T00:00:01.000Z", b64u.SHA256([]byte("b")))
	if err != nil {
		t.Fatal(err)
	}
	if e2.RunID != "run_1" || e2.PrevHashB64u == nil || *e2.PrevHashB64u != e1.EventHashB64u {
		t.Fatalf("Next did not link: %+v", e2)
	}
	// The entries form a chain VerifyProofBundle's chain check accepts.
	var elems []*pohjson.Value
	for _, e := range []EventChainEntry{e1, e2} {
		v, err := pohjson.FromGo(e)
		if err != nil {
			t.Fatal(err)
		}
		elems = append(elems, v)
	}
	if _, err := verifyEventChain(elems); err != nil {
		t.Fatalf("chain refused: %v", err)
	}
	// A changed payload hash changes the event hash.
	h1.PayloadHashB64u = b64u.SHA256([]byte("c"))
	if e, _ := h1.Entry(); e.EventHashB64u == e1.EventHashB64u {
		t.Fatal("event hash does not cover the payload hash")
	}
}

// eventHeaderHashAgrees fails unless Hash gives what the header value's
// JSON.stringify form hashes to (pohjson.Hash), error for error.
func eventHeaderHashAgrees(t *testing.T, h EventHeader) {
	t.Helper()
	got, gotErr := h.Hash()
	want, wantErr := pohjson.Hash(h.value())
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%+v: Hash %q, %v; pohjson.Hash %q, %v", h, got, gotErr, want, wantErr)
	}
}

// FuzzEventHeaderHash: Hash writes the header's JSON.stringify form itself;
// it agrees with pohjson's encoder for any strings, escapes, U+2028,
// invalid UTF-8 and a null or string prev_hash_b64u included.
func FuzzEventHeaderHash(f *testing.F) {
	f.Add("e1", "run_1", "llm_call", "2026-11-22T00:00:00.000Z", b64u.SHA256([]byte("a")), "", false)
	f.Add("e\"2\n", "run\u2028", "<&>", "\x00\x1f\x7f", "\xff", "prev", true)
	f.Add("\xed\xa0\x80", "r", "t", "", "", "\xc3", true)
	f.Add(strings.Repeat("\t", 600), "r", "t", "ts", "h", "p", true)
	f.Fuzz(func(t *testing.T, id, run, typ, ts, payload, prev string, hasPrev bool) {
		h := EventHeader{id, run, typ, ts, payload, nil}
		if hasPrev {
			h.PrevHashB64u = &prev
		}
		eventHeaderHashAgrees(t, h)
	})
}

// BenchmarkEventHeaderHash is one chain entry's header hash, as
// verifyEventChain recomputes it for every event: Hash, and the header
// value encoded by pohjson (what Hash did before it wrote the form itself).
func BenchmarkEventHeaderHash(b *testing.B) {
	prev := b64u.SHA256([]byte("p"))
	h := EventHeader{"evt_0123456789", "run_0123456789", "llm_call", "2026-11-22T00:00:01.000Z", b64u.SHA256([]byte("b")), &prev}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.Hash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("value", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pohjson.Hash(h.value()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
