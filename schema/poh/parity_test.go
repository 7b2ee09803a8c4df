package poh

import (
	"errors"
	"math"
	"testing"

	"github.com/clawea/attester/schema/pohjson"
)

// TestDisclosureSpecVector is the selective-disclosure vector of
// docs/spec/hashing-and-envelopes.md §5.6 (computed with Node.js).
func TestDisclosureSpecVector(t *testing.T) {
	a, err := disclosureLeafHash(DisclosureLeaf{Path: "a", Type: "string", Value: pohjson.NewString("x"), SaltB64u: "AAAAAAAAAAA"})
	if err != nil || a != "7rQZerycH9ddfaE3plAGqJwh6yHaJ99vgSto-6b5e7g" {
		t.Fatalf("leaf a = %s, %v", a, err)
	}
	b, err := disclosureLeafHash(DisclosureLeaf{Path: "b", Type: "number", Value: pohjson.NewInt(7), SaltB64u: "BBBBBBBBBBB"})
	if err != nil || b != "beS9Wu6XjIlAmICIrInRVbhjJNxRR1d0xsi3PG-9A6Q" {
		t.Fatalf("leaf b = %s, %v", b, err)
	}
	for _, in := range [][]string{{a, b}, {b, a}} {
		if r, err := disclosureRoot(in); err != nil || r != "TBd6WJCOHmlOtdIs_n0UcsUqJloqsk3vh2P-NHTJ3hg" {
			t.Fatalf("root = %s, %v", r, err)
		}
	}
	// b disclosed, a redacted.
	sd, err := pohjson.Parse([]byte(`{"disclosure_algorithm":"vir_v2_typed_lexicographical","merkle_root_b64u":"TBd6WJCOHmlOtdIs_n0UcsUqJloqsk3vh2P-NHTJ3hg","redacted_leaf_hashes_b64u":["` + a + `"],"disclosed_leaves":{"b":{"type":"number","value":7,"salt_b64u":"BBBBBBBBBBB"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifySelectiveDisclosure(sd, "TBd6WJCOHmlOtdIs_n0UcsUqJloqsk3vh2P-NHTJ3hg"); err != nil {
		t.Fatal(err)
	}
	if err := verifySelectiveDisclosure(sd, a); !errors.Is(err, disclosureRootMismatch) {
		t.Fatalf("other commitment: %v", err)
	}
}

// TestRateLimitNonFinite: numbers JSON cannot carry once parsed by this
// package (NaN, ±Inf) still fail closed when a caller passes them directly.
func TestRateLimitNonFinite(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	base := RateLimitClaim{WindowStart: "2026-01-01T00:00:00Z", WindowEnd: "2026-01-01T00:01:00Z", MaxRequests: 10, ObservedRequests: 1}
	cases := []struct {
		name string
		mod  func(c *RateLimitClaim)
		want error
	}{
		{"ok", func(c *RateLimitClaim) {}, nil},
		{"max inf", func(c *RateLimitClaim) { c.MaxRequests = math.Inf(1) }, rateLimitClaimInconsistent},
		{"observed nan", func(c *RateLimitClaim) { c.ObservedRequests = math.NaN() }, rateLimitClaimInconsistent},
		{"observed negative", func(c *RateLimitClaim) { c.ObservedRequests = -1 }, rateLimitClaimInconsistent},
		{"token max inf", func(c *RateLimitClaim) { c.MaxTokensInput, c.ObservedTokensInput = f(math.Inf(1)), f(1) }, rateLimitClaimInconsistent},
		{"token observed nan", func(c *RateLimitClaim) { c.MaxTokensOutput, c.ObservedTokensOutput = f(1), f(math.NaN()) }, rateLimitClaimInconsistent},
		{"fraction exceeded", func(c *RateLimitClaim) { c.MaxRequests, c.ObservedRequests = 1.5, 1.75 }, RateLimitExceeded},
		{"bad window", func(c *RateLimitClaim) { c.WindowEnd = "soon" }, rateLimitClaimInconsistent},
		{"run id without chain", func(c *RateLimitClaim) { r := "other"; c.RunID = &r }, nil},
	}
	for _, tc := range cases {
		c := base
		tc.mod(&c)
		err := checkRateLimitClaims([]RateLimitClaim{c}, "")
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	r := "other"
	c := base
	c.RunID = &r
	if err := checkRateLimitClaims([]RateLimitClaim{c}, "run_1"); !errors.Is(err, rateLimitClaimInconsistent) {
		t.Errorf("run id mismatch: %v", err)
	}
}
