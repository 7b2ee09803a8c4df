// Package evidencedoc defines the clawea evidence document: a compact JWS
// (RFC 7515, EdDSA with the attester's Ed25519 identity key, payload
// embedded) that carries hardware evidence (quotes, certificate chains,
// collateral) together with the context its REPORT_DATA commits to.
//
// The format is normative in docs/spec/attestation-v1.md. This package has no
// device imports: verifiers use Parse, which checks the signature and returns
// only verified, canonical data; producers use Sign. Whatever Parse accepts
// re-encodes to the identical bytes.
//
// Parse establishes "signed by this key" only. That the key is the attester's
// key inside a TEE follows from the hardware evidence, whose REPORT_DATA a
// verifier recomputes with Document.ReportData and checks against vendor
// roots (package verify).
package evidencedoc

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/wire/evidence"
)

// Format constants.
const (
	// version is the evidence_version of the payload, its first member.
	version = "clawea.dev/evidence/v1"
	// jwsType is the JWS "typ" header.
	jwsType = "clawea-evidence+jws"
	// algorithm is the only accepted JWS "alg".
	algorithm = "EdDSA"
	// ResourceType is the evidence_ref.resource_type of an execution
	// attestation that points at an evidence document.
	ResourceType = version

	// KindExecution is an evidence document referenced by an
	// execution_attestation envelope.
	KindExecution = "execution_attestation"
	// KindKey is a key attestation: the attester proves its identity key
	// (and optionally its X25519 pack-recipient key).
	KindKey = "key_attestation"

	// ExecutionContextLabel and KeyContextLabel are the first member of the
	// evidence context objects (domain separation).
	ExecutionContextLabel = "clawea.dev/evidence/v1/context/execution"
	KeyContextLabel       = "clawea.dev/evidence/v1/context/key"
	// keyNonceLabel is the label of the key-attestation nonce (REPORT_DATA
	// bytes 0..31 of a key attestation).
	keyNonceLabel = "clawea.dev/attester/v1/key-attestation/nonce"
	// CommitmentsVersionV1 is the first commitments version: it carries
	// neither admission_policy_hash_b64u nor sensitive. Parse still
	// accepts it, so that older attestations stay verifiable.
	CommitmentsVersionV1 = "clawea.dev/attestation/v1"
	// CommitmentsVersionV2 adds admission_policy_hash_b64u (present when
	// the attester enforced an admission policy at run creation) and
	// sensitive (always present).
	CommitmentsVersionV2 = "clawea.dev/attestation/v2"
	// CommitmentsVersionV3 is v2 plus isolation (REQUIRED): what the
	// attester observed of its isolation when it created the run.
	CommitmentsVersionV3 = "clawea.dev/attestation/v3"
	// CommitmentsVersionV4 is v2 plus gateway (REQUIRED): the run's model
	// gateway record; isolation is OPTIONAL (present when the attester
	// observed it).
	CommitmentsVersionV4 = "clawea.dev/attestation/v4"
)

// Limits.
const (
	// MaxJWSBytes bounds a compact JWS handed to Parse.
	MaxJWSBytes = 8 << 20
	// maxEvidence bounds the number of CPU evidence items, maxGPUItems the
	// GPU evidence items after them (an eight-GPU board).
	maxEvidence = 4
	maxGPUItems = 8
	// maxBlobBytes bounds Evidence.Blob.
	maxBlobBytes = 64 << 10
	// maxSignatureBytes bounds Evidence.Signature.
	maxSignatureBytes = 1024
	// maxCerts and maxCertBytes bound Evidence.CertChain.
	maxCerts = 4
	// maxGPUCerts bounds a GPU's device certificate chain (five on a
	// Hopper: device, BROM, provisioner, identity, root).
	maxGPUCerts  = 8
	maxCertBytes = 16 << 10
	// maxAuxBytes bounds one Evidence.Aux value (a TPM event log).
	maxAuxBytes = 4 << 20
	// maxCollateralBytes bounds one collateral value.
	maxCollateralBytes = 1 << 20
	// MaxChallengeBytes bounds a key-attestation challenge.
	MaxChallengeBytes = 1024
	// MaxIDBytes bounds attestation ids, run ids and DIDs.
	MaxIDBytes = 512
	// maxProviderBytes, maxModelBytes and maxRevisionBytes bound a model
	// identity (the PoH system_prompt_report limits for provider and model).
	maxProviderBytes = 64
	maxModelBytes    = 128
	maxRevisionBytes = 128
)

