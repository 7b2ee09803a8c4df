package poh

import (
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
