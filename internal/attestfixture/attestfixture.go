// Package attestfixture fills the attester's issuer input for a
// testfixture.Run and runs the issuer on it. It is apart from testfixture
// so that testfixture stays importable by the internal tests of the
// packages attestation depends on.
// Only tests import it (internal/layers enforces that).
package attestfixture

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidencedoc"
)

// Input is what the issuer is given for r: its signed bundle (r.Bundle),
// its commitments, the model, testfixture.Harness, the hash of the gate
// policy "gate policy", the audit log head auditRoot of auditCount records
// and, when r has a receipt key, the gateway record of its receipts as the
// gateway issued them (before r's receipt edits).
func Input(t testing.TB, r *testfixture.Run, auditRoot string, auditCount int64) attestation.AttestInput {
	t.Helper()
	return attestation.AttestInput{
		Gateway:                      gatewayRecord(t, r),
		BundleEnvelope:               r.Bundle(t),
		PromptCommittedEventHashB64u: r.PromptCommittedEventHash(t),
		AgentDID:                     r.AgentDID(),
		RunID:                        r.RunID,
		PromptHashB64u:               r.PromptHash,
		ReportHashB64u:               r.ReportHash,
		PackCiphertextHashB64u:       r.PackHash,
		GatePolicyHashB64u:           testfixture.H("gate policy"),
		AuditRootB64u:                auditRoot,
		AuditCount:                   auditCount,
		Model:                        attestation.ModelIdentity{Provider: r.Provider, Model: r.Model},
		Harness:                      testfixture.Harness(),
	}
}

// gatewayRecord is the gateway record of r's receipts as signed, before
// r's receipt edits: what the attester's gateway holds.
func gatewayRecord(t testing.TB, r *testfixture.Run) *evidencedoc.GatewayRecord {
	t.Helper()
	if r.ReceiptKey == nil {
		return nil
	}
	issued := *r
	issued.EditReceipt, issued.EditReceipts, issued.MoveReceipt = nil, nil, false
	b, err := pohjson.Parse(issued.Bundle(t))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	chain := ""
	for _, env := range b.Get("payload").Get("receipts").Elems() {
		raw, err := pohjson.Stringify(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, chain, err = poh.ChainGatewayReceipt(chain, n, raw); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return &evidencedoc.GatewayRecord{ReceiptCount: n, ReceiptChainB64u: chain}
}

// platform is what Attest attests on: it quotes and reports its launch measurement.
type platform interface {
	enclave.Quoter
	enclave.Measurer
}

// Attest runs an issuer with key, q, now and GPU evidence from gpus (none
// when empty) on in and returns its output and q's launch measurement.
func Attest(t testing.TB, key ed25519.PrivateKey, q platform, now func() time.Time, in attestation.AttestInput, gpus ...enclave.Quoter) (*attestation.Output, []byte) {
	t.Helper()
	is := &attestation.Issuer{Key: key, Quoter: q, Now: now, GPUs: gpus}
	out, err := is.Attest(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.LaunchMeasurement(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out, m
}