// Errors. Every error from Parse and Sign wraps exactly one of them.
var (
	// ErrTooLarge: input above a size limit.
	ErrTooLarge = errors.New("evidencedoc: input too large")
	// ErrMalformed: not a well-formed, canonical evidence document.
	ErrMalformed = errors.New("evidencedoc: malformed evidence document")
	// ErrUnsupported: a well-formed document of a kind this version refuses:
	// another alg (none, HS256, ...), typ, critical header, evidence_version,
	// kind, platform or format.
	ErrUnsupported = errors.New("evidencedoc: unsupported evidence document")
	// ErrSignature: the JWS signature does not verify under the given key, or
	// the document names another signer.
	ErrSignature = errors.New("evidencedoc: signature invalid")
	// ErrInconsistent: signed, well-formed, but internally inconsistent (for
	// example a nonce that does not match its context).
	ErrInconsistent = errors.New("evidencedoc: inconsistent evidence document")
)

// Document is a verified evidence document. Everything in it was covered by
// the signature that Parse checked.
type Document struct {
	// Kind is KindExecution or KindKey.
	Kind string
	// AttesterDID is the signer's did:key (JWS kid and payload attester_did).
	AttesterDID string
	// AttesterKey is the Ed25519 key of AttesterDID.
	AttesterKey ed25519.PublicKey
	// IssuedAt is when the document was signed (millisecond precision).
	IssuedAt time.Time
	// Nonce is REPORT_DATA bytes 0..31: the PoH TEE nonce binding for an
	// execution attestation, KeyNonce(challenge) for a key attestation.
	Nonce [32]byte
	// Execution is set for KindExecution, Key for KindKey.
	Execution *ExecutionContext
	Key       *KeyContext
	// Items are the hardware evidence, all over the same REPORT_DATA.
	Items []Item

	// JWS is the exact compact serialization that was parsed or signed.
	// Parse keeps the slice it was given, not a copy (a verifier's input
	// outlives the verification, and the copy was a tenth of what one
	// allocated): the caller leaves those bytes unchanged while the
	// Document is in use.
	JWS []byte
	// context is the exact evidence context bytes (see EvidenceContext).
	context []byte
}

// Item is one piece of hardware evidence and the collateral that goes with it.
type Item struct {
	Evidence *evidence.Evidence
	// Collateral holds verification collateral under documented names
	// (docs/spec/attestation-v1.md); nil when there is none.
	Collateral map[string][]byte
}

// ExecutionContext is the evidence context of an execution attestation.
// Field order is the wire order.
type ExecutionContext struct {
	Context             string      `json:"context"`
	AttestationID       string      `json:"attestation_id"`
	AgentDID            string      `json:"agent_did"`
	RunID               string      `json:"run_id"`
	ProofBundleHashB64u string      `json:"proof_bundle_hash_b64u"`
	Clawea              Commitments `json:"clawea"`
}

// KeyContext is the evidence context of a key attestation. Field order is
// the wire order.
type KeyContext struct {
	Context       string `json:"context"`
	ChallengeB64u string `json:"challenge_b64u"`
	// RecipientX25519B64u is the attester's X25519 pack-recipient public key
	// (32 bytes), when it has one.
	RecipientX25519B64u string `json:"recipient_x25519_b64u,omitempty"`
}

