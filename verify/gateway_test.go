package verify

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidencedoc"
)

// gatewayRun is a run whose llm_calls went through the attester's gateway.
func gatewayRun(t testing.TB) *run {
	r := newRun(t)
	r.ReceiptKey = attesterKey()
	return r
}

// TestVerifyGatewayReceipts: the producer's attestation of a gateway run
// verifies, with the receipts checked against the committed record, and
// passes require_gateway.
func TestVerifyGatewayReceipts(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), gatewayRun(t))
	pol := f.simPolicy()
	pol.RequireGateway = true
	res, err := Verify(f.att, f.ev, f.bundle, pol, f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Commitments.Gateway; res.Commitments.Version != evidencedoc.CommitmentsVersionV4 || g == nil || g.ReceiptCount != 2 {
		t.Fatalf("commitments %+v", res.Commitments)
	}
	if !passed(res, checkGateway) {
		t.Fatalf("checks %+v", res.Checks)
	}
	// The bundle is required to see every llm_call's receipt.
	_, err = Verify(f.att, f.ev, nil, pol, f.opts())
	wantErr(t, err, ErrCannotCheck, checkPolicy+"/"+policyGateway, poh.DependencyNotConfigured)
}

// TestVerifyRequireGateway: require_gateway refuses an attestation without
// a gateway record; without the policy it verifies as before.
func TestVerifyRequireGateway(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	pol := f.simPolicy()
	if _, err := Verify(f.att, f.ev, f.bundle, pol, f.opts()); err != nil {
		t.Fatal(err)
	}
	pol.RequireGateway = true
	_, err := Verify(f.att, f.ev, f.bundle, pol, f.opts())
	wantErr(t, err, ErrPolicy, checkPolicy+"/"+policyGateway, "")
}

// TestVerifyRefusesMovedOrAlteredReceipts: an attestation that commits to
// the gateway's record (signed over a bundle the attester would have
// refused) does not verify when the bundle's receipts are not the
// record's: each moved, reordered, dropped, added or altered receipt is
// refused with its check and reason.
func TestVerifyRefusesMovedOrAlteredReceipts(t *testing.T) {
	q := simSEV(t, sim.Options{})
	good := gatewayRun(t)
	rec := attestfixture.Input(t, &good.Run, "", 0).Gateway
	first := func(rs []json.RawMessage) []json.RawMessage { return rs[:1] }
	cases := []struct {
		name  string
		edit  func(r *run)
		check string
		code  poh.Code
	}{
		{"reordered", func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return []json.RawMessage{rs[1], rs[0]} }
		}, checkGateway, poh.EvidenceMismatch},
		{"dropped", func(r *run) { r.EditReceipts = first }, checkGateway, poh.MissingRequiredField},
		{"none", func(r *run) {
			r.EditReceipts = func([]json.RawMessage) []json.RawMessage { return nil }
		}, checkGateway, poh.EvidenceMismatch},
		{"re-signed with other tokens", func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.TokensInput = 1 }
		}, checkGateway, poh.EvidenceMismatch},
		{"moved to the other llm_call", func(r *run) { r.MoveReceipt = true }, checkGateway, poh.ReceiptBindingMismatch},
		{"moved to another run", func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.RunID = "run_other" }
		}, checkBundle, poh.ReceiptBindingMismatch},
		{"signed by another gateway", func(r *run) { r.ReceiptKey = key(8) }, checkGateway, poh.ClaimNotFound},
		{"other system text", func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.SuffixSHA256[31] ^= 1 }
		}, checkGateway, poh.EvidenceMismatch},
		{"altered after signing", func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage {
				return []json.RawMessage{bytes.Replace(rs[0], []byte(`"tokens_input":1000`), []byte(`"tokens_input":1`), 1), rs[1]}
			}
		}, checkBundle, poh.HashMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := gatewayRun(t)
			tc.edit(r)
			spec := forgeRun(t, q, r)
			spec.commitments = func(c *evidencedoc.Commitments) { c.Version, c.Gateway = evidencedoc.CommitmentsVersionV4, rec }
			att, jws := forge(t, spec)
			pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowAnyMeasurement: true}
			_, err := Verify(att, jws, spec.bundle, pol, Options{Now: fixedNow})
			wantErr(t, err, ErrRejected, tc.check, tc.code)
		})
	}
	// The same forgery over the unedited bundle verifies: the refusals
	// above are the receipts', not the forgery's.
	spec := forgeRun(t, q, good)
	spec.commitments = func(c *evidencedoc.Commitments) { c.Version, c.Gateway = evidencedoc.CommitmentsVersionV4, rec }
	att, jws := forge(t, spec)
	if _, err := Verify(att, jws, spec.bundle, &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowAnyMeasurement: true, RequireGateway: true}, Options{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
}

func passed(res *Result, name string) bool {
	for _, c := range res.Checks {
		if c.Name == name {
			return c.Status == StatusPassed
		}
	}
	return false
}
