package poh

// Go types for PoH documents this project writes. Field order is the PoH
// emitted order (the order of the schema's properties), which pohjson.FromGo
// preserves; optional members use omitempty.

import "github.com/clawea/attester/schema/pohjson"

// ExecutionAttestation is the payload of an execution_attestation envelope
// (schema execution_attestation.v1, additionalProperties false).
type ExecutionAttestation struct {
	AttestationVersion  string           `json:"attestation_version"`
	AttestationID       string           `json:"attestation_id"`
	ExecutionType       string           `json:"execution_type"`
	AgentDID            string           `json:"agent_did"`
	AttesterDID         string           `json:"attester_did"`
	RunID               string           `json:"run_id,omitempty"`
	ProofBundleHashB64u string           `json:"proof_bundle_hash_b64u,omitempty"`
	Harness             *Harness         `json:"harness,omitempty"`
	RuntimeMetadata     *RuntimeMetadata `json:"runtime_metadata,omitempty"`
	IssuedAt            string           `json:"issued_at"`
	ExpiresAt           string           `json:"expires_at,omitempty"`
	Metadata            map[string]any   `json:"metadata,omitempty"`
}

// Harness identifies the agent harness in an execution attestation.
type Harness struct {
	ID             string `json:"id,omitempty"`
	Version        string `json:"version,omitempty"`
	Runtime        string `json:"runtime,omitempty"`
	ConfigHashB64u string `json:"config_hash_b64u,omitempty"`
}

// ReadHarness reads a harness object (an attestation's harness, a bundle's
// metadata.harness) whose shape a schema has already checked; nil for nil.
func ReadHarness(v *pohjson.Value) *Harness {
	if v == nil {
		return nil
	}
	h := &Harness{}
	h.ID, _ = v.GetString("id")
	h.Version, _ = v.GetString("version")
	h.Runtime, _ = v.GetString("runtime")
	h.ConfigHashB64u, _ = v.GetString("config_hash_b64u")
	return h
}

// RuntimeMetadata is execution_attestation.runtime_metadata.
type RuntimeMetadata struct {
	TEE *TEE `json:"tee,omitempty"`
}

// TEE is runtime_metadata.tee.
type TEE struct {
	AttestationType  string         `json:"attestation_type"`
	RootID           string         `json:"root_id"`
	TCBVersion       string         `json:"tcb_version"`
	EvidenceRef      EvidenceRef    `json:"evidence_ref"`
	NonceBindingB64u string         `json:"nonce_binding_b64u,omitempty"`
	Measurements     Measurements   `json:"measurements"`
	TCB              *TCB           `json:"tcb,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// EvidenceRef points at the evidence document by hash.
type EvidenceRef struct {
	ResourceType     string `json:"resource_type"`
	ResourceHashB64u string `json:"resource_hash_b64u"`
	URI              string `json:"uri,omitempty"`
}

// Measurements are the TEE measurements, b64u.
type Measurements struct {
	MeasurementHashB64u    string `json:"measurement_hash_b64u"`
	RuntimeDigestB64u      string `json:"runtime_digest_b64u,omitempty"`
	KernelDigestB64u       string `json:"kernel_digest_b64u,omitempty"`
	ModelWeightsDigestB64u string `json:"model_weights_digest_b64u,omitempty"`
}

// TCB is the TCB status of the platform.
type TCB struct {
	Status      string   `json:"status,omitempty"`
	AdvisoryIDs []string `json:"advisory_ids,omitempty"`
}

// EventChainEntry is one event_chain element of a proof bundle.
type EventChainEntry struct {
	EventID         string  `json:"event_id"`
	RunID           string  `json:"run_id"`
	EventType       string  `json:"event_type"`
	Timestamp       string  `json:"timestamp"`
	PayloadHashB64u string  `json:"payload_hash_b64u"`
	PrevHashB64u    *string `json:"prev_hash_b64u"`
	EventHashB64u   string  `json:"event_hash_b64u"`
}

// SystemPromptReportCommitment is the PoH system_prompt_report.v1 document
// a harness puts in its bundle metadata.
type SystemPromptReportCommitment struct {
	SystemPromptReportVersion string       `json:"system_prompt_report_version"`
	ReportID                  string       `json:"report_id"`
	RunID                     string       `json:"run_id"`
	AgentDID                  string       `json:"agent_did"`
	IssuedAt                  string       `json:"issued_at"`
	HashAlgorithm             string       `json:"hash_algorithm"`
	PromptRootHashB64u        string       `json:"prompt_root_hash_b64u,omitempty"`
	Calls                     []PromptCall `json:"calls"`
}

// PromptCall maps an llm_call event to the rendered system prompt hash.
type PromptCall struct {
	EventID                      string `json:"event_id"`
	EventHashB64u                string `json:"event_hash_b64u,omitempty"`
	Provider                     string `json:"provider,omitempty"`
	Model                        string `json:"model,omitempty"`
	RenderedSystemPromptHashB64u string `json:"rendered_system_prompt_hash_b64u"`
}
