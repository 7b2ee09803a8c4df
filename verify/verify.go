// Package verify checks a clawea execution attestation offline, down to the
// hardware vendors' roots: the PoH execution_attestation envelope, the
// evidence document it references, the hardware evidence (through
// verify/platform), the REPORT_DATA binding of the run and the attester
// key, the TEE claims, and, when given, the proof bundle, the gate audit log
// and the SystemPromptReport; then, as a separate step, the relying party's
// policy. The normative description is docs/spec/verify-v1.md.
//
// Verify never uses the network, takes its clock from Options.Now, and
// returns only verified data. Its zero options and zero policy are the
// strictest; every relaxation is an explicit Allow field. Errors are
// *Error values naming the failing check and its class (ErrRejected,
// ErrCannotCheck, ErrPolicy, ErrUsage), and carry PoH reason codes where
// they apply.
package verify

import (
	"bytes"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/teeclaims"
	"github.com/clawea/attester/wire/tpmquote"
)

// Input limits.
const (
	maxAttestationBytes = poh.MaxEnvelopeBytes
	maxEvidenceBytes    = evidencedoc.MaxJWSBytes
	maxBundleBytes      = poh.MaxEnvelopeBytes
	maxAuditLogBytes    = 64 << 20
	maxReportBytes      = 1 << 20
)

// Options configure Verify. The zero value (with Now set) is the strictest.
type Options struct {
	// Now returns the verification time; required.
	Now func() time.Time
	// AllowSimulated accepts simulated evidence, verified against the
	// pinned simulation roots only. The result is then marked Simulated and
	// proves nothing about hardware.
	AllowSimulated bool
	// AllowUncheckedRevocation accepts evidence for which no CRL was
	// supplied; the result reports revocation "skipped".
	AllowUncheckedRevocation bool
	// AllowUncheckedCollateral accepts TDX evidence without TCB info and QE
	// identity; the result reports collateral "skipped".
	AllowUncheckedCollateral bool
	// AllowUntrustedTPMAK accepts a TPM quote by any attestation key (the
	// result says the AK was unpinned). It exists for trust on first use
	// (packctl policy init), which then pins the AK it saw; it contradicts a
	// policy that trusts AKs. Never set it for a production verdict.
	AllowUntrustedTPMAK bool
	// Collateral is revocation and TCB data obtained out of band. Collateral
	// carried in the evidence document is used as well; all of it is
	// verified by verify/platform, never trusted as a claim.
	Collateral *platform.Collateral
	// CertCache optionally caches verified SEV-SNP endorsement chains.
	CertCache *platform.CertCache
	// AuditLog is the gate's audit log (JSON Lines); nil means not supplied.
	AuditLog []byte
	// Report is the SystemPromptReport.v1 (JSON); nil means not supplied.
	Report []byte
}

// Status says whether a check ran.
type Status string

// Check statuses.
const (
	StatusPassed        Status = "passed"
	StatusSkipped       Status = "skipped"
	StatusNotApplicable Status = "not-applicable"
)

// CheckResult is one line of the verification record.
type CheckResult struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// TEEClaims are the verified runtime_metadata.tee claims.
type TEEClaims struct {
	AttestationType string `json:"attestation_type"`
	RootID          string `json:"root_id"`
	TCBVersion      string `json:"tcb_version"`
	MeasurementB64u string `json:"measurement_hash_b64u"`
}

// EvidenceResult summarizes one verified evidence item.
type EvidenceResult struct {
	Platform        string          `json:"platform"`
	Format          string          `json:"format"`
	Simulated       bool            `json:"simulated"`
	RootID          string          `json:"root_id"`
	MeasurementB64u string          `json:"measurement_b64u"`
	TCB             string          `json:"tcb,omitempty"`
	Debug           bool            `json:"debug"`
	Revocation      platform.Status `json:"revocation"`
	Collateral      platform.Status `json:"collateral"`
	TCBStatus       string          `json:"tcb_status,omitempty"`
	QETCBStatus     string          `json:"qe_tcb_status,omitempty"`
	TCBAdvisoryIDs  []string        `json:"tcb_advisory_ids,omitempty"`
}

// BundleResult summarizes the verified proof bundle.
type BundleResult struct {
	BundleID            string `json:"bundle_id"`
	PayloadHashB64u     string `json:"payload_hash_b64u"`
	Events              int    `json:"events"`
	LLMCalls            int    `json:"llm_calls"`
	ToolCalls           int    `json:"tool_calls"`
	Receipts            int    `json:"receipts"`
	AllowlistedReceipts int    `json:"allowlisted_receipts"`
}

