// Package earresult turns a verify verdict into an EAR (EAT Attestation
// Result, github.com/veraison/ear, an RFC 9711 EAT profile) and signs it as
// a JWT with the operator's key. The mapping is normative in
// docs/spec/verify-v1.md section 7.
package earresult

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
)

// SubmodName is the one EAR submodule this verifier reports.
const SubmodName = "clawea-execution"

// Verifier identity.
const (
	verifierDeveloper = "https://clawea.dev"
	defaultBuild      = "clawea-verify/v1"
)

// maxKeyBytes bounds a PEM key file.
const maxKeyBytes = 16 << 10

// errKey is wrapped by every key error. Messages never contain key bytes.
var errKey = errors.New("earresult: unusable signing key")

// Options configure New.
type Options struct {
	// Now is the EAR iat; required.
	Now time.Time
	// Build identifies the verifier build; empty means defaultBuild.
	Build string
	// Policy is the policy Verify applied; its ID is
	// ear.appraisal-policy-id, and the configuration claim is made only
	// when it pins commitments. Nil means the zero policy.
	Policy *verify.Policy
}

// New returns the EAR for a verify.Verify outcome: res on success, or the
// error (an *verify.Error) on failure. Usage errors have no EAR.
func New(res *verify.Result, verr error, o Options) (*ear.AttestationResult, error) {
	if o.Now.IsZero() {
		return nil, errors.New("earresult: Now is required")
	}
	if res == nil && verr == nil {
		return nil, errors.New("earresult: no result and no error")
	}
	if verr != nil && errors.Is(verr, verify.ErrUsage) {
		return nil, errors.New("earresult: a usage error has no attestation result")
	}
	build := o.Build
	if build == "" {
		build = defaultBuild
	}
	ar := ear.NewAttestationResult(SubmodName, build, verifierDeveloper)
	iat := o.Now.Unix()
	ar.IssuedAt = &iat
	ap := ar.Submods[SubmodName]
	pol := o.Policy
	if pol == nil {
		pol = &verify.Policy{}
	}
	// On success the id is the one Verify recorded for the policy it
	// applied (Result.PolicyID), not computed a second time.
	var id string
	if verr == nil && res.PolicyID != "" {
		id = res.PolicyID
	} else {
		id = pol.ID()
	}
	ap.AppraisalPolicyID = &id
	annot := map[string]interface{}{}
	if verr != nil {
		mapFailure(ap, verr, annot)
	} else {
		mapSuccess(ar, ap, res, pinsConfig(pol), annot)
		if g := gpuSubmod(res, id, pol); g != nil {
			ar.Submods[GPUSubmodName] = g
		}
	}
	ap.VeraisonAnnotatedEvidence = &annot
	return ar, nil
}

// pinsConfig reports whether p pins any of the run's configuration.
func pinsConfig(p *verify.Policy) bool {
	return p.ExpectedPromptHashB64u != "" || p.ExpectedReportHashB64u != "" || p.ExpectedGatePolicyHashB64u != "" ||
		p.ExpectedModel != nil || len(p.TrustedTemplates) > 0 || len(p.TrustedRecipes) > 0
}

