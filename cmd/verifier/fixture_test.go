package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
)

// fixture is a simulated SEV-SNP attestation made by the real producer
// (attestation.Issuer on enclave/sim), with the run's bundle, audit log
// and SystemPromptReport.
type fixture struct {
	att, ev, bundle, audit, report []byte
	measurement                    []byte
}

// newFixture attests one run on a simulated SEV-SNP machine at now.
func newFixture(t testing.TB, now time.Time) *fixture {
	t.Helper()
	q, err := sim.New(sim.Options{Seed: []byte("verifier-test")})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, now, q)
}

// fixturePlatform is a (simulated) platform a fixture is attested on.
type fixturePlatform interface {
	enclave.Quoter
	enclave.Measurer
}

// newFixtureOn attests one run on q, with evidence of gpus, at now.
func newFixtureOn(t testing.TB, now time.Time, q fixturePlatform, gpus ...enclave.Quoter) *fixture {
	t.Helper()
	clock := func() time.Time { return now }
	report, reportHash := testfixture.Report(t)
	r := testfixture.NewRun("run_verifier_001")
	r.PromptHash = testfixture.H(testfixture.ReportPrompt)
	r.ReportHash = reportHash
	r.BundleID = "bundle_verifier_001"
	bundle := r.Bundle(t)

	var log bytes.Buffer
	w, err := audit.NewWriter(&log, audit.WriterOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range r.ToolParams {
		if _, err := w.Append(audit.Entry{Session: "s1", Turn: fmt.Sprintf("t%d", i), Agent: "main", Tool: "exec", ParamsHash: p, Stage: "tool_policy", Decision: audit.Allow}); err != nil {
			t.Fatal(err)
		}
	}
	root, count := w.Root()

	in := attestfixture.Input(t, r, root, int64(count))
	in.BundleEnvelope = bundle
	out, m := attestfixture.Attest(t, testfixture.Key(9), q, clock, in, gpus...)
	return &fixture{att: out.AttestationJSON, ev: out.EvidenceJWS, bundle: bundle, audit: log.Bytes(), report: report, measurement: m}
}

// simPolicy is a policy file accepting the fixture's simulated evidence.
func (f *fixture) simPolicy() []byte {
	return []byte(fmt.Sprintf(`{"policy_version":%q,"allow_simulated":true,"allow_unchecked_revocation":true,"measurements_b64u":[%q]}`,
		verify.PolicyVersion, b64u.Encode(f.measurement)))
}

// prodPolicy is the same policy without the simulation relaxation.
func (f *fixture) prodPolicy() []byte {
	return []byte(fmt.Sprintf(`{"policy_version":%q,"measurements_b64u":[%q]}`, verify.PolicyVersion, b64u.Encode(f.measurement)))
}

// body is a request for f: documents as b64u when enc, else embedded.
func (f *fixture) body(policy string, enc bool) []byte {
	ms := [][2]any{{"request_version", RequestVersion}}
	if policy != "" {
		ms = append(ms, [2]any{"policy", policy})
	}
	if enc {
		ms = append(ms, [2]any{"attestation_b64u", b64u.Encode(f.att)}, [2]any{"evidence_b64u", b64u.Encode(f.ev)},
			[2]any{"bundle_b64u", b64u.Encode(f.bundle)}, [2]any{"report_b64u", b64u.Encode(f.report)})
	} else {
		ms = append(ms, [2]any{"attestation", json.RawMessage(f.att)}, [2]any{"evidence", string(f.ev)},
			[2]any{"bundle", json.RawMessage(f.bundle)}, [2]any{"report", json.RawMessage(f.report)})
	}
	ms = append(ms, [2]any{"audit_b64u", b64u.Encode(f.audit)})
	return object(ms...)
}

// object encodes members in order.
func object(ms ...[2]any) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m[0])
		v, err := json.Marshal(m[1])
		if err != nil {
			panic(err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// earKey writes an Ed25519 EAR key to dir and returns its path and public
// key.
func earKey(t testing.TB, dir string) (string, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ear.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}
