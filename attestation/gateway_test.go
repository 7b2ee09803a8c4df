package attestation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidencedoc"
)

// gatewayRun is a run whose two llm_calls went through the attester's
// gateway: the bundle carries their receipts, signed by the issuer's key.
func gatewayRun() *run {
	r := newRun()
	r.ReceiptKey = key(9)
	return r
}

// TestAttestCommitsGatewayRecord: with the run's gateway record, the
// commitments are v4 and carry its count and chain head, in the evidence
// context and in metadata.clawea alike.
func TestAttestCommitsGatewayRecord(t *testing.T) {
	r := gatewayRun()
	is := issuer(simSEV(t))
	in := r.input(t)
	if in.Gateway == nil || in.Gateway.ReceiptCount != 2 {
		t.Fatalf("fixture record %+v", in.Gateway)
	}
	out, v := attested(t, r, is, in)
	c := v.doc.Execution.Clawea
	if c.Version != evidencedoc.CommitmentsVersionV4 || c.Gateway == nil || *c.Gateway != *in.Gateway {
		t.Fatalf("commitments %+v", c)
	}
	want := fmt.Sprintf(`"gateway":{"receipt_count":2,"receipt_chain_b64u":%q}`, in.Gateway.ReceiptChainB64u)
	if !bytes.Contains(v.doc.EvidenceContext(), []byte(want+"}")) || !bytes.Contains(out.AttestationJSON, []byte(want+`,"simulated":true}`)) {
		t.Fatalf("context or metadata lacks %s", want)
	}
}

// TestAttestGatewayRefusals: a receipt moved to another event or run,
// reordered, dropped, altered, added or signed by another key, a receipt
// that states other system text than its llm_call event reports, and a
// record that holds receipts the bundle lacks, are each refused with their
// PoH reason code before anything is signed.
func TestAttestGatewayRefusals(t *testing.T) {
	swap := func(rs []json.RawMessage) []json.RawMessage { return []json.RawMessage{rs[1], rs[0]} }
	cases := []struct {
		name  string
		tweak func(r *run, in *attestation.AttestInput)
		code  poh.Code
	}{
		{"reordered", func(r *run, in *attestation.AttestInput) { r.EditReceipts = swap }, poh.EvidenceMismatch},
		{"dropped", func(r *run, in *attestation.AttestInput) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return rs[:1] }
		}, poh.MissingRequiredField},
		{"none in the bundle", func(r *run, in *attestation.AttestInput) {
			r.EditReceipts = func([]json.RawMessage) []json.RawMessage { return nil }
		}, poh.EvidenceMismatch},
		{"a receipt the record lacks", func(r *run, in *attestation.AttestInput) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.TokensOutput++ }
		}, poh.EvidenceMismatch},
		{"the record holds one more", func(r *run, in *attestation.AttestInput) { in.Gateway.ReceiptCount++ }, poh.EvidenceMismatch},
		{"moved to the other llm_call", func(r *run, in *attestation.AttestInput) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return []json.RawMessage{rs[0], rs[0]} }
		}, poh.MalformedEnvelope}, // the same receipt_id twice
		{"bound to the other llm_call", func(r *run, in *attestation.AttestInput) { r.MoveReceipt = true }, poh.ReceiptBindingMismatch},
		{"bound to a tool_call", func(r *run, in *attestation.AttestInput) {
			tool := eventHash(t, r, "tool_call")
			r.EditReceipt = func(i int, c *gateway.Call) {
				if i == 1 {
					c.EventHashB64u = tool
				}
			}
		}, poh.ReceiptBindingMismatch},
		{"bound to another run", func(r *run, in *attestation.AttestInput) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.RunID = "run_other" }
		}, poh.ReceiptBindingMismatch},
		{"signed by another key", func(r *run, in *attestation.AttestInput) {
			r.ReceiptKey = key(8)
			*in = r.input(t)
		}, poh.ClaimNotFound},
		{"other system text", func(r *run, in *attestation.AttestInput) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.SystemTextSHA256[0] ^= 1 }
		}, poh.EvidenceMismatch},
		{"another suffix length", func(r *run, in *attestation.AttestInput) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.SuffixUTF16Len++ }
		}, poh.EvidenceMismatch},
		{"another model", func(r *run, in *attestation.AttestInput) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.Model = "claude-haiku" }
		}, poh.EvidenceMismatch},
		{"altered after signing", func(r *run, in *attestation.AttestInput) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage {
				return []json.RawMessage{rs[0], bytes.Replace(rs[1], []byte(`"tokens_output":50`), []byte(`"tokens_output":5`), 1)}
			}
		}, poh.HashMismatch},
	}
	q := simSEV(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := gatewayRun()
			in := r.input(t)
			tc.tweak(r, &in)
			in.BundleEnvelope = r.bundle(t)
			out, err := issuer(q).Attest(context.Background(), in)
			if out != nil {
				t.Fatal("output returned with an error")
			}
			pe, ok := errors.AsType[*poh.Error](err)
			if !ok || pe.Code != tc.code || !errors.Is(err, attestation.ErrBundle) {
				t.Fatalf("got %v, want a *poh.Error with %s", err, tc.code)
			}
		})
	}
}

// eventHash is the event_hash_b64u of the first event of type typ in r's
// bundle.
func eventHash(t testing.TB, r *run, typ string) string {
	t.Helper()
	b, err := poh.VerifyProofBundle(r.bundle(t), poh.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Events {
		if e.EventType == typ {
			return e.EventHashB64u
		}
	}
	t.Fatalf("no %s event", typ)
	return ""
}
