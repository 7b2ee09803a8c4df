package main

import (
	"bytes"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
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

// costBreakdown measures every part in rounds of breakdownCalls calls
// each (at least breakdownMinRounds rounds), one part after the other.
const (
	breakdownCalls     = 100
	breakdownMinRounds = 7
)

// breakdownRounds is the rounds and the calls per round for n calls of
// each part in all.
func breakdownRounds(n int) (rounds, per int) {
	rounds = max(breakdownMinRounds, n/breakdownCalls)
	return rounds, max(n/rounds, 50)
}

// partCost is one part's CPU per call in each round.
type partCost []time.Duration

// med is the part's median CPU per call over the rounds.
func (c partCost) med() time.Duration { return median(c) }

// gcCPU is the runtime's estimate of the CPU time its garbage collector
// has spent (runtime/metrics /cpu/classes/gc/total, brought up to date
// at each collection): over many collections, the collector's cost of
// whatever ran meanwhile, since what allocates triggers them.
func gcCPU() time.Duration {
	s := []rtmetrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// measureRounds measures every part in rounds of about n calls in all
// (breakdownRounds), each round running every part in turn, the way TestLoad
// measures the baseline (as many goroutines as CPUs, process CPU time per
// call). A part measured once, minutes away from the whole it is
// subtracted from, carries the drift of a shared host between the two
// (the "everything not listed" line read 0.42 ms in the lead's run on
// main and 0.08 ms in one here the same day, same code); measured in the
// same short rounds, the parts and the whole drift alike, and the median
// of each hides a round the host disturbed.
// It also returns each part's collector CPU per call over all rounds
// (gcCPU).
func measureRounds(t *testing.T, n int, parts []costPart) ([]partCost, []time.Duration) {
	t.Helper()
	procs := runtime.GOMAXPROCS(0)
	rounds, per := breakdownRounds(n)
	out, gc := make([]partCost, len(parts)), make([]time.Duration, len(parts))
	for range rounds {
		for i, p := range parts {
			gc0 := gcCPU()
			out[i] = append(out[i], measure(t, per, procs, p.do).cpuPerOp())
			gc[i] += gcCPU() - gc0
		}
	}
	for i := range gc {
		gc[i] /= time.Duration(rounds * per)
	}
	return out, gc
}

// costBreakdown measures, in the same run and the same way as the
// platform-only baseline, the parts of the full request's verification,
// each on its own, in interleaved rounds (measureRounds): the
// platform-only verification and the floor (plus three Ed25519),
// verify.Verify (no HTTP, no EAR), the EAR (issued and signed), the three
// signed documents (envelope, evidence document, proof bundle: parse,
// JSON Schema, canonical hashing and one Ed25519 each), the JSON Schema
// validation of the two envelopes on its own, and the other checks of
// Verify: the evidence reference hash, the audit log, the report, the
// bundle's prompt commitments, the TEE claims, the platform policy and
// the policy's id. What Verify costs beyond the platform check and these
// parts is the rest, computed in each round; its median and range say
// whether it is more than the host's noise, and the profile
// (BenchmarkVerify/sev-snp-cached -cpuprofile) names what it is. It
// returns the lines TestLoad prints.
func costBreakdown(t *testing.T, e *env, n int, platformOnce, floorOnce func() error, service time.Duration) string {
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
	// The whole and its baselines, then the documents (each less one
	// Ed25519 when printed), then the other checks; the rest is the whole
	// less the platform check and every part from the documents on.
	const (
		iPlatform = iota
		iFloor
		iVerify
		iEAR
		iSchema
		iDocs
	)
	parts := []costPart{
		{name: "platform-only", do: platformOnce},
		{name: "floor", do: floorOnce},
		{name: "verify.Verify", do: func() error { _, err := verify.Verify(f.att, f.ev, f.bundle, pol, opts); return err }},
		{name: "EAR", do: func() error {
			ar, err := earresult.New(res, nil, earresult.Options{Now: testfixture.Now, Build: buildPrefix + "test", Policy: pol})
			if err == nil {
				_, err = e.svc.signer.Sign(ar)
			}
			return err
		}},
		{name: "schema", do: func() error {
			if err := schemas.ValidateValue(schemas.ExecutionAttestationEnvelopeV1, attTree); err != nil {
				return err
			}
			return schemas.ValidateValue(proofBundleEnvelopeSchema, bundleTree)
		}},
		{name: "envelope", do: func() error {
			_, err := poh.Verify(f.att, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
			return err
		}},
		{name: "evidence document", do: func() error { _, err := evidencedoc.Parse(f.ev, env.SignerKey); return err }},
		{name: "proof bundle", do: func() error { _, err := poh.VerifyProofBundle(f.bundle, poh.BundleOptions{}); return err }},
	}
	iChecks := len(parts)
	parts = append(parts, []costPart{
		{name: "evidence reference (SHA-256 of the evidence document)", do: func() error { b64u.SHA256(f.ev); return nil }},
		{name: "audit log", do: func() error {
			_, _, err := auditrec.Read(bytes.NewReader(f.audit), func(auditrec.Record) error { return nil })
			return err
		}},
		{name: "report (parse, schema, JCS hash)", do: func() error {
			if err := schemas.Validate(schemas.SystemPromptReportV1, f.report); err != nil {
				return err
			}
			_, err := jcs.Hash(f.report)
			return err
		}},
		{name: "prompt commitments", do: func() error { return poh.CheckPromptCommitments(b, promised) }},
		{name: "TEE claims", do: func() error {
			_, err := teeclaims.DeriveWith(doc.Items[0].Evidence, teeclaims.Options{ParseCertificate: e.svc.cache.ParseCertificate})
			return err
		}},
		{name: "platform policy (go-sev-guest validate)", do: func() error { return platform.CheckPolicy(res.Platform[0], pol.Platform()) }},
		{name: "policy id (the policy encoded and hashed, per request)", do: func() error { pol.ID(); return nil }},
	}...)
	// The platform check and the parts from the documents on, one after
	// the other in one call: what they cost together, with the caches and
	// predictors a whole verification leaves them, against Verify.
	iSeq := len(parts)
	seq := slices.Concat(parts[iPlatform:iPlatform+1], parts[iDocs:])
	parts = append(parts, costPart{name: "the parts in sequence", do: func() error {
		for _, p := range seq {
			if err := p.do(); err != nil {
				return err
			}
		}
		return nil
	}})
	costs, gc := measureRounds(t, n, parts)
	_, per := breakdownRounds(n)
	base, floor, verifyCPU := costs[iPlatform].med(), costs[iFloor].med(), costs[iVerify].med()
	ed := (floor - base) / 3
	x := func(d time.Duration) string { return fmt.Sprintf("%.3f ms (%.2fx)", ms(d), ms(d)/ms(base)) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "cost above the floor, full request (CPU per verification; each part run alone, all in %d interleaved rounds of %d calls, medians; x: over platform-only in these rounds):\n"+
		"  service %s = verify.Verify %s + HTTP, request parse, EAR and response %s (the EAR alone, issued and signed: %s)\n"+
		"  verify.Verify = platform-only %s + three Ed25519 %s + the rest %s, made of:\n",
		len(costs[iVerify]), per, x(service), x(verifyCPU), x(service-verifyCPU), x(costs[iEAR].med()),
		x(base), x(floor-base), x(verifyCPU-floor))
	for i := iDocs; i < iChecks; i++ {
		fmt.Fprintf(&sb, "    %s, less one Ed25519 (the floor's mean, %.3f ms): %s\n", parts[i].name, ms(ed), x(costs[i].med()-ed))
	}
	fmt.Fprintf(&sb, "      (of these, the JSON Schema validation of the two envelopes alone: %s)\n", x(costs[iSchema].med()))
	for i := iChecks; i < iSeq; i++ {
		fmt.Fprintf(&sb, "    %s: %s\n", parts[i].name, x(costs[i].med()))
	}
	// Per round: the rest is Verify less the platform check and the parts
	// alone; it splits into what running them in sequence adds (the
	// sequence less the parts alone) and Verify's own steps (Verify less
	// the sequence).
	rounds := len(costs[iVerify])
	rest, together, own := make(partCost, rounds), make(partCost, rounds), make(partCost, rounds)
	for r := range rest {
		alone := costs[iPlatform][r]
		for i := iDocs; i < iSeq; i++ {
			alone += costs[i][r]
		}
		rest[r] = costs[iVerify][r] - alone
		together[r] = costs[iSeq][r] - alone
		own[r] = costs[iVerify][r] - costs[iSeq][r]
	}
	var partsGC time.Duration
	for i := iDocs; i < iSeq; i++ {
		partsGC += gc[i]
	}
	spread := func(d partCost) string {
		q := slices.Clone(d)
		slices.Sort(q)
		return fmt.Sprintf("%s (the middle half of the rounds from %.3f to %.3f ms)", x(d.med()), ms(q[len(q)/4]), ms(q[len(q)*3/4]))
	}
	fmt.Fprintf(&sb, "    not listed, per round: Verify less the platform check and the parts alone, median %s, of which\n", spread(rest))
	fmt.Fprintf(&sb, "      running the parts one after the other in one call rather than each alone (caches, predictors): median %s\n", spread(together))
	fmt.Fprintf(&sb, "      Verify's own steps (the record of checks, the payload and nonce binding, the commitments re-encoded and compared, the result): median %s\n", spread(own))
	fmt.Fprintf(&sb, "  the garbage collector at GC target %d%% (the runtime's estimate over all rounds, included above), per call: verify.Verify %.3f ms; the platform-only %.3f ms and the parts alone %.3f ms together; the parts in sequence %.3f ms",
		DefaultGCPercent, ms(gc[iVerify]), ms(gc[iPlatform]), ms(partsGC), ms(gc[iSeq]))
	return sb.String()
}