func mapSuccess(ar *ear.AttestationResult, ap *ear.Appraisal, r *verify.Result, pinned bool, annot map[string]interface{}) {
	tv := ap.TrustVector
	skipped := false
	for _, c := range r.Checks {
		if c.Status == verify.StatusSkipped {
			skipped = true
		}
	}
	if r.Simulated {
		tv.Hardware = ear.UnsafeHardwareClaim
		tv.InstanceIdentity = ear.NoClaim
		tv.RuntimeOpaque = ear.NoClaim
	} else {
		tv.Hardware = ear.GenuineHardwareClaim
		tv.InstanceIdentity = ear.TrustworthyInstanceClaim
		tv.RuntimeOpaque = ear.NoClaim
		if r.TEE.AttestationType == "sev_snp_report" || r.TEE.AttestationType == "tdx_quote" {
			tv.RuntimeOpaque = ear.EncryptedMemoryRuntimeClaim
		}
		for _, e := range r.Evidence {
			if e.Platform == evidence.PlatformNVIDIAGPU {
				continue // appraised in the GPU submod
			}
			if e.Revocation == "skipped" || e.Collateral == "skipped" || !tpmAKCertified(e) {
				tv.Hardware = ear.UnsafeHardwareClaim
			}
			// A TCB the policy accepted although Intel does not rate it
			// UpToDate: genuine hardware with known vulnerabilities or
			// missing mitigations (AR4SI hardware 32).
			if e.Collateral == "checked" && (e.TCBStatus != platform.TCBStatusUpToDate || e.QETCBStatus != platform.TCBStatusUpToDate) {
				tv.Hardware = ear.UnsafeHardwareClaim
			}
		}
	}
	tv.Executables = ear.ApprovedBootClaim
	if r.GuestUnpinned || slices.Contains(r.Warnings, "policy accepts any measurement") {
		tv.Executables = ear.UnrecognizedRuntimeClaim
	}
	if pinned {
		tv.Configuration = ear.ApprovedConfigClaim
	}
	status := ear.TrustTierAffirming
	if skipped || r.Simulated || len(r.Warnings) > 0 {
		status = ear.TrustTierWarning
	}
	ap.Status = &status
	ap.UpdateStatusFromTrustVector()
	nonce := r.NonceBindingB64u
	ar.Nonce = &nonce

	annot["verdict"] = "verified"
	annot["attestation_id"] = r.AttestationID
	annot["agent_did"] = r.AgentDID
	annot["run_id"] = r.RunID
	annot["attester_did"] = r.AttesterDID
	annot["proof_bundle_hash_b64u"] = r.ProofBundleHashB64u
	annot["evidence_hash_b64u"] = r.EvidenceHashB64u
	annot["simulated"] = r.Simulated
	annot["attestation_type"] = r.TEE.AttestationType
	annot["root_id"] = r.TEE.RootID
	annot["tcb_version"] = r.TEE.TCBVersion
	var tcbs []interface{}
	for _, e := range r.Evidence {
		if e.Collateral != "checked" || e.TCBStatus == "" {
			continue
		}
		t := map[string]interface{}{"tcb_status": e.TCBStatus, "qe_tcb_status": e.QETCBStatus}
		if len(e.TCBAdvisoryIDs) > 0 {
			var ids []interface{}
			for _, id := range e.TCBAdvisoryIDs {
				ids = append(ids, id)
			}
			t["advisory_ids"] = ids
		}
		tcbs = append(tcbs, t)
	}
	if len(tcbs) > 0 {
		annot["tcb_statuses"] = tcbs
	}
	annot["measurement_hash_b64u"] = r.TEE.MeasurementB64u
	annot["system_prompt_hash_b64u"] = r.Commitments.SystemPromptHashB64u
	annot["system_prompt_report_hash_b64u"] = r.Commitments.SystemPromptReportHashB64u
	annot["gate_policy_hash_b64u"] = r.Commitments.GatePolicyHashB64u
	annot["gate_audit_root_b64u"] = r.Commitments.GateAuditRootB64u
	annot["gate_audit_count"] = r.Commitments.GateAuditCount
	annot["model_identity_digest_b64u"] = r.Commitments.ModelIdentityDigestB64u
	if h := r.Commitments.AdmissionPolicyHashB64u; h != "" {
		annot["admission_policy_hash_b64u"] = h
	}
	annot["sensitive"] = r.Commitments.IsSensitive()
	if iso := r.Commitments.Isolation; iso != nil {
		annot["isolation"] = isolationAnnotation(iso)
	}
	var skippedChecks []interface{}
	for _, c := range r.Checks {
		if c.Status == verify.StatusSkipped {
			skippedChecks = append(skippedChecks, c.Name)
		}
	}
	if len(skippedChecks) > 0 {
		annot["skipped_checks"] = skippedChecks
	}
	if len(r.Warnings) > 0 {
		var ws []interface{}
		for _, w := range r.Warnings {
			ws = append(ws, w)
		}
		annot["warnings"] = ws
	}
}

// tpmAKCertified reports whether e, if a TPM quote, was signed by an
// attestation key a certificate chain ties to a TPM: an EK certificate
// (root id "tpm-ek:") or an AK certificate from a trusted AK CA
// ("tpm-ak-cert:"). An AK trusted by its Name alone (trust on first use)
// may be a software key: genuine hardware is not established. Evidence of
// other platforms is true.
func tpmAKCertified(e verify.EvidenceResult) bool {
	return e.Platform != evidence.PlatformTPM || strings.HasPrefix(e.RootID, "tpm-ek:") || strings.HasPrefix(e.RootID, "tpm-ak-cert:")
}

