package control

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestKeyAttestations: without a challenge one quote is shared for
// keyAttestationTTL; with one, every answer is a fresh quote, at most
// challengeQuoteBurst at once and challengeQuotesPerSecond after that,
// beyond which 429 with a Retry-After.
func TestKeyAttestations(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	quotes := 0
	k := newKeyAttestations(func() time.Time { return now }, func(_ context.Context, ch []byte) ([]byte, error) {
		quotes++
		return fmt.Appendf(nil, "quote-%d-%x", quotes, ch), nil
	})
	ctx := context.Background()
	get := func(ch []byte) (string, error) {
		b, err := k.get(ctx, ch)
		return string(b), err
	}
	a, _ := get(nil)
	now = now.Add(keyAttestationTTL - time.Second)
	if b, _ := get(nil); b != a || quotes != 1 {
		t.Fatalf("no-challenge attestation not shared within the TTL: %q %q (%d quotes)", a, b, quotes)
	}
	now = now.Add(time.Second)
	if b, _ := get(nil); b == a || quotes != 2 {
		t.Fatalf("no-challenge attestation reused after the TTL: %q (%d quotes)", b, quotes)
	}

	for i := range challengeQuoteBurst {
		q, err := get([]byte{byte(i)})
		if err != nil || q != fmt.Sprintf("quote-%d-%02x", quotes, i) {
			t.Fatalf("challenge %d: %q %v", i, q, err)
		}
	}
	_, err := get([]byte{0xff})
	var ce *Error
	if !errors.As(err, &ce) || ce.kind != kindTooMany || ce.RetryAfter != 1 {
		t.Fatalf("beyond the burst: %v", err)
	}
	// Challenge-less requests are not metered.
	if _, err := get(nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second / challengeQuotesPerSecond)
	if _, err := get([]byte{1}); err != nil {
		t.Fatalf("after a refill interval: %v", err)
	}
	if _, err := get([]byte{2}); err == nil {
		t.Fatal("a second quote within one refill interval")
	}
	// A clock that goes back neither refills nor reuses a cache from the future.
	now = now.Add(-time.Hour)
	if _, err := get([]byte{3}); err == nil {
		t.Fatal("refilled by a clock going back")
	}
	before := quotes
	get(nil)
	if quotes != before+1 {
		t.Fatal("cached attestation reused although the clock went back")
	}
}