// AuditResult summarizes the verified gate audit log.
type AuditResult struct {
	RootB64u string `json:"root_b64u"`
	Count    uint64 `json:"count"`
	Allowed  int    `json:"allowed"`
	Denied   int    `json:"denied"`
	// ToolCallsMatched is the number of tool_call events matched by an
	// allow record; ToolCallsChecked is false when no bundle was given.
	ToolCallsMatched int  `json:"tool_calls_matched"`
	ToolCallsChecked bool `json:"tool_calls_checked"`
	// ToolCallBinding is how the events were bound to the decisions
	// (auditrec.BindingParams or BindingCall); empty when not checked.
	ToolCallBinding string `json:"tool_call_binding,omitempty"`
}

// ReportResult summarizes the verified SystemPromptReport.v1.
type ReportResult struct {
	HashB64u  string `json:"hash_b64u"`
	RecipeID  string `json:"recipe_id"`
	RecipeVer string `json:"recipe_version"`
	Templates int    `json:"templates"`
}

// Result is a verified execution attestation. Every field was verified;
// nothing is copied from the input unchecked.
type Result struct {
	AttestationID       string       `json:"attestation_id"`
	AgentDID            string       `json:"agent_did"`
	RunID               string       `json:"run_id"`
	AttesterDID         string       `json:"attester_did"`
	IssuedAt            time.Time    `json:"issued_at"`
	ProofBundleHashB64u string       `json:"proof_bundle_hash_b64u"`
	NonceBindingB64u    string       `json:"nonce_binding_b64u"`
	EvidenceHashB64u    string       `json:"evidence_hash_b64u"`
	Harness             *poh.Harness `json:"harness,omitempty"`
	TEE                 TEEClaims    `json:"tee"`
	// Commitments are the hardware-bound clawea commitments.
	Commitments evidencedoc.Commitments `json:"commitments"`
	// Simulated is true when any evidence item is simulated (verified
	// against simulation roots): the result proves nothing about hardware.
	Simulated bool             `json:"simulated"`
	Evidence  []EvidenceResult `json:"evidence"`
	// Platform holds verify/platform's results, one per evidence item.
	Platform []*platform.Result `json:"-"`
	// GuestUnpinned is set when the measurement the policy pinned does
	// not cover the guest's own code for some evidence item (a warning
	// says which): code nobody approved may have booted.
	GuestUnpinned bool          `json:"-"`
	Bundle        *BundleResult `json:"bundle,omitempty"`
	Audit         *AuditResult  `json:"audit,omitempty"`
	Report        *ReportResult `json:"report,omitempty"`
	// PolicyID identifies the policy applied (Policy.ID).
	PolicyID string `json:"policy_id"`
	// Checks lists every check in order with its status.
	Checks []CheckResult `json:"checks"`
	// Warnings lists what the verdict does not cover (skipped checks,
	// simulation, relaxed policy).
	Warnings []string `json:"warnings,omitempty"`
}

// state carries what has been verified so far.
type state struct {
	opts   Options
	policy *Policy
	checks []CheckResult
	res    *Result

	payload *payload
	doc     *evidencedoc.Document
	bundle  *poh.Bundle
	report  *promptReport
}

func (st *state) pass(name, format string, args ...any) {
	st.checks = append(st.checks, CheckResult{Name: name, Status: StatusPassed, Detail: fmt.Sprintf(format, args...)})
}

func (st *state) skip(name, format string, args ...any) {
	st.checks = append(st.checks, CheckResult{Name: name, Status: StatusSkipped, Detail: fmt.Sprintf(format, args...)})
}

func (st *state) warn(format string, args ...any) {
	st.res.Warnings = append(st.res.Warnings, fmt.Sprintf(format, args...))
}

func (st *state) fail(e *Error) error {
	for _, c := range st.checks {
		if c.Status == StatusPassed {
			e.Passed = append(e.Passed, c.Name)
		}
	}
	return e
}

// Verify checks an execution attestation envelope, the evidence document
// it references and, when given, the agent's proof bundle, then applies
// policy (nil means the zero Policy). It returns only verified data. See
// docs/spec/verify-v1.md for the checks and their order.
func Verify(attestation, evidence, bundle []byte, policy *Policy, opts Options) (res *Result, err error) {
	if policy == nil {
		policy = &Policy{}
	}
	st := &state{opts: opts, policy: policy, res: &Result{PolicyID: policy.ID()}}
	if err := policy.checkConsistent(); err != nil {
		return nil, st.fail(&Error{Class: ErrUsage, Check: checkInput, Err: err})
	}
	defer func() {
		// Last line of defence: a panic anywhere below is a rejection.
		if r := recover(); r != nil {
			res, err = nil, st.fail(rejected(checkInput, "", "internal error while verifying"))
		}
	}()
	if e := st.checkInputs(attestation, evidence, bundle); e != nil {
		return nil, st.fail(e)
	}
	steps := []func() *Error{
		func() *Error { return st.checkEnvelope(attestation) },
		func() *Error { return st.checkEvidenceDoc(evidence) },
		func() *Error { return st.checkBundle(bundle) },
		st.checkPlatform,
		st.checkTEEClaims,
		st.checkAudit,
		st.checkReport,
		st.checkPolicy,
	}
	for _, step := range steps {
		if e := step(); e != nil {
			return nil, st.fail(e)
		}
	}
	st.res.Checks = st.checks
	return st.res, nil
}

