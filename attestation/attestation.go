// Package attestation produces the attester's signed statements
// (docs/spec/attestation-v1.md):
//
//   - a key attestation: an evidence document whose fresh hardware evidence
//     commits to the attester's Ed25519 identity key and, optionally, its
//     X25519 pack-recipient key;
//   - at the end of a run, a PoH execution_attestation envelope signed by
//     the identity key, and the evidence document it references by hash,
//     after checking the agent's proof bundle against the run.
//
// The package is the producer side. It imports no platform backend: the
// platform is an enclave.Quoter. Verification lives in package verify, which
// uses the pure packages evidencedoc and teeclaims.
package attestation

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/nvspdm"
	"github.com/clawea/attester/wire/teeclaims"
)

// Limits on AttestInput.
const (
	maxIDBytes  = evidencedoc.MaxIDBytes
	maxURIBytes = 2048
	// maxReceiptSigners bounds AttestInput.ReceiptSignerDIDs.
	maxReceiptSigners = 256
	// attestationIDPrefix starts every attestation_id.
	attestationIDPrefix = "clawea_att_"
)

// Issuer signs attestations with the attester's identity key over fresh
// evidence from its platform. It is safe for concurrent use when its Quoter
// and collateralSource are.
type Issuer struct {
	// Key signs with the attester's Ed25519 identity key: an
	// ed25519.PrivateKey, or a signer over sealed memory
	// (sealed.Ed25519Signer: control.Identity.Signer). Its
	// Public() must be an ed25519.PublicKey. The key is never written to
	// errors or output.
	Key crypto.Signer
	// Quoter produces the hardware evidence.
	Quoter enclave.Quoter
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// RecipientKey is the attester's X25519 pack-recipient public key (32
	// bytes), bound into key attestations; optional.
	RecipientKey []byte
	// Collateral, when set, supplies verification collateral for each piece
	// of evidence (names per docs/spec/attestation-v1.md).
	Collateral collateralSource
	// GPUs produce GPU evidence (platform nvidia-gpu) over the same
	// REPORT_DATA, added after the CPU evidence of every execution and key
	// attestation (docs/spec/attestation-v1.md section 4.3).
	GPUs []enclave.Quoter
}

// collateralSource supplies verification collateral (CRLs, TCB info) for
// evidence. It returns nil when it has none.
type collateralSource interface {
	Collateral(ctx context.Context, ev *evidence.Evidence) (map[string][]byte, error)
}

// ModelIdentity names the model the run used (docs/spec/attestation-v1.md,
// "Model identity").
type ModelIdentity struct {
	Provider string
	Model    string
	Revision string // optional
}

// AttestInput is what the attester knows at the end of a run.
type AttestInput struct {
	// BundleEnvelope is the agent's proof_bundle envelope, raw bytes.
	BundleEnvelope []byte
	// AgentDID and RunID identify the run the attester served.
	AgentDID string
	RunID    string
	// PromptCommittedEventHashB64u is the event_hash_b64u of the run's
	// prompt_committed event, which the attester issued when it opened the
	// run: the bundle's event chain MUST start with exactly that event.
	// Required.
	PromptCommittedEventHashB64u string
	// PromptHashB64u is b64u(SHA-256) of the system prompt the attester
	// rebuilt; ReportHashB64u the hash of the SystemPromptReport.v1 it
	// recomputed (b64u(SHA-256(JCS(report)))).
	PromptHashB64u string
	ReportHashB64u string
	// PromptRootHashB64u, when set, is the PoH prompt_pack root the bundle
	// must carry.
	PromptRootHashB64u string
	// PackCiphertextHashB64u is b64u(SHA-256) of prompt_pack.enc.
	PackCiphertextHashB64u string
	// GatePolicyHashB64u, AuditRootB64u and AuditCount describe the gate:
	// its policy hash and the head and length of its audit log (the head
	// of a log without records is "", docs/spec/gate-v1.md section 5.1).
	GatePolicyHashB64u string
	AuditRootB64u      string
	AuditCount         int64
	// Model is the model identity the run was configured with.
	Model ModelIdentity
	// AdmissionPolicyHashB64u is the admission_policy_hash_b64u of the
	// admission policy enforced when the run was created, empty when none
	// was; Sensitive says whether that policy is sensitive (its run-time
	// obligations were met). Sensitive requires AdmissionPolicyHashB64u.
	AdmissionPolicyHashB64u string
	Sensitive               bool
	// Harness, optional, is copied into the attestation payload. When nil,
	// the attestation names the harness the bundle names in its
	// metadata.harness (none when it names none), so an attestation never
	// names a harness whose bundle rules (the OpenClaw clawea_llm_calls
	// rule) were not applied.
	Harness *poh.Harness
	// EvidenceURI, optional, is evidence_ref.uri: where the evidence
	// document will be published.
	EvidenceURI string
	// ReceiptSignerDIDs is the allowlist of gateway receipt signers passed
	// to the bundle verifier (reported there, not enforced).
	ReceiptSignerDIDs []string
	// BundleCheck, optional, is a further check of the verified bundle
	// against what the caller saw (the attester: its tool-call decisions,
	// auditrec.MatchToolCalls), run after the rules of section 5.1 and
	// before anything is signed. A *poh.Error it returns refuses the bundle
	// with its code (wrapping ErrBundle); any other error fails the attestation.
	BundleCheck func(*poh.Bundle) error
	// Isolation, optional, is what the attester observed of its isolation
	// when it created the run (evidencedoc.NewIsolation). With it the
	// commitments are v3 and carry it; without it, v2.
	Isolation *evidencedoc.Isolation
	// Gateway, optional, is the run's model gateway record (the count and
	// chain head of control/gateway.Record.Summary). With it the
	// commitments are v4 and carry it (and Isolation, if any), and the
	// bundle's receipts must be exactly the record's
	// (docs/spec/attestation-v1.md section 5.7): signed by this attester,
	// one per llm_call event and stating what that event reports, in the
	// record's order.
	Gateway *evidencedoc.GatewayRecord
}

