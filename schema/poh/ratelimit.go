package poh

import (
	"fmt"
	"math"

	"github.com/clawea/attester/schema/pohjson"
)

// Reason codes for payload.rate_limit_claims, as the PoH command-line
// verifier (clawverify-core) reports them.
const (
	rateLimitWindowInvalid     Code = "RATE_LIMIT_WINDOW_INVALID"
	RateLimitExceeded          Code = "RATE_LIMIT_EXCEEDED"
	rateLimitClaimInconsistent Code = "RATE_LIMIT_CLAIM_INCONSISTENT"
)

// RateLimitClaim is one payload.rate_limit_claims entry. Numbers are float64
// because the PoH rules are stated over JavaScript numbers; an optional
// member that is absent is nil.
type RateLimitClaim struct {
	Scope       string
	ScopeKey    string
	WindowStart string
	WindowEnd   string
	// MaxRequests and ObservedRequests are required by the schema.
	MaxRequests      float64
	ObservedRequests float64
	// The token limits come in pairs: max_tokens_input with
	// observed_tokens_input, max_tokens_output with observed_tokens_output.
	MaxTokensInput       *float64
	ObservedTokensInput  *float64
	MaxTokensOutput      *float64
	ObservedTokensOutput *float64
	// RunID is nil when the claim names no run.
	RunID *string
}

// checkRateLimitClaims applies the rate-limit claim rules of
// docs/spec/hashing-and-envelopes.md §5.4 to claims, in order, and returns
// the first failure as a *Error. runID is the bundle's run id (the event
// chain's), or "" when the bundle has no event chain; a claim's run_id is
// only compared when runID is not empty.
//
// For each claim, in this order:
//  1. window_start and window_end parse as date-times (else RATE_LIMIT_CLAIM_INCONSISTENT)
//  2. window_start <= window_end, compared in whole milliseconds (else RATE_LIMIT_WINDOW_INVALID)
//  3. max_requests and observed_requests are finite and >= 0 (else RATE_LIMIT_CLAIM_INCONSISTENT)
//  4. observed_requests <= max_requests (else RATE_LIMIT_EXCEEDED)
//  5. for tokens_input, then tokens_output: max and observed are both present
//     or both absent (else RATE_LIMIT_CLAIM_INCONSISTENT); when present, both
//     finite and >= 0 (else RATE_LIMIT_CLAIM_INCONSISTENT) and observed <= max
//     (else RATE_LIMIT_EXCEEDED)
//  6. run_id, when present, equals runID (else RATE_LIMIT_CLAIM_INCONSISTENT)
func checkRateLimitClaims(claims []RateLimitClaim, runID string) error {
	for i, c := range claims {
		field := fmt.Sprintf("payload.rate_limit_claims[%d]", i)
		start, errS := parseTime(c.WindowStart)
		end, errE := parseTime(c.WindowEnd)
		if errS != nil || errE != nil {
			return fail(rateLimitClaimInconsistent, field, "window_start and window_end must be date-times")
		}
		// JavaScript compares Date.parse values: whole milliseconds.
		if start.UnixMilli() > end.UnixMilli() {
			return fail(rateLimitWindowInvalid, field+".window_start", "window_start is after window_end")
		}
		if !finiteNonNegative(c.MaxRequests) || !finiteNonNegative(c.ObservedRequests) {
			return fail(rateLimitClaimInconsistent, field, "max_requests and observed_requests must be finite non-negative numbers")
		}
		if c.ObservedRequests > c.MaxRequests {
			return fail(RateLimitExceeded, field+".observed_requests", "observed_requests exceeds max_requests")
		}
		for _, pair := range []struct {
			label         string
			max, observed *float64
		}{
			{"tokens_input", c.MaxTokensInput, c.ObservedTokensInput},
			{"tokens_output", c.MaxTokensOutput, c.ObservedTokensOutput},
		} {
			if (pair.max == nil) != (pair.observed == nil) {
				return fail(rateLimitClaimInconsistent, field, "max_%s and observed_%s must be given together", pair.label, pair.label)
			}
			if pair.max == nil {
				continue
			}
			if !finiteNonNegative(*pair.max) || !finiteNonNegative(*pair.observed) {
				return fail(rateLimitClaimInconsistent, field, "max_%s and observed_%s must be finite non-negative numbers", pair.label, pair.label)
			}
			if *pair.observed > *pair.max {
				return fail(RateLimitExceeded, field+".observed_"+pair.label, "observed_%s exceeds max_%s", pair.label, pair.label)
			}
		}
		if runID != "" && c.RunID != nil && *c.RunID != runID {
			return fail(rateLimitClaimInconsistent, field+".run_id", "run_id is not the bundle's run id")
		}
	}
	return nil
}

func finiteNonNegative(f float64) bool {
	return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0
}

// rateLimitClaims reads payload.rate_limit_claims (already schema-valid).
func rateLimitClaims(p *pohjson.Value) []RateLimitClaim {
	elems := p.Get("rate_limit_claims").Elems()
	out := make([]RateLimitClaim, 0, len(elems))
	for _, e := range elems {
		var c RateLimitClaim
		c.Scope, _ = e.GetString("scope")
		c.ScopeKey, _ = e.GetString("scope_key")
		c.WindowStart, _ = e.GetString("window_start")
		c.WindowEnd, _ = e.GetString("window_end")
		c.MaxRequests = jsNumber(e.Get("max_requests"))
		c.ObservedRequests = jsNumber(e.Get("observed_requests"))
		c.MaxTokensInput = optNumber(e, "max_tokens_input")
		c.ObservedTokensInput = optNumber(e, "observed_tokens_input")
		c.MaxTokensOutput = optNumber(e, "max_tokens_output")
		c.ObservedTokensOutput = optNumber(e, "observed_tokens_output")
		if e.Has("run_id") {
			// The schema requires a non-empty string; anything else reads
			// as "", which is never a run id.
			s, _ := e.GetString("run_id")
			c.RunID = &s
		}
		out = append(out, c)
	}
	return out
}

func optNumber(obj *pohjson.Value, key string) *float64 {
	if !obj.Has(key) {
		return nil
	}
	f := jsNumber(obj.Get(key))
	return &f
}

// jsNumber is the value of a JSON number. The envelope parser admits only
// safe integers (§2.1), so every number here is exact; anything else reads
// as NaN, which no rule accepts.
func jsNumber(v *pohjson.Value) float64 {
	if n, ok := v.Int(); ok {
		return float64(n)
	}
	return math.NaN()
}