func (st *state) checkInputs(att, ev, bundle []byte) *Error {
	o := &st.opts
	if o.Now == nil {
		return usage("options: Now is required")
	}
	if len(att) == 0 {
		return usage("no attestation")
	}
	if len(ev) == 0 {
		return usage("no evidence document")
	}
	if bundle != nil && len(bundle) == 0 {
		return usage("empty proof bundle")
	}
	for _, l := range []struct {
		name string
		n    int
		max  int
	}{
		{"attestation", len(att), maxAttestationBytes},
		{"evidence document", len(ev), maxEvidenceBytes},
		{"proof bundle", len(bundle), maxBundleBytes},
		{"audit log", len(o.AuditLog), maxAuditLogBytes},
		{"report", len(o.Report), maxReportBytes},
	} {
		if l.n > l.max {
			return rejected(checkInput, poh.MalformedEnvelope, "%s is %d bytes, limit %d", l.name, l.n, l.max)
		}
	}
	return nil
}

// payload holds the verified execution attestation fields.
type payload struct {
	env             *poh.Verified
	tee             *pohjson.Value
	attestationType string
	rootID          string
	tcbVersion      string
	evidenceHash    string
	nonceBinding    string
	measurement     string
	modelDigest     string
	clawea          *pohjson.Value
}

