package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// identityBindingLabel is the domain-separation label for bytes 32..63 of
// REPORT_DATA (docs/spec/attestation-v1.md, "REPORT_DATA").
const identityBindingLabel = "clawea.dev/attester/v1/report-data/identity"

// maxEvidenceContext bounds the evidence context bound into REPORT_DATA.
const maxEvidenceContext = 64 << 10

// ReportData is the 64 bytes a platform quote commits to. It can only be built
// by NewReportData, so callers never pass raw report data to a Quoter.
type ReportData struct {
	b [64]byte
}

// NewReportData builds REPORT_DATA for a quote:
//
//	bytes  0..31  nonceBinding: the raw 32-byte PoH TEE nonce binding digest
//	bytes 32..63  SHA-256(label || 0x00 || u16be(len(pub)) || pub || u32be(len(ctx)) || ctx)
//
// where label is identityBindingLabel, pub the attester's Ed25519 identity key
// and ctx the evidence context (docs/spec/attestation-v1.md: for a key
// attestation it carries the X25519 pack-recipient key).
func NewReportData(nonceBinding [32]byte, identity ed25519.PublicKey, evidenceContext []byte) (ReportData, error) {
	if len(identity) != ed25519.PublicKeySize {
		return ReportData{}, fmt.Errorf("evidence: identity key is %d bytes, want %d", len(identity), ed25519.PublicKeySize)
	}
	if len(evidenceContext) > maxEvidenceContext {
		return ReportData{}, fmt.Errorf("evidence: evidence context is %d bytes, limit %d", len(evidenceContext), maxEvidenceContext)
	}
	var rd ReportData
	copy(rd.b[:32], nonceBinding[:])
	id := identityBinding(identity, evidenceContext)
	copy(rd.b[32:], id[:])
	return rd, nil
}

// identityBinding computes bytes 32..63 of REPORT_DATA (NewReportData uses
// it; verifiers recompute the whole value through NewReportData).
func identityBinding(identity ed25519.PublicKey, evidenceContext []byte) [32]byte {
	pre := append([]byte(identityBindingLabel), 0)
	pre = append(binary.BigEndian.AppendUint16(pre, uint16(len(identity))), identity...)
	pre = append(binary.BigEndian.AppendUint32(pre, uint32(len(evidenceContext))), evidenceContext...)
	return sha256.Sum256(pre)
}

// Bytes returns a copy of the 64 bytes.
func (rd ReportData) Bytes() [64]byte { return rd.b }

// QualifyingData returns the 32-byte TPM qualifying data: SHA-256 of the 64
// bytes of REPORT_DATA.
func (rd ReportData) QualifyingData() [32]byte { return sha256.Sum256(rd.b[:]) }

// gpuNonceLabel domain-separates the GPU nonce.
const gpuNonceLabel = "clawea.dev/attester/v1/gpu-nonce"

// GPUNonce returns the 32-byte nonce a GPU attestation report carries for
// this REPORT_DATA: SHA-256(gpuNonceLabel || 0x00 || the 64 bytes). A GPU
// has no REPORT_DATA of its own; its SPDM requester nonce binds it to the
// same run and attester key as the CPU evidence.
func (rd ReportData) GPUNonce() [32]byte {
	h := sha256.New()
	h.Write([]byte(gpuNonceLabel))
	h.Write([]byte{0})
	h.Write(rd.b[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// IsZero reports whether rd was never built by NewReportData.
func (rd ReportData) IsZero() bool { return rd == ReportData{} }

// ErrZeroReportData is returned by backends given a zero ReportData.
var ErrZeroReportData = errors.New("evidence: report data was not built with NewReportData")