// Output is a signed execution attestation and its evidence document.
type Output struct {
	// AttestationJSON is the execution_attestation envelope (compact JSON).
	AttestationJSON []byte
	// EvidenceJWS is the evidence document, exactly the bytes whose SHA-256
	// is evidence_ref.resource_hash_b64u.
	EvidenceJWS []byte
	// AttestationID is payload.attestation_id.
	AttestationID string
	// ProofBundleHashB64u is the bundle envelope's payload hash.
	ProofBundleHashB64u string
	// NonceBindingB64u is the PoH TEE nonce binding (REPORT_DATA 0..31).
	NonceBindingB64u string
	// EvidenceHashB64u is b64u(SHA-256(EvidenceJWS)).
	EvidenceHashB64u string
	// Platform is the evidence platform; Simulated is true for simulated
	// evidence.
	Platform  string
	Simulated bool
}

func (is *Issuer) check() (ed25519.PublicKey, error) {
	if is == nil {
		return nil, fmt.Errorf("%w: no issuer", errConfig)
	}
	pub, err := poh.SignerKey(is.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: no Ed25519 identity key: %w", errConfig, err)
	}
	if is.Quoter == nil {
		return nil, fmt.Errorf("%w: no quoter", errConfig)
	}
	if len(is.RecipientKey) != 0 && len(is.RecipientKey) != 32 {
		return nil, fmt.Errorf("%w: recipient key is %d bytes, want 32", errConfig, len(is.RecipientKey))
	}
	return pub, nil
}

func (is *Issuer) now() time.Time {
	t := time.Now()
	if is.Now != nil {
		t = is.Now()
	}
	return t.UTC().Truncate(time.Millisecond)
}

func checkInput(in *AttestInput) error {
	if len(in.BundleEnvelope) == 0 || len(in.BundleEnvelope) > poh.MaxEnvelopeBytes {
		return fmt.Errorf("%w: bundle envelope is %d bytes, want 1..%d", ErrInput, len(in.BundleEnvelope), poh.MaxEnvelopeBytes)
	}
	if len(in.AgentDID) > maxIDBytes || !didkey.ValidSyntax(in.AgentDID) {
		return fmt.Errorf("%w: agent DID is not a did:key or did:web", ErrInput)
	}
	if len(in.RunID) == 0 || len(in.RunID) > maxIDBytes || !utf8.ValidString(in.RunID) {
		return fmt.Errorf("%w: run id must be 1..%d bytes of UTF-8", ErrInput, maxIDBytes)
	}
	hashes := []struct{ name, v string }{
		{"prompt hash", in.PromptHashB64u},
		{"report hash", in.ReportHashB64u},
		{"pack ciphertext hash", in.PackCiphertextHashB64u},
		{"prompt_committed event hash", in.PromptCommittedEventHashB64u},
		{"gate policy hash", in.GatePolicyHashB64u},
	}
	if in.PromptRootHashB64u != "" {
		hashes = append(hashes, struct{ name, v string }{"prompt root hash", in.PromptRootHashB64u})
	}
	if in.AdmissionPolicyHashB64u != "" {
		hashes = append(hashes, struct{ name, v string }{"admission policy hash", in.AdmissionPolicyHashB64u})
	} else if in.Sensitive {
		return fmt.Errorf("%w: a sensitive run needs its admission policy hash", ErrInput)
	}
	for _, h := range hashes {
		if _, err := b64u.DecodeHash(h.v); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInput, h.name, err)
		}
	}
	if in.AuditCount < 0 || in.AuditCount > pohjson.MaxSafeInteger {
		return fmt.Errorf("%w: audit count out of range", ErrInput)
	}
	if len(in.EvidenceURI) > maxURIBytes || !utf8.ValidString(in.EvidenceURI) {
		return fmt.Errorf("%w: evidence uri must be at most %d bytes of UTF-8", ErrInput, maxURIBytes)
	}
	if len(in.ReceiptSignerDIDs) > maxReceiptSigners {
		return fmt.Errorf("%w: more than %d receipt signers", ErrInput, maxReceiptSigners)
	}
	return nil
}