// checkEnvelope verifies the PoH envelope, the fields verifiers require and
// the nonce binding.
func (st *state) checkEnvelope(raw []byte) *Error {
	env, err := poh.Verify(raw, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
	if err != nil {
		return pohErr(checkEnvelope, err)
	}
	st.pass(checkEnvelope, "execution_attestation envelope signed by %s", env.SignerDID)
	p, e := readPayload(env)
	if e != nil {
		return e
	}
	st.payload = p
	r := st.res
	r.AttestationID, _ = env.Payload.GetString("attestation_id")
	r.AgentDID, _ = env.Payload.GetString("agent_did")
	r.RunID, _ = env.Payload.GetString("run_id")
	r.AttesterDID = env.SignerDID
	r.ProofBundleHashB64u, _ = env.Payload.GetString("proof_bundle_hash_b64u")
	r.IssuedAt = env.IssuedAt
	r.NonceBindingB64u = p.nonceBinding
	r.EvidenceHashB64u = p.evidenceHash
	r.Harness = poh.ReadHarness(env.Payload.Get("harness"))
	st.pass(checkPayload, "run %s of agent %s", r.RunID, r.AgentDID)

	want, err := poh.NonceBindingB64u(r.AgentDID, r.RunID, r.ProofBundleHashB64u)
	if err != nil {
		return rejected(checkNonceBinding, poh.MalformedEnvelope, "nonce binding cannot be computed: %v", err)
	}
	if want != p.nonceBinding {
		return rejected(checkNonceBinding, poh.EvidenceMismatch, "nonce_binding_b64u is not the TEE nonce binding of agent_did, run_id and proof_bundle_hash_b64u")
	}
	st.pass(checkNonceBinding, "%s", want)
	return nil
}

// readPayload checks the members verifiers require and the members a v1
// attestation must not carry.
func readPayload(env *poh.Verified) (*payload, *Error) {
	pl := env.Payload
	need := func(v *pohjson.Value, path, key string) (string, *Error) {
		if v == nil || !v.Has(key) {
			return "", rejected(checkPayload, poh.MissingRequiredField, "%s%s is required", path, key)
		}
		s, ok := v.GetString(key)
		if !ok || s == "" {
			return "", rejected(checkPayload, poh.SchemaValidationFailed, "%s%s must be a non-empty string", path, key)
		}
		return s, nil
	}
	hash := func(v *pohjson.Value, path, key string) (string, *Error) {
		s, e := need(v, path, key)
		if e != nil {
			return "", e
		}
		if _, err := b64u.DecodeHash(s); err != nil {
			return "", rejected(checkPayload, poh.SchemaValidationFailed, "%s%s is not a b64u SHA-256 hash", path, key)
		}
		return s, nil
	}
	var e *Error
	vals := map[string]string{}
	for _, k := range []string{"attestation_version", "attestation_id", "execution_type", "agent_did", "attester_did", "run_id"} {
		if vals[k], e = need(pl, "", k); e != nil {
			return nil, e
		}
	}
	if vals["attestation_version"] != "1" {
		return nil, rejected(checkPayload, poh.UnknownEnvelopeVersion, "attestation_version must be \"1\"")
	}
	if vals["execution_type"] != "tee_execution" {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "execution_type must be tee_execution")
	}
	if vals["attester_did"] != env.SignerDID {
		return nil, rejected(checkPayload, poh.EvidenceMismatch, "attester_did differs from the envelope's signer_did")
	}
	if len(vals["run_id"]) > evidencedoc.MaxIDBytes || len(vals["agent_did"]) > evidencedoc.MaxIDBytes {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "run_id or agent_did too long")
	}
	if !didkey.ValidSyntax(vals["agent_did"]) {
		return nil, rejected(checkPayload, poh.InvalidDIDFormat, "agent_did is not a did:key or did:web")
	}
	if pl.Has("expires_at") {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "expires_at is not emitted by v1 attesters")
	}
	p := &payload{env: env}
	if _, e = hash(pl, "", "proof_bundle_hash_b64u"); e != nil {
		return nil, e
	}
	rm := pl.Get("runtime_metadata")
	if rm == nil {
		return nil, rejected(checkPayload, poh.MissingRequiredField, "runtime_metadata.tee is required")
	}
	if rm.Kind() != pohjson.Object || len(rm.Members()) != 1 || rm.Members()[0].Key != "tee" {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "runtime_metadata must hold exactly tee")
	}
	tee := rm.Get("tee")
	p.tee = tee
	for _, k := range []string{"tcb", "metadata"} {
		if tee.Has(k) {
			return nil, rejected(checkPayload, poh.SchemaValidationFailed, "runtime_metadata.tee.%s is not emitted by v1 attesters", k)
		}
	}
	const tp = "runtime_metadata.tee."
	if p.attestationType, e = need(tee, tp, "attestation_type"); e != nil {
		return nil, e
	}
	if p.rootID, e = need(tee, tp, "root_id"); e != nil {
		return nil, e
	}
	if p.tcbVersion, e = need(tee, tp, "tcb_version"); e != nil {
		return nil, e
	}
	if p.nonceBinding, e = hash(tee, tp, "nonce_binding_b64u"); e != nil {
		return nil, e
	}
	ref := tee.Get("evidence_ref")
	if ref == nil {
		return nil, rejected(checkPayload, poh.MissingRequiredField, "%sevidence_ref is required", tp)
	}
	rt, e := need(ref, tp+"evidence_ref.", "resource_type")
	if e != nil {
		return nil, e
	}
	if rt != evidencedoc.ResourceType {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "%sevidence_ref.resource_type must be %s", tp, evidencedoc.ResourceType)
	}
	if p.evidenceHash, e = hash(ref, tp+"evidence_ref.", "resource_hash_b64u"); e != nil {
		return nil, e
	}
	ms := tee.Get("measurements")
	if ms == nil {
		return nil, rejected(checkPayload, poh.MissingRequiredField, "%smeasurements is required", tp)
	}
	for _, k := range []string{"runtime_digest_b64u", "kernel_digest_b64u"} {
		if ms.Has(k) {
			return nil, rejected(checkPayload, poh.SchemaValidationFailed, "%smeasurements.%s is not emitted by v1 attesters", tp, k)
		}
	}
	if p.measurement, e = need(ms, tp+"measurements.", "measurement_hash_b64u"); e != nil {
		return nil, e
	}
	if p.modelDigest, e = hash(ms, tp+"measurements.", "model_weights_digest_b64u"); e != nil {
		return nil, e
	}
	md := pl.Get("metadata")
	if md == nil || !md.Has("clawea") {
		return nil, rejected(checkPayload, poh.MissingRequiredField, "metadata.clawea is required")
	}
	if md.Kind() != pohjson.Object || len(md.Members()) != 1 {
		return nil, rejected(checkPayload, poh.SchemaValidationFailed, "metadata must hold exactly clawea")
	}
	p.clawea = md.Get("clawea")
	return p, nil
}

// evidenceDocRejected is the refusal of an evidence document that
// evidencedoc.Parse refused, with the PoH code its error class names. The
// execution and the key attestation both map through it.
func evidenceDocRejected(err error) *Error {
	code := poh.MalformedEnvelope
	switch {
	case errors.Is(err, evidencedoc.ErrSignature):
		code = poh.SignatureInvalid
	case errors.Is(err, evidencedoc.ErrInconsistent):
		code = poh.EvidenceMismatch
	case errors.Is(err, evidencedoc.ErrUnsupported):
		code = poh.UnknownEnvelopeVersion
	}
	return wrapRejected(checkEvidenceDocument, code, err)
}

