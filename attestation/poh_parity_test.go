package attestation_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// resignWith adds a member to the run's bundle payload and signs it again
// with the agent key.
func resignWith(t *testing.T, r *run, env []byte, key string, v *pohjson.Value) []byte {
	t.Helper()
	e, err := pohjson.Parse(env)
	if err != nil {
		t.Fatal(err)
	}
	p := e.Get("payload")
	out, err := poh.Sign(poh.TypeProofBundle, pohjson.NewObject(append(p.Members(), pohjson.M(key, v))...), r.AgentKey, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAttestAppliesBundleParityRules: the attester's own bundle check
// (POST /v1/runs/{id}/attestation goes through Issuer.Attest) applies the
// rate-limit and tool receipt rules of schema/poh, with their codes.
func TestAttestAppliesBundleParityRules(t *testing.T) {
	vector := testfile.Read(t, filepath.Join("..", "schema", "poh", "testdata", "bundles", "valid_v2_cosigned_envelope.json"))
	ve, err := pohjson.Parse(vector)
	if err != nil {
		t.Fatal(err)
	}
	exceeded, err := pohjson.Parse([]byte(`[{"claim_version":"1","scope":"agent","scope_key":"k","window_start":"2026-06-01T12:00:00.000Z","window_end":"2026-06-01T12:01:00.000Z","max_requests":1,"observed_requests":2}]`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  string
		v    *pohjson.Value
		code poh.Code
	}{
		{"rate limit exceeded", "rate_limit_claims", exceeded, poh.RateLimitExceeded},
		// A valid receipt of another agent's bundle: refused before its
		// signatures are even checked.
		{"tool receipt of another agent", "tool_receipts", ve.Get("payload").Get("tool_receipts"), poh.ProofBundleAgentMismatch},
	}
	q := simSEV(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun()
			in := r.input(t)
			in.BundleEnvelope = resignWith(t, r, in.BundleEnvelope, tc.key, tc.v)
			out, err := issuer(q).Attest(context.Background(), in)
			if out != nil {
				t.Fatal("output returned with an error")
			}
			pe, ok := errors.AsType[*poh.Error](err)
			if !errors.Is(err, attestation.ErrBundle) || !ok || pe.Code != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}
