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
	"github.com/clawea/attester/internal/attestfixture"
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
	in := attestfixture.Input(t, &r.Run, h("audit head"), 17)
	in.EvidenceURI = "evidence/run_test_001.jws"
	return in
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