// checkEvidenceDoc checks evidence_ref, the evidence document's signature
// by the attester key, and its consistency with the payload.
func (st *state) checkEvidenceDoc(jws []byte) *Error {
	p := st.payload
	r := st.res
	if got := b64u.SHA256(jws); subtle.ConstantTimeCompare([]byte(got), []byte(p.evidenceHash)) != 1 {
		return rejected(checkEvidenceRef, poh.HashMismatch, "SHA-256 of the evidence document differs from evidence_ref.resource_hash_b64u")
	}
	st.pass(checkEvidenceRef, "%s", p.evidenceHash)

	doc, err := evidencedoc.Parse(jws, p.env.SignerKey)
	if err != nil {
		return evidenceDocRejected(err)
	}
	if doc.Kind != evidencedoc.KindExecution || doc.Execution == nil {
		return rejected(checkEvidenceDocument, poh.EvidenceMismatch, "the evidence document is a %s, not an execution attestation", doc.Kind)
	}
	st.doc = doc
	st.pass(checkEvidenceDocument, "signed by %s, %d evidence item(s)", doc.AttesterDID, len(doc.Items))

	ec := doc.Execution
	switch {
	case doc.AttesterDID != r.AttesterDID:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "evidence document attester differs")
	case ec.AttestationID != r.AttestationID:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "attestation_id differs from the evidence context")
	case ec.AgentDID != r.AgentDID:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "agent_did differs from the evidence context")
	case ec.RunID != r.RunID:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "run_id differs from the evidence context")
	case ec.ProofBundleHashB64u != r.ProofBundleHashB64u:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "proof_bundle_hash_b64u differs from the evidence context")
	case b64u.Encode(doc.Nonce[:]) != p.nonceBinding:
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "nonce_binding_b64u differs from the evidence document nonce")
	}
	want, err := pohjson.Marshal(evidencedoc.Metadata{Commitments: ec.Clawea, Simulated: doc.Simulated()})
	if err != nil {
		return rejected(checkExecutionContext, poh.MalformedEnvelope, "commitments cannot be encoded: %v", err)
	}
	got, err := pohjson.Stringify(p.clawea)
	if err != nil || !bytes.Equal(got, want) {
		return rejected(checkExecutionContext, poh.EvidenceMismatch, "metadata.clawea differs from the evidence context commitments (or the simulated label)")
	}
	r.Commitments = ec.Clawea
	r.Simulated = doc.Simulated()
	st.pass(checkExecutionContext, "attestation id, run, agent, bundle hash, nonce and commitments agree")

	// evidencedoc.Parse (CheckCommitments) has checked that
	// model_identity_digest_b64u is the digest of model_identity.
	if ec.Clawea.ModelIdentityDigestB64u != p.modelDigest {
		return rejected(checkModelIdentity, poh.EvidenceMismatch, "model_weights_digest_b64u is not the digest of the committed model identity")
	}
	st.pass(checkModelIdentity, "%s/%s (a configured model identity, not a weights measurement)", ec.Clawea.ModelIdentity.Provider, ec.Clawea.ModelIdentity.Model)
	return nil
}

// checkPlatform verifies every evidence item to its roots and its
// REPORT_DATA, recomputed from the nonce, the attester key and the
// evidence context.
func (st *state) checkPlatform() *Error {
	rd, err := st.doc.ReportData()
	if err != nil {
		return rejected(checkReportData, poh.EvidenceMismatch, "report data cannot be recomputed: %v", err)
	}
	allowSim := st.opts.AllowSimulated || st.policy.AllowSimulated
	popts := platform.Options{
		Now:                         st.opts.Now,
		AllowSimulated:              allowSim,
		AllowUncheckedRevocation:    st.opts.AllowUncheckedRevocation || st.policy.AllowUncheckedRevocation,
		AllowUncheckedCollateral:    st.opts.AllowUncheckedCollateral || st.policy.AllowUncheckedCollateral,
		AllowUncheckedGPURevocation: st.policy.AllowUncheckedGPURevocation,
		TrustedTPMAKs:               st.policy.TrustedTPMAKs,
		AllowUntrustedTPMAK:         st.opts.AllowUntrustedTPMAK,
		TPMAKCertifications:         st.policy.TPMAKCertifications,
		TPMEKRoots:                  st.policy.tpmEKRoots(),
		RequireTPMEKCertifiedAK:     st.policy.RequireTPMEKCertifiedAK,
		TrustGCEAKCerts:             st.policy.TrustGCEAKCerts,
		CertCache:                   st.opts.CertCache,
	}
	for i, it := range st.doc.Items {
		popts.Collateral = itemCollateral(st.opts.Collateral, it)
		pr, err := platform.Verify(it.Evidence, rd, popts)
		if err != nil {
			e := platformErr(err)
			switch e.Class {
			case ErrPolicy:
				e.Field = "allow_simulated"
				e.Err = fmt.Errorf("evidence[%d]: %w (policy member allow_simulated is not set, nor --allow-simulated)", i, platform.ErrSimulated)
			case ErrUsage:
			default:
				e.Err = fmt.Errorf("evidence[%d]: %w", i, e.Err)
			}
			return e
		}
		st.res.Platform = append(st.res.Platform, pr)
		st.res.Evidence = append(st.res.Evidence, EvidenceResult{
			Platform: pr.Platform, Format: pr.Format, Simulated: pr.Simulated, RootID: pr.RootID,
			MeasurementB64u: b64u.Encode(pr.Measurement), TCB: pr.TCB, Debug: pr.Debug,
			Revocation: pr.Revocation, Collateral: pr.Collateral, TCBStatus: pr.TCBStatus,
			QETCBStatus: pr.QETCBStatus, TCBAdvisoryIDs: slices.Clone(pr.TCBAdvisoryIDs),
		})
		sim := ""
		if pr.Simulated {
			sim = " SIMULATED"
		}
		boot := ""
		if pr.Boot != nil {
			boot = ", boot chain replayed from its " + pr.Boot.Log + " event log"
		}
		st.pass(checkPlatform, "evidence[%d] %s%s verified to %s%s", i, pr.Platform, sim, pr.RootID, boot)
		st.status(checkRevocation, i, pr.Revocation)
		st.status(checkCollateral, i, pr.Collateral)
	}
	st.pass(checkReportData, "REPORT_DATA = nonce binding || identity binding of %s", st.doc.AttesterDID)
	if st.res.Simulated {
		st.warn("simulated evidence: it proves nothing about hardware")
	}
	return nil
}

