package verify

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// toolReceiptEnvelope is a tool_receipt_envelope.v1, signed by signer, around
// a tool_receipt.v1 payload of r's agent bound to r's run, that expires at
// expiresAt.
func toolReceiptEnvelope(t testing.TB, r *run, signer ed25519.PrivateKey, expiresAt time.Time) *pohjson.Value {
	t.Helper()
	s, m := pohjson.NewString, pohjson.M
	payload := pohjson.NewObject(
		m("receipt_version", s("1")),
		m("receipt_id", s("tr_verify_001")),
		m("tool_name", s("exec")),
		m("args_hash_b64u", s(r.ToolParams[0])),
		m("result_hash_b64u", s(h("tool result"))),
		m("result_status", s("success")),
		m("hash_algorithm", s("SHA-256")),
		m("agent_did", s(r.AgentDID())),
		m("timestamp", s(poh.FormatTime(testNow))),
		m("latency_ms", pohjson.NewInt(3)),
		m("binding", pohjson.NewObject(m("run_id", s(r.RunID)))),
	)
	hash, err := pohjson.Hash(payload)
	if err != nil {
		t.Fatal(err)
	}
	return pohjson.NewObject(
		m("envelope_version", s("1")),
		m("envelope_type", s("tool_receipt")),
		m("payload", payload),
		m("payload_hash_b64u", s(hash)),
		m("hash_algorithm", s("SHA-256")),
		m("signature_b64u", s(b64u.Encode(ed25519.Sign(signer, []byte(hash))))),
		m("algorithm", s("Ed25519")),
		m("signer_did", s(didkey.Format(signer.Public().(ed25519.PublicKey)))),
		m("issued_at", s(poh.FormatTime(testNow))),
		m("expires_at", s(poh.FormatTime(expiresAt))),
	)
}

// bundleWithToolReceipts is r's bundle with payload.tool_receipts set to
// receipts, signed again by r's agent.
func bundleWithToolReceipts(t testing.TB, r *run, receipts ...*pohjson.Value) []byte {
	t.Helper()
	env, err := pohjson.Parse(r.bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	members := append(env.Get("payload").Members(), pohjson.M("tool_receipts", pohjson.NewArray(receipts...)))
	b, err := poh.Sign(poh.TypeProofBundle, pohjson.NewObject(members...), r.AgentKey, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestToolReceiptExpiryAtVerificationTime: a tool receipt's expires_at is
// checked against Options.Now, the time the verification is made for, not
// the machine's clock. The receipt expires a day after the fixed test time,
// long before today, so a verifier that read the clock would refuse it; one
// that expired an hour before the test time must be refused.
func TestToolReceiptExpiryAtVerificationTime(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	pol := attest(t, sev, r).simPolicy()
	opts := Options{Now: fixedNow}
	if !testNow.Add(24 * time.Hour).Before(time.Now()) {
		t.Fatalf("the fixed test time %v is not a day before the clock", testNow)
	}
	verifyWith := func(t *testing.T, expiresAt time.Time) (*Result, error) {
		t.Helper()
		spec := forgeRun(t, sev, r)
		spec.bundle = bundleWithToolReceipts(t, r, toolReceiptEnvelope(t, r, key(7), expiresAt))
		att, jws := forge(t, spec)
		return Verify(att, jws, spec.bundle, pol, opts)
	}
	t.Run("unexpired at Options.Now", func(t *testing.T) {
		res, err := verifyWith(t, testNow.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if res.Bundle == nil {
			t.Fatal("the bundle was not checked")
		}
	})
	t.Run("expired at Options.Now", func(t *testing.T) {
		_, err := verifyWith(t, testNow.Add(-time.Hour))
		wantErr(t, err, ErrRejected, checkBundle, "EXPIRED_TTL")
	})
}
