package earresult

import (
	"bytes"
	"slices"

	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/b64u"

	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/evidence"
)

// GPUSubmodName is the EAR submodule of the attestation's NVIDIA GPU
// evidence, present when a verified attestation carries some
// (docs/spec/verify-v1.md section 7).
const GPUSubmodName = "clawea-gpu"

// gpuSubmod returns the appraisal of the GPU evidence of a verified
// result under pol, nil when it has none. Its status is affirming only for
// real hardware whose checks all ran; simulated evidence or an unchecked
// revocation is a warning. Its executables claim is approved runtime only
// when pol pins each GPU's whole measurement (measurements_b64u); any
// measurement accepted, or blocks pinned by index alone, is unrecognized
// runtime (a warning).
func gpuSubmod(r *verify.Result, policyID string, pol *verify.Policy) *ear.Appraisal {
	var gpus []interface{}
	warn := false
	pinned := !pol.AllowAnyMeasurement
	for i, e := range r.Evidence {
		if e.Platform != evidence.PlatformNVIDIAGPU {
			continue
		}
		gpus = append(gpus, map[string]interface{}{
			"evidence_index":   i,
			"root_id":          e.RootID,
			"tcb":              e.TCB,
			"measurement_b64u": e.MeasurementB64u,
			"simulated":        e.Simulated,
			"revocation":       string(e.Revocation),
		})
		if e.Simulated || e.Revocation != "checked" {
			warn = true
		}
		if m, err := b64u.Decode(e.MeasurementB64u); err != nil || !slices.ContainsFunc(pol.Measurements, func(p []byte) bool { return bytes.Equal(p, m) }) {
			pinned = false
		}
	}
	if len(gpus) == 0 {
		return nil
	}
	tv := &ear.TrustVector{
		InstanceIdentity: ear.TrustworthyInstanceClaim,
		Hardware:         ear.GenuineHardwareClaim,
		Executables:      ear.ApprovedRuntimeClaim,
		RuntimeOpaque:    ear.EncryptedMemoryRuntimeClaim,
	}
	if !pinned {
		tv.Executables = ear.UnrecognizedRuntimeClaim
	}
	status := ear.TrustTierAffirming
	if warn {
		status = ear.TrustTierWarning
		tv.Hardware = ear.UnsafeHardwareClaim
	}
	if r.Simulated {
		tv.InstanceIdentity = ear.NoClaim
		tv.RuntimeOpaque = ear.NoClaim
	}
	id := policyID
	annot := map[string]interface{}{"verdict": "verified", "gpus": gpus}
	ap := &ear.Appraisal{Status: &status, TrustVector: tv, AppraisalPolicyID: &id}
	ap.VeraisonAnnotatedEvidence = &annot
	ap.UpdateStatusFromTrustVector()
	return ap
}
