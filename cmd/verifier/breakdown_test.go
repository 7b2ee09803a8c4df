package main

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/auditrec"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/teeclaims"
)

// proofBundleEnvelopeSchema is the JSON Schema of a proof bundle envelope
// (schema/poh validates bundles against it).
const proofBundleEnvelopeSchema = "https://schemas.clawbureau.org/claw.poh.proof_bundle_envelope.v1.json"

// costPart is one part of a full verification, run on its own.
type costPart struct {
	name string
	do   func() error
}

// costBreakdown measures, in the same run and the same way as the
// platform-only baseline (n calls on as many goroutines as there are
// CPUs, process CPU time per call), the parts of the full request's
// verification, each on its own: verify.Verify (no HTTP, no EAR), the
// EAR (issued and signed), the three signed documents (envelope, evidence
// document, proof bundle: parse, JSON Schema, canonical hashing and one
// Ed25519 each), the JSON Schema validation of the two envelopes on its
// own, and the other checks of Verify: the audit log, the report, the
// bundle's prompt commitments, the TEE claims and the platform policy. It
// returns the lines TestLoad prints: what the cost above the floor
// (base: platform-only, floor: plus three Ed25519) is made of.
func costBreakdown(t *testing.T, e *env, n int, base, floor, service time.Duration) string {
	t.Helper()
	f := e.f
	pol := e.svc.snap.Load().policies[DefaultPolicy]
	opts := verify.Options{Now: func() time.Time { return testfixture.Now }, CertCache: e.svc.cache, AuditLog: f.audit, Report: f.report}
	res, err := verify.Verify(f.att, f.ev, f.bundle, pol, opts)
	if err != nil {
		t.Fatal(err)
	}
	env, err := poh.Verify(f.att, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := evidencedoc.Parse(f.ev, env.SignerKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := poh.VerifyProofBundle(f.bundle, poh.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attTree, err1 := pohjson.Parse(f.att)
	bundleTree, err2 := pohjson.Parse(f.bundle)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	c := &res.Commitments
	promised := poh.PromptCommitments{RunID: res.RunID, AgentDID: res.AgentDID, SystemPromptHashB64u: c.SystemPromptHashB64u,
		SystemPromptReportHashB64u: c.SystemPromptReportHashB64u, PromptPackCiphertextHashB64u: c.PromptPackCiphertextHashB64u,
		Provider: c.ModelIdentity.Provider, Model: c.ModelIdentity.Model}
	if res.Harness != nil {
		promised.HarnessID = res.Harness.ID
	}
	docs := []costPart{
		{"envelope", func() error {
			_, err := poh.Verify(f.att, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
			return err
		}},
		{"evidence document", func() error { _, err := evidencedoc.Parse(f.ev, env.SignerKey); return err }},
		{"proof bundle", func() error { _, err := poh.VerifyProofBundle(f.bundle, poh.BundleOptions{}); return err }},
	}
	checks := []costPart{
		{"audit log", func() error {
			_, _, err := auditrec.Read(bytes.NewReader(f.audit), func(auditrec.Record) error { return nil })
			return err
		}},
		{"report (parse, schema, JCS hash)", func() error {
			if err := schemas.Validate(schemas.SystemPromptReportV1, f.report); err != nil {
				return err
			}
			_, err := jcs.Hash(f.report)
			return err
		}},
		{"prompt commitments", func() error { return poh.CheckPromptCommitments(b, promised) }},
		{"TEE claims", func() error {
			_, err := teeclaims.DeriveWith(doc.Items[0].Evidence, teeclaims.Options{ParseCertificate: e.svc.cache.ParseCertificate})
			return err
		}},
		{"platform policy (go-sev-guest validate)", func() error { return platform.CheckPolicy(res.Platform[0], pol.Platform()) }},
	}
	procs := runtime.GOMAXPROCS(0)
	cpu := func(do func() error) time.Duration { return measure(t, n, procs, do).cpuPerOp() }
	x := func(d time.Duration) string { return fmt.Sprintf("%.3f ms (%.2fx)", ms(d), ms(d)/ms(base)) }
	verifyCPU := cpu(func() error { _, err := verify.Verify(f.att, f.ev, f.bundle, pol, opts); return err })
	earCPU := cpu(func() error {
		ar, err := earresult.New(res, nil, earresult.Options{Now: testfixture.Now, Build: buildPrefix + "test", Policy: pol})
		if err == nil {
			_, err = e.svc.signer.Sign(ar)
		}
		return err
	})
	schemaCPU := cpu(func() error {
		if err := schemas.ValidateValue(schemas.ExecutionAttestationEnvelopeV1, attTree); err != nil {
			return err
		}
		return schemas.ValidateValue(proofBundleEnvelopeSchema, bundleTree)
	})
	ed := (floor - base) / 3
	var sb strings.Builder
	fmt.Fprintf(&sb, "cost above the floor, full request (CPU per verification, each part run alone in this run; x: over platform-only):\n"+
		"  service %s = verify.Verify %s + HTTP, request parse, EAR and response %s (the EAR alone, issued and signed: %s)\n"+
		"  verify.Verify = platform-only %s + three Ed25519 %s + the rest %s, made of:\n",
		x(service), x(verifyCPU), x(service-verifyCPU), x(earCPU), x(base), x(floor-base), x(verifyCPU-floor))
	rest := verifyCPU - floor
	for _, p := range docs {
		d := cpu(p.do) - ed
		rest -= d
		fmt.Fprintf(&sb, "    %s, less one Ed25519 (the floor's mean, %.3f ms): %s\n", p.name, ms(ed), x(d))
	}
	fmt.Fprintf(&sb, "      (of these, the JSON Schema validation of the two envelopes alone: %s)\n", x(schemaCPU))
	for _, p := range checks {
		d := cpu(p.do)
		rest -= d
		fmt.Fprintf(&sb, "    %s: %s\n", p.name, x(d))
	}
	fmt.Fprintf(&sb, "    the record of checks, result and everything not listed: %s", x(rest))
	return sb.String()
}