// newAttestationID returns attestationIDPrefix + b64u(16 random bytes).
func newAttestationID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return attestationIDPrefix + b64u.Encode(b[:]), nil
}

// quote asks the platform for evidence over rd and checks that it commits
// to rd before anything is signed.
func (is *Issuer) quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, *teeclaims.Claims, map[string][]byte, error) {
	ev, err := is.Quoter.Quote(ctx, rd)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errQuote, err)
	}
	claims, err := teeclaims.Derive(ev)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errEvidence, err)
	}
	if err := teeclaims.CheckReportData(ev, claims, rd); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", errEvidence, err)
	}
	var coll map[string][]byte
	if is.Collateral != nil {
		if coll, err = is.Collateral.Collateral(ctx, ev); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: collateral: %w", errQuote, err)
		}
	}
	return ev, claims, coll, nil
}

// signDoc signs an evidence document and checks that it carries exactly the
// evidence context that went into REPORT_DATA.
func (is *Issuer) signDoc(d *evidencedoc.Document, evidenceContext []byte) (*evidencedoc.Document, error) {
	signed, err := evidencedoc.Sign(is.Key, d)
	if err != nil {
		return nil, fmt.Errorf("%w: evidence document: %w", errEvidence, err)
	}
	if !bytes.Equal(signed.EvidenceContext(), evidenceContext) {
		return nil, errors.New("attestation: internal error: evidence context changed in encoding")
	}
	return signed, nil
}

// KeyAttestation returns a key attestation: an evidence document of kind
// key_attestation whose fresh evidence has REPORT_DATA =
// NewReportData(KeyNonce(challenge), identity key, key context), the key
// context binding the challenge and the X25519 recipient key (if any).
// challenge is the relying party's nonce, 0..1024 bytes; empty gives no
// freshness.
func (is *Issuer) KeyAttestation(ctx context.Context, challenge []byte) ([]byte, error) {
	pub, err := is.check()
	if err != nil {
		return nil, err
	}
	nonce, err := evidencedoc.KeyNonce(challenge)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	kc := &evidencedoc.KeyContext{Context: evidencedoc.KeyContextLabel, ChallengeB64u: b64u.Encode(challenge)}
	if len(is.RecipientKey) > 0 {
		kc.RecipientX25519B64u = b64u.Encode(is.RecipientKey)
	}
	ctxBytes, err := pohjson.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("%w: key context: %w", ErrInput, err)
	}
	rd, err := evidence.NewReportData(nonce, pub, ctxBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	now := is.now()
	ev, _, coll, err := is.quote(ctx, rd)
	if err != nil {
		return nil, err
	}
	items, err := is.withGPUs(ctx, rd, evidencedoc.Item{Evidence: ev, Collateral: coll})
	if err != nil {
		return nil, err
	}
	doc, err := is.signDoc(&evidencedoc.Document{
		Kind:     evidencedoc.KindKey,
		IssuedAt: now,
		Nonce:    nonce,
		Key:      kc,
		Items:    items,
	}, ctxBytes)
	if err != nil {
		return nil, err
	}
	return doc.JWS, nil
}