// Commitments are clawea's claims about a run. They are the "clawea" member
// of the execution evidence context, so the hardware evidence commits to
// them, and the leading members of metadata.clawea (Metadata) of the
// execution attestation payload.
// Field order is the wire order.
type Commitments struct {
	Version                      string        `json:"clawea_version"`
	SystemPromptHashB64u         string        `json:"system_prompt_hash_b64u"`
	SystemPromptReportHashB64u   string        `json:"system_prompt_report_hash_b64u"`
	PromptPackCiphertextHashB64u string        `json:"prompt_pack_ciphertext_hash_b64u"`
	GatePolicyHashB64u           string        `json:"gate_policy_hash_b64u"`
	GateAuditRootB64u            string        `json:"gate_audit_root_b64u"`
	GateAuditCount               int64         `json:"gate_audit_count"`
	ModelIdentity                ModelIdentity `json:"model_identity"`
	ModelIdentityDigestB64u      string        `json:"model_identity_digest_b64u"`
	// AdmissionPolicyHashB64u (v2, OPTIONAL) is the admission_policy_hash_b64u
	// of the admission policy the attester enforced when it created the run
	// (docs/spec/admission-policy-v1.md); empty when it enforced none.
	AdmissionPolicyHashB64u string `json:"admission_policy_hash_b64u,omitempty"`
	// Sensitive (v2, REQUIRED; absent in v1) says whether that policy is
	// sensitive, so that the run was held to its run-time obligations.
	// sensitiveTrue requires AdmissionPolicyHashB64u.
	Sensitive sensitivity `json:"sensitive,omitzero"`
	// Isolation (v3, REQUIRED; absent in v1 and v2) is what the attester
	// observed of its isolation from the orchestrator when it created the
	// run (docs/spec/attestation-v1.md section 5.6).
	Isolation *Isolation `json:"isolation,omitempty"`
	// Gateway (v4, REQUIRED; absent before) is the run's model gateway
	// record: the receipts the attester's gateway issued for the run
	// (docs/spec/attestation-v1.md section 5.7).
	Gateway *GatewayRecord `json:"gateway,omitempty"`
}

// GatewayRecord is the gateway member of v4 commitments: how many
// gateway_receipt envelopes the attester's model gateway issued for the run
// and the head of their chain (poh.ChainGatewayReceipt; "" for none).
// Field order is the wire order.
type GatewayRecord struct {
	ReceiptCount     int64  `json:"receipt_count"`
	ReceiptChainB64u string `json:"receipt_chain_b64u"`
}

// IsSensitive reports whether the commitments mark the run as sensitive.
// A v1 commitment never does.
func (c *Commitments) IsSensitive() bool { return c.Sensitive == sensitiveTrue }

// sensitivity is the "sensitive" member of v2 commitments: absent (its zero
// value, v1), false or true.
type sensitivity uint8

// The values of sensitivity.
const (
	SensitiveAbsent sensitivity = iota
	SensitiveFalse
	sensitiveTrue
)

// SensitivityOf returns sensitiveTrue or SensitiveFalse.
func SensitivityOf(b bool) sensitivity {
	if b {
		return sensitiveTrue
	}
	return SensitiveFalse
}

// IsZero reports whether the member is absent (for omitzero).
func (s sensitivity) IsZero() bool { return s == SensitiveAbsent }

// MarshalJSON writes true or false; an absent or unknown value is an error
// (absent members are omitted by omitzero before this is called).
func (s sensitivity) MarshalJSON() ([]byte, error) {
	switch s {
	case sensitiveTrue:
		return []byte("true"), nil
	case SensitiveFalse:
		return []byte("false"), nil
	}
	return nil, fmt.Errorf("%w: sensitive has no value", ErrMalformed)
}

// UnmarshalJSON accepts exactly true or false (not null).
func (s *sensitivity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*s = sensitiveTrue
	case "false":
		*s = SensitiveFalse
	default:
		return fmt.Errorf("%w: sensitive must be true or false", ErrMalformed)
	}
	return nil
}

// Metadata is the object at metadata.clawea of an execution attestation
// payload: the Commitments, then "simulated", which is true when any
// evidence item of the referenced evidence document is simulated. Simulated
// is a label derived from the evidence, not a hardware-bound claim: whether
// evidence is simulated is decided by the roots it verifies against.
type Metadata struct {
	Commitments
	Simulated bool `json:"simulated"`
}

// EvidenceContext returns a copy of the exact evidence context bytes bound
// into REPORT_DATA bytes 32..63: the JSON.stringify form of the payload's
// "execution" or "key" member.
func (d *Document) EvidenceContext() []byte { return append([]byte(nil), d.context...) }

// ReportData recomputes the REPORT_DATA every evidence item must carry:
// evidence.NewReportData(Nonce, AttesterKey, EvidenceContext()).
func (d *Document) ReportData() (evidence.ReportData, error) {
	return evidence.NewReportData(d.Nonce, d.AttesterKey, d.context)
}
