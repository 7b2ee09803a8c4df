package main

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/wire/evidencedoc"
)

// costPart is one part of a full verification's CPU time, measured on its
// own beside the platform-only baseline.
type costPart struct {
	name string
	cpu  time.Duration // per call
}

// costBreakdown measures, in the same run and the same way as the
// platform-only baseline (n calls on as many goroutines as there are
// CPUs, process CPU time per call), the parts of the full request's
// verification: verify.Verify alone (no HTTP, no EAR), the EAR (issue and
// sign), and inside Verify the three signed documents each on its own
// (the envelope, the evidence document, the proof bundle: parse, JSON
// Schema, canonical hashing and its one Ed25519 verification). It returns
// the line TestLoad prints: what the cost above the floor is made of.
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
	procs := runtime.GOMAXPROCS(0)
	cpu := func(do func() error) time.Duration { return measure(t, n, procs, do).cpuPerOp() }
	verifyCPU := cpu(func() error { _, err := verify.Verify(f.att, f.ev, f.bundle, pol, opts); return err })
	parts := []costPart{
		{"envelope", cpu(func() error {
			_, err := poh.Verify(f.att, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
			return err
		})},
		{"evidence document", cpu(func() error { _, err := evidencedoc.Parse(f.ev, env.SignerKey); return err })},
		{"proof bundle", cpu(func() error { _, err := poh.VerifyProofBundle(f.bundle, poh.BundleOptions{}); return err })},
	}
	earCPU := cpu(func() error {
		ar, err := earresult.New(res, nil, earresult.Options{Now: testfixture.Now, Build: buildPrefix + "test", Policy: pol})
		if err == nil {
			_, err = e.svc.signer.Sign(ar)
		}
		return err
	})
	ed := (floor - base) / 3
	docs := time.Duration(0)
	line := fmt.Sprintf("cost above the floor (full request, CPU per verification, each part measured alone in this run): service %.3f ms = verify.Verify %.3f ms + HTTP, request parse, EAR and response %.3f ms (the EAR alone, issued and signed: %.3f ms); verify.Verify = platform %.3f ms + three Ed25519 %.3f ms + the rest %.3f ms; the signed documents alone, each with its Ed25519 (%.3f ms):",
		ms(service), ms(verifyCPU), ms(service-verifyCPU), ms(earCPU), ms(base), ms(floor-base), ms(verifyCPU-floor), ms(ed))
	for _, p := range parts {
		line += fmt.Sprintf(" %s %.3f ms (%.3f above its Ed25519),", p.name, ms(p.cpu), ms(p.cpu-ed))
		docs += p.cpu - ed
	}
	return line + fmt.Sprintf(" so parsing, JSON Schema and hashing of the three documents %.3f ms, and the audit log, report, TEE claims, policy and the record of checks %.3f ms",
		ms(docs), ms(verifyCPU-floor-docs))
}