func (st *state) status(name string, i int, s platform.Status) {
	switch s {
	case platform.StatusChecked:
		st.pass(name, "evidence[%d] checked", i)
	case platform.StatusSkipped:
		st.skip(name, "evidence[%d]: no data supplied (allowed)", i)
		st.warn("%s not checked for evidence[%d]", name, i)
	default:
		st.checks = append(st.checks, CheckResult{Name: name, Status: StatusNotApplicable, Detail: fmt.Sprintf("evidence[%d]", i)})
	}
}

// platformErr maps a verify/platform error to this package's classes.
func platformErr(err error) *Error {
	check := checkPlatform
	pe, _ := errors.AsType[*platform.Error](err)
	if pe != nil {
		check = checkPlatform + "/" + pe.Check
		if pe.Check == platform.CheckReportData {
			check = checkReportData
		}
	}
	switch {
	case errors.Is(err, platform.ErrSimulated):
		return &Error{Class: ErrPolicy, Check: checkPolicy + "/" + platform.CheckSimulated, Err: err}
	case errors.Is(err, platform.ErrBadOptions):
		return &Error{Class: ErrUsage, Check: check, Err: err}
	case errors.Is(err, platform.ErrCannotCheck):
		return &Error{Class: ErrCannotCheck, Check: check, Code: poh.DependencyNotConfigured, Err: err}
	}
	e := &Error{Class: ErrRejected, Check: check, Err: err}
	if pe != nil {
		e.Code = pe.Code
	}
	if errors.Is(err, tpmquote.ErrUntrustedAK) {
		// Not a policy-class refusal (the AK is the TPM's root of trust),
		// but the policy members decide it.
		e.Field = "trusted_tpm_ak_names_hex"
		e.Err = fmt.Errorf("%w (policy members trusted_tpm_ak_names_hex, tpm_ak_certifications_b64u)", err)
	}
	return e
}

// itemCollateral merges the caller's collateral with the collateral an
// evidence item carries. Neither is trusted: verify/platform checks
// signatures and validity.
func itemCollateral(base *platform.Collateral, it evidencedoc.Item) *platform.Collateral {
	c := &platform.Collateral{}
	if base != nil {
		*c = *base
		c.SEVSNPCRLs = slices.Clone(base.SEVSNPCRLs)
	}
	col := it.Collateral
	switch it.Evidence.Platform {
	case evidence.PlatformSEVSNP, evidence.PlatformAzureSNP:
		if crl := col["crl"]; len(crl) > 0 {
			c.SEVSNPCRLs = append(c.SEVSNPCRLs, crl)
		}
	case evidence.PlatformTDX, evidence.PlatformAzureTDX:
		fill := func(dst *[]byte, v []byte) {
			if len(*dst) == 0 && len(v) > 0 {
				*dst = v
			}
		}
		fill(&c.TDXTCBInfo, col["tcb_info"])
		fill(&c.TDXTCBInfoIssuerChain, col["tcb_signing_chain"])
		fill(&c.TDXQEIdentity, col["qe_identity"])
		fill(&c.TDXQEIdentityIssuerChain, col["tcb_signing_chain"])
		fill(&c.TDXPCKCRL, col["pck_crl"])
		fill(&c.TDXRootCRL, col["root_ca_crl"])
		if len(c.TDXPCKCRL) > 0 && len(c.TDXPCKCRLIssuerChain) == 0 && len(it.Evidence.CertChain) > 1 {
			var chain []byte
			for _, der := range it.Evidence.CertChain[1:] {
				chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
			}
			c.TDXPCKCRLIssuerChain = chain
		}
	}
	return c
}

