package attestation_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	sevabi "github.com/google/go-sev-guest/abi"
	sevvalidate "github.com/google/go-sev-guest/validate"
	sevverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
	tdxvalidate "github.com/google/go-tdx-guest/validate"
	tdxverify "github.com/google/go-tdx-guest/verify"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/nvspdm"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/clawea/attester/wire/teeclaims"
)

// verified is what an offline check of an Output established, for further
// assertions.
type verified struct {
	env     *poh.Verified
	payload poh.ExecutionAttestation
	doc     *evidencedoc.Document
	rd      evidence.ReportData
}

// attested is is.Attest of in, checked by checkOutput; a refusal fails t.
func attested(t *testing.T, r *run, is *attestation.Issuer, in attestation.AttestInput) (*attestation.Output, *verified) {
	t.Helper()
	out, err := is.Attest(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out, checkOutput(t, r, is, out)
}

// checkOutput verifies an Output the way an offline verifier would, with
// independent recomputation of every binding, except the platform
// signature checks which the callers do per platform.
func checkOutput(t *testing.T, r *run, is *attestation.Issuer, out *attestation.Output) *verified {
	t.Helper()
	if err := schemas.Validate(schemas.ExecutionAttestationEnvelopeV1, out.AttestationJSON); err != nil {
		t.Fatalf("schema: %v", err)
	}
	env, err := poh.Verify(out.AttestationJSON, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
	if err != nil {
		t.Fatalf("poh.Verify: %v", err)
	}
	pub := is.Key.Public().(ed25519.PublicKey)
	if env.SignerDID != didkey.Format(pub) {
		t.Fatalf("signer %s, want the attester", env.SignerDID)
	}
	raw, err := pohjson.Stringify(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var p poh.ExecutionAttestation
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	bundleEnv, err := poh.Verify(r.bundle(t), poh.VerifyOptions{Type: poh.TypeProofBundle})
	if err != nil {
		t.Fatal(err)
	}
	if p.ExecutionType != "tee_execution" || p.AgentDID != r.AgentDID() || p.RunID != r.RunID ||
		p.AttesterDID != env.SignerDID || p.ProofBundleHashB64u != bundleEnv.PayloadHashB64u ||
		p.AttestationID != out.AttestationID || p.IssuedAt != "2026-06-01T12:00:00.000Z" {
		t.Fatalf("payload header fields: %+v", p)
	}
	tee := p.RuntimeMetadata.TEE
	wantNonce, err := poh.NonceBindingB64u(r.AgentDID(), r.RunID, bundleEnv.PayloadHashB64u)
	if err != nil {
		t.Fatal(err)
	}
	if tee.NonceBindingB64u != wantNonce || out.NonceBindingB64u != wantNonce {
		t.Fatalf("nonce binding %s, want %s", tee.NonceBindingB64u, wantNonce)
	}
	sum := sha256.Sum256(out.EvidenceJWS)
	if tee.EvidenceRef.ResourceHashB64u != b64u.Encode(sum[:]) || tee.EvidenceRef.ResourceType != "clawea.dev/evidence/v1" || tee.EvidenceRef.URI != "evidence/run_test_001.jws" {
		t.Fatalf("evidence_ref %+v", tee.EvidenceRef)
	}
	wantModel := modelDigest(t, r.model().Provider, r.model().Model, r.model().Revision)
	if tee.Measurements.ModelWeightsDigestB64u != wantModel {
		t.Fatalf("model digest %s, want %s", tee.Measurements.ModelWeightsDigestB64u, wantModel)
	}

	doc, err := evidencedoc.Parse(out.EvidenceJWS, pub)
	if err != nil {
		t.Fatalf("evidencedoc.Parse: %v", err)
	}
	if doc.Kind != evidencedoc.KindExecution || len(doc.Items) != 1+len(is.GPUs) || doc.Execution.AttestationID != p.AttestationID {
		t.Fatalf("document: kind %s, %d items", doc.Kind, len(doc.Items))
	}
	// metadata.clawea equals the hardware-bound commitments plus simulated.
	var md struct {
		Clawea evidencedoc.Metadata `json:"clawea"`
	}
	mdRaw, _ := json.Marshal(p.Metadata)
	dec := json.NewDecoder(bytes.NewReader(mdRaw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&md); err != nil {
		t.Fatalf("metadata.clawea: %v", err)
	}
	if !reflect.DeepEqual(md.Clawea.Commitments, doc.Execution.Clawea) || !md.Clawea.Simulated || !out.Simulated {
		t.Fatalf("metadata.clawea %+v differs from the evidence context %+v", md.Clawea, doc.Execution.Clawea)
	}
	c := md.Clawea
	if c.SystemPromptHashB64u != r.PromptHash || c.SystemPromptReportHashB64u != r.ReportHash ||
		c.PromptPackCiphertextHashB64u != r.PackHash || c.GateAuditCount != 17 || c.ModelIdentityDigestB64u != wantModel {
		t.Fatalf("commitments %+v", c)
	}
	// REPORT_DATA recomputed from scratch: PoH nonce binding || identity binding.
	nb, err := poh.NonceBinding(r.AgentDID(), r.RunID, bundleEnv.PayloadHashB64u)
	if err != nil {
		t.Fatal(err)
	}
	ctxBytes := testjson.Marshal(t, doc.Execution)
	if !bytes.Equal(ctxBytes, doc.EvidenceContext()) {
		t.Fatalf("evidence context is not the stringified execution member:\n%s\n%s", ctxBytes, doc.EvidenceContext())
	}
	rd, err := evidence.NewReportData(nb, pub, ctxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := doc.ReportData(); got != rd {
		t.Fatal("Document.ReportData differs from the recomputed REPORT_DATA")
	}
	claims, err := teeclaims.Derive(doc.Items[0].Evidence)
	if err != nil {
		t.Fatal(err)
	}
	if err := teeclaims.CheckReportData(doc.Items[0].Evidence, claims, rd); err != nil {
		t.Fatal(err)
	}
	if tee.AttestationType != claims.AttestationType || tee.RootID != claims.RootID || tee.TCBVersion != claims.TCBVersion ||
		tee.Measurements.MeasurementHashB64u != b64u.Encode(claims.Measurement) {
		t.Fatalf("tee claims %+v differ from the evidence %+v", tee, claims)
	}
	return &verified{env: env, payload: p, doc: doc, rd: rd}
}

var sevVerifyTime = fixedNow

func sevSimOptions(t *testing.T) *sevverify.Options {
	t.Helper()
	roots := trust.AMDRootCertsProduct(simroots.SEVSNPProductLine)
	if err := roots.FromKDSCertBytes(simroots.SEVSNPCertChainPEM()); err != nil {
		t.Fatal(err)
	}
	return &sevverify.Options{DisableCertFetching: true, Now: sevVerifyTime,
		TrustedRoots: map[string][]*trust.AMDRootCerts{simroots.SEVSNPProductLine: {roots}}}
}

// verifySEV checks SEV-SNP evidence with go-sev-guest: signatures to the
// simulated roots, then policy with the recomputed REPORT_DATA.
func verifySEV(t *testing.T, ev *evidence.Evidence, rd evidence.ReportData) {
	t.Helper()
	a := testfixture.SEVAttestation(t, ev)
	if err := sevverify.SnpAttestation(a, sevSimOptions(t)); err != nil {
		t.Fatalf("go-sev-guest verify with the simulated roots: %v", err)
	}
	want := rd.Bytes()
	vmpl := 0
	if err := sevvalidate.SnpAttestation(a, &sevvalidate.Options{
		ReportData: want[:], GuestPolicy: sevabi.SnpPolicy{SMT: true}, VMPL: &vmpl,
	}); err != nil {
		t.Fatalf("go-sev-guest validate: %v", err)
	}
	// A production verifier (AMD's roots) refuses simulated evidence.
	prod := sevverify.DefaultOptions()
	prod.DisableCertFetching = true
	prod.Getter = nil
	prod.Now = sevVerifyTime
	if err := sevverify.SnpAttestation(a, prod); err == nil {
		t.Fatal("simulated evidence verified with AMD's roots")
	}
	// And the wrong REPORT_DATA fails policy.
	other := want
	other[40] ^= 1
	if err := sevvalidate.SnpAttestation(a, &sevvalidate.Options{ReportData: other[:], GuestPolicy: sevabi.SnpPolicy{SMT: true}, VMPL: &vmpl}); err == nil {
		t.Fatal("validate accepted another REPORT_DATA")
	}
}

func TestAttestSEVSNP(t *testing.T) {
	r := newRun()
	is := issuer(simSEV(t))
	out, v := attested(t, r, is, r.input(t))
	tee := v.payload.RuntimeMetadata.TEE
	if tee.AttestationType != "sev_snp_report" || tee.RootID != "sev-snp:amd-ark-Milan:SIMULATED" || tee.TCBVersion != "7308000000000003" {
		t.Fatalf("tee %+v", tee)
	}
	if out.Platform != evidence.PlatformSEVSNP {
		t.Fatalf("platform %s", out.Platform)
	}
	verifySEV(t, v.doc.Items[0].Evidence, v.rd)
}

// TestAttestCommitsAdmission: the commitments are v2 and carry the run's
// admission policy hash and sensitive flag, in the evidence context (bound
// into REPORT_DATA) and in metadata.clawea alike.
func TestAttestCommitsAdmission(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    string
		sensitive bool
	}{{"no policy", "", false}, {"policy", h("admission policy"), false}, {"sensitive", h("admission policy"), true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun()
			is := issuer(simSEV(t))
			in := r.input(t)
			in.AdmissionPolicyHashB64u, in.Sensitive = tc.policy, tc.sensitive
			out, v := attested(t, r, is, in)
			c := v.doc.Execution.Clawea
			if c.Version != evidencedoc.CommitmentsVersionV2 || c.AdmissionPolicyHashB64u != tc.policy || c.Sensitive != evidencedoc.SensitivityOf(tc.sensitive) {
				t.Fatalf("commitments %+v", c)
			}
			want := fmt.Sprintf(`"model_identity_digest_b64u":%q,`, c.ModelIdentityDigestB64u)
			if tc.policy != "" {
				want += fmt.Sprintf(`"admission_policy_hash_b64u":%q,`, tc.policy)
			}
			want += fmt.Sprintf(`"sensitive":%t`, tc.sensitive)
			if !bytes.Contains(v.doc.EvidenceContext(), []byte(want+"}")) || !bytes.Contains(out.AttestationJSON, []byte(want+`,"simulated":true}`)) {
				t.Fatalf("context or metadata lacks %s", want)
			}
		})
	}
}

func TestAttestTDX(t *testing.T) {
	r := newRun()
	is := issuer(simTDX(t))
	_, v := attested(t, r, is, r.input(t))
	tee := v.payload.RuntimeMetadata.TEE
	wantRoot := "tdx:root-sha256-" + tdxsimroots.RootSHA256 + ":SIMULATED"
	if tee.AttestationType != "tdx_quote" || tee.RootID != wantRoot || tee.TCBVersion != "03010200000000000000000000000000" {
		t.Fatalf("tee %+v, want root %s", tee, wantRoot)
	}
	ev := v.doc.Items[0].Evidence
	pool, err := tdxsimroots.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	ts := &tdxverify.TimeSet{PckCertChain: fixedNow, TcbInfo: fixedNow, QeIdentity: fixedNow, PckCrl: fixedNow, RootCaCrl: fixedNow}
	if err := tdxverify.RawTdxQuote(ev.Blob, &tdxverify.Options{TrustedRoots: pool, Now: ts}); err != nil {
		t.Fatalf("go-tdx-guest verify with the simulated root: %v", err)
	}
	want := v.rd.Bytes()
	if err := tdxvalidate.RawTdxQuote(ev.Blob, &tdxvalidate.Options{TdQuoteBodyOptions: tdxvalidate.TdQuoteBodyOptions{ReportData: want[:]}}); err != nil {
		t.Fatalf("go-tdx-guest validate: %v", err)
	}
	if err := tdxverify.RawTdxQuote(ev.Blob, &tdxverify.Options{Now: ts}); err == nil {
		t.Fatal("simulated quote verified with Intel's root")
	}
}

func TestKeyAttestation(t *testing.T) {
	is := issuer(simSEV(t))
	challenge := []byte("relying-party-challenge-0123456789")
	jws, err := is.KeyAttestation(context.Background(), challenge)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := evidencedoc.SignerKey(jws)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(is.Key.Public()) {
		t.Fatal("kid is not the identity key")
	}
	doc, err := evidencedoc.Parse(jws, pub)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Kind != evidencedoc.KindKey || doc.Key.ChallengeB64u != b64u.Encode(challenge) || doc.Key.RecipientX25519B64u != b64u.Encode(is.RecipientKey) {
		t.Fatalf("key document %+v", doc.Key)
	}
	// Recompute independently: nonce = SHA-256(label || 0 || u32be(len) || challenge).
	pre := append([]byte("clawea.dev/attester/v1/key-attestation/nonce\x00"), 0, 0, 0, byte(len(challenge)))
	nonce := sha256.Sum256(append(pre, challenge...))
	ctxBytes := []byte(`{"context":"clawea.dev/evidence/v1/context/key","challenge_b64u":"` + b64u.Encode(challenge) +
		`","recipient_x25519_b64u":"` + b64u.Encode(is.RecipientKey) + `"}`)
	rd, err := evidence.NewReportData(nonce, pub, ctxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := doc.ReportData(); got != rd {
		t.Fatal("key attestation REPORT_DATA differs from the recomputation")
	}
	verifySEV(t, doc.Items[0].Evidence, rd)

	// Another challenge gives another REPORT_DATA.
	other, err := evidencedoc.KeyNonce([]byte("another challenge"))
	if err != nil {
		t.Fatal(err)
	}
	if other == nonce {
		t.Fatal("nonce does not depend on the challenge")
	}
	if _, err := is.KeyAttestation(context.Background(), make([]byte, evidencedoc.MaxChallengeBytes+1)); !errors.Is(err, attestation.ErrInput) {
		t.Fatalf("oversized challenge: %v", err)
	}
}

func TestKeyAttestationTDXWithoutRecipient(t *testing.T) {
	is := issuer(simTDX(t))
	is.RecipientKey = nil
	jws, err := is.KeyAttestation(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := evidencedoc.Parse(jws, is.Key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Key.RecipientX25519B64u != "" || doc.Key.ChallengeB64u != "" {
		t.Fatalf("key context %+v", doc.Key)
	}
	if !bytes.Equal(doc.EvidenceContext(), []byte(`{"context":"clawea.dev/evidence/v1/context/key","challenge_b64u":""}`)) {
		t.Fatalf("context %s", doc.EvidenceContext())
	}
}

func TestAttestBundleRejections(t *testing.T) {
	other := newRun()
	other.AgentKey = key(2)
	// run changes the run whose bundle the agent signs (the bundle is
	// signed again); input changes what the attester is given.
	cases := []struct {
		name  string
		run   func(r *run)
		input func(in *attestation.AttestInput)
		code  poh.Code
	}{
		{name: "bundle from another agent", input: func(in *attestation.AttestInput) {
			in.BundleEnvelope = other.bundle(t)
		}, code: poh.EvidenceMismatch},
		{name: "chain does not start with prompt_committed", run: func(r *run) {
			r.FirstEvent = "llm_call"
		}, code: poh.PromptCommitmentMismatch},
		{name: "another prompt_committed event", run: func(r *run) {
			r.FirstPayload = h("another commitment")
		}, code: poh.PromptCommitmentMismatch},
		{name: "prompt_committed of another run's opening", input: func(in *attestation.AttestInput) {
			in.PromptCommittedEventHashB64u = h("another event")
		}, code: poh.PromptCommitmentMismatch},
		{name: "bundle from another run", run: func(r *run) {
			r.BundleRunID = "run_other"
		}, code: poh.EvidenceMismatch},
		{name: "prompt hash mismatch in one call", run: func(r *run) {
			r.CallPromptHashes = []string{r.PromptHash, h("an injected prompt")}
		}, code: poh.PromptCommitmentMismatch},
		{name: "attester rebuilt another prompt", input: func(in *attestation.AttestInput) {
			in.PromptHashB64u = h("another prompt")
		}, code: poh.PromptCommitmentMismatch},
		{name: "report hash mismatch", run: func(r *run) {
			r.BundleReport = h("another report")
		}, code: poh.PromptCommitmentMismatch},
		{name: "attester recomputed another report", input: func(in *attestation.AttestInput) {
			in.ReportHashB64u = h("another report")
		}, code: poh.PromptCommitmentMismatch},
		{name: "pack ciphertext mismatch", input: func(in *attestation.AttestInput) {
			in.PackCiphertextHashB64u = h("another pack")
		}, code: poh.PromptCommitmentMismatch},
		{name: "uncovered llm_call", run: func(r *run) {
			r.OmitCall = true
		}, code: poh.PromptCommitmentMismatch},
		{name: "call names no llm_call event", run: func(r *run) {
			r.CallEventID = "evt_c" // a tool_call
		}, code: poh.EvidenceMismatch},
		{name: "report for another run", run: func(r *run) {
			r.ReportRunID = "run_other"
		}, code: poh.PromptCommitmentMismatch},
		{name: "prompt pack root does not match entries", run: func(r *run) {
			r.PackRoot = h("forged root")
		}, code: poh.PromptCommitmentMismatch},
		{name: "expected prompt root differs", input: func(in *attestation.AttestInput) {
			in.PromptRootHashB64u = h("expected root")
		}, code: poh.PromptCommitmentMismatch},
		{name: "call used another model", run: func(r *run) {
			r.CallModel = "another-model"
		}, code: poh.EvidenceMismatch},
		{name: "no system prompt report", run: func(r *run) {
			r.OmitReport = true
		}, code: poh.MissingRequiredField},
		{name: "no clawea metadata", run: func(r *run) {
			r.OmitClawea = true
		}, code: poh.MissingRequiredField},
		{name: "unknown clawea metadata member", run: func(r *run) {
			r.ExtraClawea = map[string]string{"trust_me": "yes"}
		}, code: poh.SchemaValidationFailed},
		{name: "OpenClaw bundle without clawea_llm_calls", run: func(r *run) {
			r.OmitLLMCalls = true
		}, code: poh.MissingRequiredField},
		{name: "llm_call payload without the attested prefix", run: func(r *run) {
			r.NotPrefix = true
		}, code: poh.PromptCommitmentMismatch},
		{name: "tampered bundle payload", input: func(in *attestation.AttestInput) {
			in.BundleEnvelope = bytes.Replace(in.BundleEnvelope, []byte(`"bundle_001"`), []byte(`"bundle_002"`), 1)
		}, code: poh.HashMismatch},
		{name: "tampered bundle signature", input: func(in *attestation.AttestInput) {
			var env map[string]any
			if err := json.Unmarshal(in.BundleEnvelope, &env); err != nil {
				t.Fatal(err)
			}
			sig, _ := b64u.Decode(env["signature_b64u"].(string))
			sig[0] ^= 1
			in.BundleEnvelope = bytes.Replace(in.BundleEnvelope, []byte(env["signature_b64u"].(string)), []byte(b64u.Encode(sig)), 1)
		}, code: poh.SignatureInvalid},
	}
	q := simSEV(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun()
			in := r.input(t)
			if tc.run != nil {
				tc.run(r)
				in.BundleEnvelope = r.bundle(t)
			}
			if tc.input != nil {
				tc.input(&in)
			}
			out, err := issuer(q).Attest(context.Background(), in)
			if out != nil {
				t.Fatal("output returned with an error")
			}
			if !errors.Is(err, attestation.ErrBundle) || !errors.Is(err, tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			pe, ok := errors.AsType[*poh.Error](err)
			if !ok || pe.Code != tc.code {
				t.Fatalf("not a *poh.Error with %s: %v", tc.code, err)
			}
		})
	}
}

func TestAttestInputAndConfigErrors(t *testing.T) {
	r := newRun()
	ctx := context.Background()
	cases := []struct {
		name  string
		is    func() *attestation.Issuer
		tweak func(in *attestation.AttestInput)
		want  error
	}{
		{"no key", func() *attestation.Issuer { i := issuer(simSEV(t)); i.Key = nil; return i }, nil, attestation.ErrConfig},
		{"no quoter", func() *attestation.Issuer { return &attestation.Issuer{Key: key(9)} }, nil, attestation.ErrConfig},
		{"bad recipient key", func() *attestation.Issuer { i := issuer(simSEV(t)); i.RecipientKey = []byte{1}; return i }, nil, attestation.ErrConfig},
		{"bad prompt hash", nil, func(in *attestation.AttestInput) { in.PromptHashB64u = "AAAA" }, attestation.ErrInput},
		{"bad agent did", nil, func(in *attestation.AttestInput) { in.AgentDID = "agent" }, attestation.ErrInput},
		{"empty run id", nil, func(in *attestation.AttestInput) { in.RunID = "" }, attestation.ErrInput},
		{"negative audit count", nil, func(in *attestation.AttestInput) { in.AuditCount = -1 }, attestation.ErrInput},
		{"no model", nil, func(in *attestation.AttestInput) { in.Model = attestation.ModelIdentity{} }, attestation.ErrInput},
		{"control char in model", nil, func(in *attestation.AttestInput) { in.Model.Model = "a\nb" }, attestation.ErrInput},
		{"empty bundle", nil, func(in *attestation.AttestInput) { in.BundleEnvelope = nil }, attestation.ErrInput},
		{"sensitive without admission policy", nil, func(in *attestation.AttestInput) { in.Sensitive = true }, attestation.ErrInput},
		{"bad admission policy hash", nil, func(in *attestation.AttestInput) { in.AdmissionPolicyHashB64u = "AAAA" }, attestation.ErrInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := issuer(simSEV(t))
			if tc.is != nil {
				is = tc.is()
			}
			in := r.input(t)
			if tc.tweak != nil {
				tc.tweak(&in)
			}
			if _, err := is.Attest(ctx, in); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// staleQuoter returns real simulated evidence, but over other REPORT_DATA
// than requested: a platform (or a replayed quote) the attester must not
// trust.
type staleQuoter struct{ q enclave.Quoter }

func (s staleQuoter) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	other, err := evidence.NewReportData([32]byte{1}, ed25519.PublicKey(make([]byte, 32)), nil)
	if err != nil {
		return nil, err
	}
	return s.q.Quote(ctx, other)
}

// failingQuoter is a platform that cannot quote.
type failingQuoter struct{}

func (failingQuoter) Quote(context.Context, evidence.ReportData) (*evidence.Evidence, error) {
	return nil, enclave.ErrNotAvailable
}

func TestAttestRefusesEvidenceOverOtherReportData(t *testing.T) {
	for name, q := range map[string]enclave.Quoter{"sev-snp": staleQuoter{simSEV(t)}, "tdx": staleQuoter{simTDX(t)}} {
		t.Run(name, func(t *testing.T) {
			r := newRun()
			if _, err := issuer(q).Attest(context.Background(), r.input(t)); !errors.Is(err, attestation.ErrEvidence) || !errors.Is(err, teeclaims.ErrEvidence) {
				t.Fatalf("got %v, want ErrEvidence", err)
			}
			if _, err := issuer(q).KeyAttestation(context.Background(), []byte("c")); !errors.Is(err, attestation.ErrEvidence) {
				t.Fatalf("key attestation: got %v, want ErrEvidence", err)
			}
		})
	}
	r := newRun()
	if _, err := issuer(failingQuoter{}).Attest(context.Background(), r.input(t)); !errors.Is(err, attestation.ErrQuote) || !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("failing quoter: %v", err)
	}
}

// crlSource supplies a fixed SEV-SNP CRL as collateral.
type crlSource struct{ name string }

func (c crlSource) Collateral(_ context.Context, ev *evidence.Evidence) (map[string][]byte, error) {
	return map[string][]byte{c.name: []byte("crl der for " + ev.Platform)}, nil
}

func TestAttestCollateral(t *testing.T) {
	r := newRun()
	is := issuer(simSEV(t))
	is.Collateral = crlSource{"crl"}
	_, v := attested(t, r, is, r.input(t))
	if got := string(v.doc.Items[0].Collateral["crl"]); got != "crl der for sev-snp" {
		t.Fatalf("collateral %q", got)
	}
	is.Collateral = crlSource{"tcb_info"} // not defined for SEV-SNP
	if _, err := is.Attest(context.Background(), r.input(t)); !errors.Is(err, attestation.ErrEvidence) || !errors.Is(err, evidencedoc.ErrMalformed) {
		t.Fatalf("undefined collateral name: %v", err)
	}
}

func TestAttestationIDsAreFresh(t *testing.T) {
	r := newRun()
	is := issuer(simSEV(t))
	a, err := is.Attest(context.Background(), r.input(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := is.Attest(context.Background(), r.input(t))
	if err != nil {
		t.Fatal(err)
	}
	if a.AttestationID == b.AttestationID || bytes.Equal(a.EvidenceJWS, b.EvidenceJWS) {
		t.Fatal("two attestations share an id or evidence")
	}
	if a.ProofBundleHashB64u != b.ProofBundleHashB64u || a.NonceBindingB64u != b.NonceBindingB64u {
		t.Fatal("the same bundle gave different bindings")
	}
}

func TestModelIdentityDigestVector(t *testing.T) {
	// JCS of {"model":"claude-opus-4-6","model_identity_version":"clawea.dev/model-identity/v1","provider":"anthropic"}.
	jcs := `{"model":"claude-opus-4-6","model_identity_version":"clawea.dev/model-identity/v1","provider":"anthropic"}`
	sum := sha256.Sum256([]byte(jcs))
	got := modelDigest(t, "anthropic", "claude-opus-4-6", "")
	if got != b64u.Encode(sum[:]) {
		t.Fatalf("digest %s, want %s", got, b64u.Encode(sum[:]))
	}
	if modelDigest(t, "anthropic", "claude-opus-4-6", "2026-02-01") == got {
		t.Fatal("revision does not change the digest")
	}
	t.Logf("vector: %s (sha256 hex %s)", got, hex.EncodeToString(sum[:]))
}

// modelDigest is the model_identity_digest_b64u of a valid model identity.
func modelDigest(t *testing.T, provider, model, revision string) string {
	t.Helper()
	m, err := evidencedoc.NewModelIdentity(provider, model, revision)
	d, digestErr := m.Digest()
	if err := errors.Join(err, digestErr); err != nil {
		t.Fatal(err)
	}
	return d
}

// BenchmarkAttest: one execution attestation on each simulator.
func BenchmarkAttest(b *testing.B) {
	for _, c := range []struct {
		name string
		q    enclave.Quoter
	}{{"SimSEVSNP", simSEV(b)}, {"SimTDX", simTDX(b)}} {
		b.Run(c.name, func(b *testing.B) {
			is := issuer(c.q)
			in := newRun().input(b)
			for b.Loop() {
				if _, err := is.Attest(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAttestHarnessFromBundle: without an operator-given harness the
// attestation names the harness the bundle names, so it never names OpenClaw
// for a bundle that was not held to the OpenClaw llm_call rule; and an
// attestation that names OpenClaw holds a bundle without payloads to it.
func TestAttestHarnessFromBundle(t *testing.T) {
	r := newRun()
	is := issuer(simSEV(t))
	in := r.input(t)
	in.Harness = nil
	_, v := attested(t, r, is, in)
	if want := testfixture.Harness(); v.payload.Harness == nil || *v.payload.Harness != *want {
		t.Fatalf("harness %+v, want the bundle's %+v", v.payload.Harness, want)
	}

	r = newRun()
	r.OmitLLMCalls = true
	r.OmitHarness = true
	in = r.input(t)
	if _, err := is.Attest(context.Background(), in); !errors.Is(err, poh.MissingRequiredField) {
		t.Fatalf("attestation naming OpenClaw over a bundle without payloads or harness: err = %v, want %s", err, poh.MissingRequiredField)
	}
	in.Harness = nil
	out, err := is.Attest(context.Background(), in)
	if err != nil {
		t.Fatalf("bundle naming no harness, attestation naming none: %v", err)
	}
	if v := checkOutput(t, r, is, out); v.payload.Harness != nil {
		t.Fatalf("harness %+v for a bundle that names none", v.payload.Harness)
	}
}

// TestAttestWithGPU: GPU evidence follows the CPU evidence, its report
// carries the GPU nonce of the run's REPORT_DATA; a GPU whose report is
// over other report data, a GPU that is not a GPU and a GPU that fails
// stop the attestation.
func TestAttestWithGPU(t *testing.T) {
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	r := newRun()
	is := issuer(simSEV(t))
	is.GPUs = []enclave.Quoter{g}
	_, v := attested(t, r, is, r.input(t))
	if len(v.doc.Items) != 2 || v.doc.Items[1].Evidence.Platform != evidence.PlatformNVIDIAGPU {
		t.Fatalf("%d items", len(v.doc.Items))
	}
	rep, err := nvspdm.Parse(v.doc.Items[1].Evidence.Blob)
	if err != nil || rep.Nonce != v.rd.GPUNonce() {
		t.Fatalf("gpu nonce: %v", err)
	}
	for name, bad := range map[string]enclave.Quoter{"stale": staleQuoter{g}, "cpu as gpu": simSEV(t), "failing": failingQuoter{}} {
		is.GPUs = []enclave.Quoter{bad}
		if out, err := is.Attest(context.Background(), newRun().input(t)); err == nil || out != nil {
			t.Fatalf("%s: attested", name)
		}
	}
}

// TestKeyAttestationWithGPU: a key attestation carries the GPU evidence
// too, over the same REPORT_DATA.
func TestKeyAttestationWithGPU(t *testing.T) {
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	is := issuer(simSEV(t))
	is.GPUs = []enclave.Quoter{g}
	jws, err := is.KeyAttestation(context.Background(), []byte("challenge"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := evidencedoc.Parse(jws, is.Key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := doc.ReportData()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Items) != 2 || doc.Items[1].Evidence.Platform != evidence.PlatformNVIDIAGPU {
		t.Fatalf("%d items", len(doc.Items))
	}
	rep, err := nvspdm.Parse(doc.Items[1].Evidence.Blob)
	if err != nil || rep.Nonce != rd.GPUNonce() {
		t.Fatalf("gpu nonce: %v", err)
	}
}
