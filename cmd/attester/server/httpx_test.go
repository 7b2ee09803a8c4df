package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// TestNoCaseVariants: the pairwise path (at most 16 members) and the
// folded-key path (more) refuse the same key pairs, including Unicode case
// variants (Kelvin sign, long s).
func TestNoCaseVariants(t *testing.T) {
	for _, c := range []struct {
		a, b string
		dup  bool
	}{
		{"sender_id", "SENDER_ID", true},
		{"sender_id", "Sender_Id", true},
		{"k", "\u212a", true}, // KELVIN SIGN folds to k
		{"s", "\u017f", true}, // LATIN SMALL LETTER LONG S folds to s
		{"\u00e9", "\u00c9", true},
		{"a", "b", false},
		{"sender_id", "sender_ids", false},
		{"ss", "\u00df", false}, // full folding only: not a simple fold
	} {
		for _, pad := range []int{0, 20} {
			var b strings.Builder
			b.WriteString("{")
			for i := range pad {
				fmt.Fprintf(&b, `"pad%d":1,`, i)
			}
			fmt.Fprintf(&b, `%q:1,%q:2}`, c.a, c.b)
			doc, err := jsonobj.ParseObject([]byte(b.String()), pohjson.ParseOptions{MaxBytes: 1 << 16, MaxDepth: 8})
			if err != nil {
				t.Fatal(err)
			}
			if got := noCaseVariants(doc, 0) != nil; got != c.dup {
				t.Errorf("%q %q with %d other members: refused=%v, want %v", c.a, c.b, pad, got, c.dup)
			}
		}
	}
}