// checkTEEClaims re-derives runtime_metadata.tee from the verified first
// evidence item and compares.
func (st *state) checkTEEClaims() *Error {
	// The platform check derived them from the evidence it parsed and
	// verified (SEV-SNP); otherwise the evidence is parsed again here.
	ev := st.doc.Items[0].Evidence
	var c *teeclaims.Claims
	if ev.Platform == evidence.PlatformSEVSNP {
		c = st.res.Platform[0].TEEClaims
	}
	if c == nil {
		var err error
		if c, err = teeclaims.DeriveWith(ev, teeclaims.Options{ParseCertificate: st.opts.CertCache.ParseCertificate}); err != nil {
			return wrapRejected(checkTEEClaims, poh.EvidenceMismatch, err)
		}
	}
	p := st.payload
	m := b64u.Encode(c.Measurement)
	switch {
	case c.AttestationType != p.attestationType:
		return rejected(checkTEEClaims, poh.EvidenceMismatch, "attestation_type %q, the evidence gives %q", safetext.Clip(p.attestationType, 48), c.AttestationType)
	case c.RootID != p.rootID:
		return rejected(checkTEEClaims, poh.EvidenceMismatch, "root_id differs from the verified evidence's")
	case c.TCBVersion != p.tcbVersion:
		return rejected(checkTEEClaims, poh.EvidenceMismatch, "tcb_version differs from the verified evidence's")
	case m != p.measurement:
		return rejected(checkTEEClaims, poh.EvidenceMismatch, "measurement_hash_b64u differs from the verified evidence's")
	case !bytes.Equal(c.Measurement, st.res.Platform[0].Measurement):
		return rejected(checkTEEClaims, poh.EvidenceMismatch, "derived measurement differs from the verified one")
	}
	st.res.TEE = TEEClaims{AttestationType: c.AttestationType, RootID: c.RootID, TCBVersion: c.TCBVersion, MeasurementB64u: m}
	st.pass(checkTEEClaims, "%s %s tcb %s", c.AttestationType, c.RootID, c.TCBVersion)
	return nil
}

// platformPolicyMember names the policy file member (section 5.2) that a
// verify/platform policy check enforces, for refusal messages.
var platformPolicyMember = map[string]string{
	platform.CheckMeasurement: "measurements_b64u",
	platform.CheckTCB:         "min_tdx_tee_tcb_svn",
	platform.CheckTCBStatus:   "tdx_tcb_statuses",
	platform.CheckTCBAdvisory: "tdx_allowed_advisory_ids",
}

// unpinnedGuest says what of the guest's code the measurement pinned by p
// does not cover on pr's platform, "" when it or the boot pins do: a TDX
// measurement (MRTD) is the firmware's, the kernel and its command line are
// pinned only by boot_kernel_hex and boot_command_line_hex; a TPM quote of
// PCRs 0-7 (the default) does not cover PCRs 8 and 9, where the boot loader
// measures the kernel command line and initrd; an Azure measurement is the
// paravisor's, and no member pins the guest it boots (platform-azure.md).
func unpinnedGuest(pr *platform.Result, p *Policy) string {
	switch {
	case p.AllowAnyMeasurement:
		return "" // warned as such
	case pr.Platform == evidence.PlatformTDX && (len(p.BootKernel) == 0 || len(p.BootCommandLine) == 0):
		return "the tdx measurement (MRTD) measures the firmware only and the policy does not pin the kernel and its command line (boot_kernel_hex, boot_command_line_hex): any kernel and command line on that firmware is accepted"
	case pr.Platform == evidence.PlatformTPM && pr.TPM != nil && len(pr.TPM.PCRs) < 10:
		return fmt.Sprintf("the tpm quote covers pcrs 0-%d, not 8 and 9: the kernel command line and initrd the boot loader measures there are not pinned", len(pr.TPM.PCRs)-1)
	case pr.Platform == evidence.PlatformAzureSNP || pr.Platform == evidence.PlatformAzureTDX:
		return "the measurement is the azure paravisor's and no policy member pins the guest it boots: any guest of that paravisor is accepted"
	}
	return ""
}