// Attest verifies the run's proof bundle and its binding to the run (agent
// DID, run id, prompt commitments), takes fresh evidence whose REPORT_DATA
// binds the run (PoH nonce binding), the identity key and the execution
// context, and returns the signed execution_attestation envelope and the
// evidence document.
func (is *Issuer) Attest(ctx context.Context, input AttestInput) (*Output, error) {
	a := &attestRun{is: is, in: &input}
	for _, step := range []func() error{
		a.checkInput,
		a.bindRun,
		a.executionContext,
		func() error { return a.evidence(ctx) },
		a.envelope,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return &Output{
		AttestationJSON:     a.env,
		EvidenceJWS:         a.doc.JWS,
		AttestationID:       a.id,
		ProofBundleHashB64u: a.bundleHash,
		NonceBindingB64u:    a.nonceB64u,
		EvidenceHashB64u:    a.evidenceHash,
		Platform:            a.ev.Platform,
		Simulated:           a.doc.Simulated(),
	}, nil
}

// attestRun is the state of one Attest: the input, then what each step
// learns for the next.
type attestRun struct {
	is *Issuer
	in *AttestInput

	pub          ed25519.PublicKey
	model        evidencedoc.ModelIdentity
	modelDigest  string
	bundleHash   string
	harness      *poh.Harness
	nonce        [32]byte
	id           string
	commitments  evidencedoc.Commitments
	ec           *evidencedoc.ExecutionContext
	ctxBytes     []byte
	now          time.Time
	ev           *evidence.Evidence
	claims       *teeclaims.Claims
	doc          *evidencedoc.Document
	evidenceHash string
	nonceB64u    string
	env          []byte
}

// checkInput checks the issuer, the input and the model identity.
func (a *attestRun) checkInput() error {
	var err error
	if a.pub, err = a.is.check(); err != nil {
		return err
	}
	if err := checkInput(a.in); err != nil {
		return err
	}
	in := a.in
	if a.model, err = evidencedoc.NewModelIdentity(in.Model.Provider, in.Model.Model, in.Model.Revision); err != nil {
		return fmt.Errorf("%w: model identity: %w", ErrInput, err)
	}
	if a.modelDigest, err = a.model.Digest(); err != nil {
		return fmt.Errorf("%w: model identity: %w", ErrInput, err)
	}
	return nil
}

// bindRun verifies the proof bundle and computes the nonce binding of the
// run; it draws the attestation id.
func (a *attestRun) bindRun() error {
	in := a.in
	bundle, err := verifyBundle(in, didkey.Format(a.pub))
	if err != nil {
		return err
	}
	a.bundleHash = bundle.Envelope.PayloadHashB64u
	a.harness = in.Harness
	if a.harness == nil && bundle.Metadata != nil {
		a.harness = poh.ReadHarness(bundle.Metadata.Get("harness"))
	}
	if a.nonce, err = poh.NonceBinding(in.AgentDID, in.RunID, a.bundleHash); err != nil {
		return fmt.Errorf("%w: nonce binding: %w", ErrInput, err)
	}
	if a.id, err = newAttestationID(); err != nil {
		return fmt.Errorf("attestation: attestation id: %w", err)
	}
	return nil
}

// executionContext builds and checks the commitments and the execution
// context the evidence binds.
func (a *attestRun) executionContext() error {
	in := a.in
	a.commitments = evidencedoc.Commitments{
		Version:                      commitmentsVersion(in),
		SystemPromptHashB64u:         in.PromptHashB64u,
		SystemPromptReportHashB64u:   in.ReportHashB64u,
		PromptPackCiphertextHashB64u: in.PackCiphertextHashB64u,
		GatePolicyHashB64u:           in.GatePolicyHashB64u,
		GateAuditRootB64u:            in.AuditRootB64u,
		GateAuditCount:               in.AuditCount,
		ModelIdentity:                a.model,
		ModelIdentityDigestB64u:      a.modelDigest,
		AdmissionPolicyHashB64u:      in.AdmissionPolicyHashB64u,
		Sensitive:                    evidencedoc.SensitivityOf(in.Sensitive),
		Isolation:                    in.Isolation,
		Gateway:                      in.Gateway,
	}
	if err := evidencedoc.CheckCommitments(&a.commitments); err != nil {
		return fmt.Errorf("%w: commitments: %w", ErrInput, err)
	}
	a.ec = &evidencedoc.ExecutionContext{
		Context:             evidencedoc.ExecutionContextLabel,
		AttestationID:       a.id,
		AgentDID:            in.AgentDID,
		RunID:               in.RunID,
		ProofBundleHashB64u: a.bundleHash,
		Clawea:              a.commitments,
	}
	var err error
	if a.ctxBytes, err = pohjson.Marshal(a.ec); err != nil {
		return fmt.Errorf("%w: execution context: %w", ErrInput, err)
	}
	return nil
}

// evidence takes fresh evidence whose REPORT_DATA binds the run, the
// identity key and the execution context, and signs the evidence document.
func (a *attestRun) evidence(ctx context.Context) error {
	rd, err := evidence.NewReportData(a.nonce, a.pub, a.ctxBytes)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	a.now = a.is.now()
	var coll map[string][]byte
	if a.ev, a.claims, coll, err = a.is.quote(ctx, rd); err != nil {
		return err
	}
	items, err := a.is.withGPUs(ctx, rd, evidencedoc.Item{Evidence: a.ev, Collateral: coll})
	if err != nil {
		return err
	}
	a.doc, err = a.is.signDoc(&evidencedoc.Document{
		Kind:      evidencedoc.KindExecution,
		IssuedAt:  a.now,
		Nonce:     a.nonce,
		Execution: a.ec,
		Items:     items,
	}, a.ctxBytes)
	if err != nil {
		return err
	}
	a.evidenceHash = b64u.SHA256(a.doc.JWS)
	a.nonceB64u = b64u.Encode(a.nonce[:])
	return nil
}

// withGPUs returns cpu followed by the evidence of every GPU over rd.
func (is *Issuer) withGPUs(ctx context.Context, rd evidence.ReportData, cpu evidencedoc.Item) ([]evidencedoc.Item, error) {
	items := []evidencedoc.Item{cpu}
	for i, g := range is.GPUs {
		ev, err := quoteGPU(ctx, g, rd)
		if err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		items = append(items, evidencedoc.Item{Evidence: ev})
	}
	return items, nil
}

// quoteGPU asks a GPU for evidence over rd and checks, before anything is
// signed, that it is a GPU report carrying rd.GPUNonce().
func quoteGPU(ctx context.Context, g enclave.Quoter, rd evidence.ReportData) (*evidence.Evidence, error) {
	ev, err := g.Quote(ctx, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errQuote, err)
	}
	if ev.Platform != evidence.PlatformNVIDIAGPU || ev.Format != nvspdm.Format {
		return nil, fmt.Errorf("%w: gpu evidence is %s/%s", errEvidence, ev.Platform, ev.Format)
	}
	rep, err := nvspdm.Parse(ev.Blob)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEvidence, err)
	}
	if rep.Nonce != rd.GPUNonce() {
		return nil, fmt.Errorf("%w: the gpu report does not carry the gpu nonce of this report data", errEvidence)
	}
	return ev, nil
}

