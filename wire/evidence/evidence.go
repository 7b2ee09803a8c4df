// Package evidence is the transportable form of hardware evidence and the
// REPORT_DATA every quote commits to (docs/spec/attestation-v1.md,
// "REPORT_DATA"). Producers (enclave backends) and verifiers (verify/) both
// import it; it imports no producer and no device code.
package evidence

// Platform names, as they appear in Evidence.Platform.
const (
	PlatformSEVSNP = "sev-snp"
	PlatformTDX    = "tdx"
	PlatformTPM    = "tpm"
	// PlatformNVIDIAGPU is an NVIDIA GPU in confidential-computing mode:
	// evidence beside the CPU's, whose requester nonce is
	// ReportData.GPUNonce (docs/spec/attestation-v1.md, "GPU evidence").
	PlatformNVIDIAGPU = "nvidia-gpu"
	// PlatformAzureSNP and PlatformAzureTDX are Azure confidential VMs:
	// an HCL report from the paravisor, signed by the SEV-SNP or TDX
	// hardware, and a vTPM quote by the attestation key it carries
	// (docs/spec/platform-azure.md).
	PlatformAzureSNP = "azure-snp"
	PlatformAzureTDX = "azure-tdx"
)

// Evidence is hardware evidence in a transportable form. Every byte slice is
// the platform's own wire format: nothing here is re-encoded, so a verifier
// can check signatures over exactly these bytes.
type Evidence struct {
	// Platform is one of the Platform constants.
	Platform string `json:"platform"`
	// Simulated is true when the evidence was produced by a simulator or a
	// fake device signed by test roots. A production verifier refuses it.
	Simulated bool `json:"simulated"`
	// Format is a versioned label for Blob's encoding, e.g.
	// "sev-snp/attestation-report" or "tdx/quote-v4" or "tpm2/quote".
	Format string `json:"format"`
	// Blob is the signed platform evidence: the SEV-SNP attestation report,
	// the TDX quote, or the TPM2B_ATTEST contents of a TPM quote.
	Blob []byte `json:"blob"`
	// Signature is a detached signature over Blob where the platform has one
	// (the TPMT_SIGNATURE of a TPM quote); empty otherwise.
	Signature []byte `json:"signature,omitempty"`
	// CertChain holds DER certificates, leaf first: VCEK/VLEK, ASK, ARK for
	// SEV-SNP; the PCK chain for TDX (when not inside the quote); the EK
	// certificate for TPM.
	CertChain [][]byte `json:"cert_chain,omitempty"`
	// Aux holds platform-specific extras under documented names, e.g.
	// "ak_public" (TPMT_PUBLIC), "pcr_values", "event_log", "cert_table".
	Aux map[string][]byte `json:"aux,omitempty"`
}