// checkPolicy applies the policy to verified data.
func (st *state) checkPolicy() *Error {
	p := st.policy
	r := st.res
	pp := p.Platform()
	for i, pr := range r.Platform {
		if err := platform.CheckPolicy(pr, pp); err != nil {
			return platformPolicyErr(i, pr, err)
		}
		if pr.Collateral == platform.StatusChecked && (pr.TCBStatus != platform.TCBStatusUpToDate || pr.QETCBStatus != platform.TCBStatusUpToDate) {
			st.warn("evidence[%d]: tdx tcb status %s, qe tcb status %s, advisories %v: accepted by policy, not up to date",
				i, pr.TCBStatus, pr.QETCBStatus, pr.TCBAdvisoryIDs)
		}
		if w := unpinnedGuest(pr, p); w != "" {
			r.GuestUnpinned = true
			st.warn("evidence[%d]: %s", i, w)
		}
	}
	if p.AllowAnyMeasurement {
		st.warn("policy accepts any measurement")
	}
	if e := checkRequireGPU(p, r); e != nil {
		return e
	}
	if len(p.TrustedAttesterDIDs) > 0 && !slices.Contains(p.TrustedAttesterDIDs, r.AttesterDID) {
		return policyErr(PolicyAttester, "trusted_attester_dids", "attester %s is not in trusted_attester_dids", r.AttesterDID)
	}
	c := &r.Commitments
	if p.ExpectedPromptHashB64u != "" && p.ExpectedPromptHashB64u != c.SystemPromptHashB64u {
		return policyErr(policyPromptHash, "expected_system_prompt_hash_b64u", "the run's system prompt hash %s is not expected_system_prompt_hash_b64u %s",
			safetext.Clip(c.SystemPromptHashB64u, 64), p.ExpectedPromptHashB64u)
	}
	if p.ExpectedReportHashB64u != "" && p.ExpectedReportHashB64u != c.SystemPromptReportHashB64u {
		return policyErr(policyReportHash, "expected_report_hash_b64u", "the run's SystemPromptReport hash %s is not expected_report_hash_b64u %s",
			safetext.Clip(c.SystemPromptReportHashB64u, 64), p.ExpectedReportHashB64u)
	}
	if p.ExpectedGatePolicyHashB64u != "" && p.ExpectedGatePolicyHashB64u != c.GatePolicyHashB64u {
		return policyErr(policyGatePolicy, "expected_gate_policy_hash_b64u", "the run's gate policy hash %s is not expected_gate_policy_hash_b64u %s",
			safetext.Clip(c.GatePolicyHashB64u, 64), p.ExpectedGatePolicyHashB64u)
	}
	if e := checkAdmission(p, c); e != nil {
		return e
	}
	if e := checkIsolation(p, c); e != nil {
		return e
	}
	if e := st.checkRequireGateway(); e != nil {
		return e
	}
	if m := p.ExpectedModel; m != nil {
		got := c.ModelIdentity
		if got.Provider != m.Provider || got.Model != m.Model || got.Revision != m.Revision {
			return policyErr(policyModel, "expected_model", "the run's model identity %q/%q revision %q is not expected_model %q/%q revision %q",
				safetext.Clip(got.Provider, 48), safetext.Clip(got.Model, 64), safetext.Clip(got.Revision, 48), m.Provider, m.Model, m.Revision)
		}
	}
	if len(p.TrustedTemplates) > 0 || len(p.TrustedRecipes) > 0 {
		if st.report == nil {
			return &Error{Class: ErrCannotCheck, Check: checkPolicy + "/" + policyTemplates, Code: poh.DependencyNotConfigured,
				Err: errors.New("the policy pins templates or recipes but no SystemPromptReport was supplied")}
		}
		if e := checkReportPolicy(st.report, p); e != nil {
			return e
		}
	}
	st.pass(checkPolicy, "%s", r.PolicyID)
	return nil
}

// checkAdmission applies admission_policy_hashes_b64u and require_sensitive
// (docs/spec/verify-v1.md) to the verified commitments. The message names
// the policy member and the value the attestation carries.
func checkAdmission(p *Policy, c *evidencedoc.Commitments) *Error {
	if len(p.AdmissionPolicyHashes) > 0 && (c.AdmissionPolicyHashB64u == "" || !slices.Contains(p.AdmissionPolicyHashes, c.AdmissionPolicyHashB64u)) {
		return policyErr(policyAdmission, "admission_policy_hashes_b64u", "the run's admission policy %s is not in admission_policy_hashes_b64u", AdmissionPolicyOf(c))
	}
	if p.RequireSensitive && !c.IsSensitive() {
		seen := "sensitive: false"
		if c.Sensitive == evidencedoc.SensitiveAbsent {
			seen = "no sensitive member (" + c.Version + ")"
		}
		return policyErr(policySensitive, "require_sensitive", "the run is not marked sensitive (%s) and require_sensitive is set", seen)
	}
	return nil
}

// AdmissionPolicyOf describes the admission policy commitments name: its
// hash and whether it is sensitive, "none" when the attester enforced none,
// or that the commitment version predates admission.
func AdmissionPolicyOf(c *evidencedoc.Commitments) string {
	switch {
	case c.Version == evidencedoc.CommitmentsVersionV1:
		return "none (" + c.Version + " predates admission policies)"
	case c.AdmissionPolicyHashB64u == "":
		return "none"
	case c.IsSensitive():
		return c.AdmissionPolicyHashB64u + " (sensitive)"
	}
	return c.AdmissionPolicyHashB64u + " (not sensitive)"
}