// envelope signs the execution_attestation envelope and checks that the
// PoH verifier accepts it.
func (a *attestRun) envelope() error {
	in, claims := a.in, a.claims
	payload := &poh.ExecutionAttestation{
		AttestationVersion:  "1",
		AttestationID:       a.id,
		ExecutionType:       "tee_execution",
		AgentDID:            in.AgentDID,
		AttesterDID:         a.doc.AttesterDID,
		RunID:               in.RunID,
		ProofBundleHashB64u: a.bundleHash,
		Harness:             a.harness,
		RuntimeMetadata: &poh.RuntimeMetadata{TEE: &poh.TEE{
			AttestationType: claims.AttestationType,
			RootID:          claims.RootID,
			TCBVersion:      claims.TCBVersion,
			EvidenceRef: poh.EvidenceRef{
				ResourceType:     evidencedoc.ResourceType,
				ResourceHashB64u: a.evidenceHash,
				URI:              in.EvidenceURI,
			},
			NonceBindingB64u: a.nonceB64u,
			Measurements: poh.Measurements{
				MeasurementHashB64u:    b64u.Encode(claims.Measurement),
				ModelWeightsDigestB64u: a.modelDigest,
			},
		}},
		IssuedAt: poh.FormatTime(a.now),
		Metadata: map[string]any{"clawea": evidencedoc.Metadata{Commitments: a.commitments, Simulated: a.doc.Simulated()}},
	}
	pv, err := pohjson.FromGo(payload)
	if err != nil {
		return fmt.Errorf("%w: attestation payload: %w", ErrInput, err)
	}
	if a.env, err = poh.Sign(poh.TypeExecutionAttestation, pv, a.is.Key, a.now); err != nil {
		return fmt.Errorf("attestation: sign: %w", err)
	}
	// Fail closed: never hand out an envelope the PoH verifier refuses.
	if _, err := poh.Verify(a.env, poh.VerifyOptions{Type: poh.TypeExecutionAttestation}); err != nil {
		return fmt.Errorf("attestation: internal error: the envelope does not verify: %w", err)
	}
	return nil
}
