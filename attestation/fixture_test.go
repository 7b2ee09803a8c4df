package attestation_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/testfixture"
)

// fixedNow is inside the validity of every simulated certificate.
var fixedNow = testfixture.Now

var (
	key = testfixture.Key
	h   = testfixture.H
)

// run is one agent run as the attester saw it (testfixture.Run).
type run struct{ testfixture.Run }

func newRun() *run { return &run{*testfixture.NewRun("run_test_001")} }

func (r *run) bundle(t testing.TB) []byte { return r.Bundle(t) }

func (r *run) model() attestation.ModelIdentity {
	return attestation.ModelIdentity{Provider: r.Provider, Model: r.Model}
}

func (r *run) input(t testing.TB) attestation.AttestInput {
	return attestation.AttestInput{
		BundleEnvelope:               r.bundle(t),
		PromptCommittedEventHashB64u: r.PromptCommittedEventHash(t),
		AgentDID:                     r.AgentDID(),
		RunID:                        r.RunID,
		PromptHashB64u:               r.PromptHash,
		ReportHashB64u:               r.ReportHash,
		PackCiphertextHashB64u:       r.PackHash,
		GatePolicyHashB64u:           h("gate policy"),
		AuditRootB64u:                h("audit head"),
		AuditCount:                   17,
		Model:                        r.model(),
		Harness:                      testfixture.Harness(),
		EvidenceURI:                  "evidence/run_test_001.jws",
	}
}

func simSEV(t testing.TB) *sim.Simulator {
	t.Helper()
	s, err := sim.New(sim.Options{Seed: []byte("attestation-test")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simTDX(t testing.TB) *tdx.Simulated {
	t.Helper()
	s, err := tdx.NewSimulated(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func issuer(q enclave.Quoter) *attestation.Issuer {
	return &attestation.Issuer{
		Key:          key(9),
		Quoter:       q,
		Now:          func() time.Time { return fixedNow },
		RecipientKey: bytes.Repeat([]byte{0x42}, 32),
	}
}