func mapFailure(ap *ear.Appraisal, verr error, annot map[string]interface{}) {
	tv := ap.TrustVector
	check := "unknown"
	if ve, ok := errors.AsType[*verify.Error](verr); ok {
		check = ve.Check
		if ve.Code != "" {
			annot["poh_code"] = string(ve.Code)
		}
	}
	annot["failed_check"] = check
	status := ear.TrustTierContraindicated
	switch {
	case errors.Is(verr, verify.ErrCannotCheck):
		annot["verdict"] = "cannot-check"
		status = ear.TrustTierNone
	case errors.Is(verr, verify.ErrPolicy):
		annot["verdict"] = "policy-refused"
		switch check {
		case "policy/" + platform.CheckSimulated:
			tv.Hardware = ear.UnrecognizedHardwareClaim
		case "policy/" + platform.CheckMeasurement:
			tv.Executables = ear.ContraindicatedRuntimeClaim
		case "policy/" + platform.CheckDebug:
			tv.RuntimeOpaque = ear.VisibleMemoryRuntimeClaim
		case "policy/" + platform.CheckTCB, "policy/" + platform.CheckTCBStatus, "policy/" + platform.CheckTCBAdvisory, "policy/" + platform.CheckGuestPolicy:
			tv.Hardware = ear.ContraindicatedHardwareClaim
		case "policy/" + verify.PolicyAttester:
			tv.InstanceIdentity = ear.UnrecognizedInstanceClaim
		default:
			tv.Configuration = ear.UnsupportableConfigClaim
		}
	default:
		annot["verdict"] = "rejected"
		tv.SetAll(ear.CryptoValidationFailedClaim)
	}
	ap.Status = &status
}

// Signer signs EARs with one key: EdDSA for an Ed25519 key, ES256 for an
// ECDSA P-256 key. NewSigner does the work that depends on the key alone
// (its algorithm, its kid, the protected header) once, so that Sign costs
// one serialization of the EAR and one signature.
type Signer struct {
	key    crypto.Signer
	alg    jwa.SignatureAlgorithm
	prefix []byte // the encoded protected header and the dot after it
}

// NewSigner prepares key to sign EARs. The protected header of every EAR it
// signs is {"alg":...,"kid":...,"typ":"JWT"}, kid being the key's keyID.
func NewSigner(key crypto.Signer) (*Signer, error) {
	alg, err := algorithm(key.Public())
	if err != nil {
		return nil, err
	}
	kid, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	h, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{alg.String(), kid, "JWT"})
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", errKey, err)
	}
	return &Signer{key: key, alg: alg, prefix: append([]byte(base64.RawURLEncoding.EncodeToString(h)), '.')}, nil
}

// Sign returns ar as a compact JWS (a JWT, RFC 7519) whose payload is ar's
// JSON form (the bytes of ear's MarshalJSON, which validates it first:
// marshal).
func (s *Signer) Sign(ar *ear.AttestationResult) ([]byte, error) {
	claims, err := marshal(ar)
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding
	tok := make([]byte, len(s.prefix)+enc.EncodedLen(len(claims)), len(s.prefix)+enc.EncodedLen(len(claims))+1+enc.EncodedLen(2*p256Size))
	copy(tok, s.prefix)
	enc.Encode(tok[len(s.prefix):], claims)
	sig, err := s.sign(tok)
	if err != nil {
		return nil, err
	}
	tok = append(tok, '.')
	return enc.AppendEncode(tok, sig), nil
}

// p256Size is the size of each of R and S in an ES256 signature.
const p256Size = 32

// sign signs the JWS signing input (RFC 7515 section 5.1): the input itself
// with Ed25519; its SHA-256 with ECDSA, whose ASN.1 signature becomes R || S
// (RFC 7518 section 3.4).
func (s *Signer) sign(input []byte) ([]byte, error) {
	if s.alg == jwa.EdDSA {
		return s.key.Sign(rand.Reader, input, crypto.Hash(0))
	}
	digest := sha256.Sum256(input)
	der, err := s.key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return nil, err
	}
	var sig struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(der, &sig); err != nil || len(rest) != 0 || sig.R.Sign() <= 0 || sig.S.Sign() <= 0 ||
		sig.R.BitLen() > 8*p256Size || sig.S.BitLen() > 8*p256Size {
		return nil, errors.New("earresult: the key returned a malformed ECDSA signature")
	}
	out := make([]byte, 2*p256Size)
	sig.R.FillBytes(out[:p256Size])
	sig.S.FillBytes(out[p256Size:])
	return out, nil
}

// algorithm returns the JWS algorithm for a public key.
func algorithm(pub crypto.PublicKey) (jwa.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return jwa.EdDSA, nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jwa.ES256, nil
		}
	}
	return "", fmt.Errorf("%w: want Ed25519 or ECDSA P-256", errKey)
}

// ParseSigningKey reads one PEM "PRIVATE KEY" block (PKCS #8) holding an
// Ed25519 or ECDSA P-256 key.
func ParseSigningKey(data []byte) (crypto.Signer, error) {
	if len(data) > maxKeyBytes {
		return nil, fmt.Errorf("%w: key file over %d bytes", errKey, maxKeyBytes)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: want a PEM PRIVATE KEY (PKCS #8) block", errKey)
	}
	if len(trimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: want exactly one PEM block", errKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed PKCS #8 key", errKey)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: want Ed25519 or ECDSA P-256", errKey)
	}
	if _, err := algorithm(s.Public()); err != nil {
		return nil, err
	}
	return s, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}
