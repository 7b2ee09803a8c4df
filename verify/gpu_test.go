package verify

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
)

// attestGPU is attest with a simulated GPU beside the CPU.
func attestGPU(t *testing.T, q measurer, r *run) *fixture {
	t.Helper()
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	log, root, count := r.auditLog(t)
	bundle := r.bundle(t)
	in := attestfixture.Input(t, &r.Run, root, int64(count))
	in.BundleEnvelope = bundle
	out, m := attestfixture.Attest(t, attesterKey(), q, fixedNow, in, g)
	rep, _ := reportJSON(t)
	return &fixture{att: out.AttestationJSON, ev: out.EvidenceJWS, bundle: bundle, audit: log, report: rep, run: r, measurement: m}
}

// TestGPUAttestation: an attestation with CPU (simulated SEV-SNP) and GPU
// (fake NVIDIA, simulated chain) evidence verifies; the GPU measurement is
// judged by the policy; require_gpu refuses an attestation without GPU
// evidence and accepts one with it.
func TestGPUAttestation(t *testing.T) {
	f := attestGPU(t, simSEV(t, sim.Options{}), newRun(t))
	pol := f.simPolicy()
	_, err := Verify(f.att, f.ev, f.bundle, pol, f.opts())
	var pe *Error
	if !errors.As(err, &pe) || pe.Check != "policy/"+platform.CheckMeasurement {
		t.Fatalf("gpu measurement not pinned: %v", err)
	}
	// Pin it by the digest the GPU result reports.
	res, err := Verify(f.att, f.ev, f.bundle, &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true}, f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evidence) != 2 || res.Evidence[1].Platform != evidence.PlatformNVIDIAGPU || !res.Evidence[1].Simulated || res.Evidence[1].RootID != "sim-nvidia-device-identity-ca" {
		t.Fatalf("evidence %+v", res.Evidence)
	}
	gm, err := b64u.Decode(res.Evidence[1].MeasurementB64u)
	if err != nil {
		t.Fatal(err)
	}
	pol.Measurements = append(pol.Measurements, gm)
	pol.RequireGPU = true
	if _, err := Verify(f.att, f.ev, f.bundle, pol, f.opts()); err != nil {
		t.Fatalf("pinned cpu and gpu, require_gpu: %v", err)
	}
	// Pinned by block index instead of the digest: a wrong value refuses.
	byIndex := f.simPolicy()
	byIndex.GPUMeasurements = map[int][]byte{1: res.Platform[1].GPU.Measurements[1]}
	if _, err := Verify(f.att, f.ev, f.bundle, byIndex, f.opts()); err != nil {
		t.Fatalf("pinned by index: %v", err)
	}
	byIndex.GPUMeasurements = map[int][]byte{1: res.Platform[1].GPU.Measurements[2]}
	if _, err := Verify(f.att, f.ev, f.bundle, byIndex, f.opts()); !errors.Is(err, ErrPolicy) {
		t.Fatalf("wrong pinned block: %v", err)
	}

	// Without GPU evidence, require_gpu refuses.
	plain := attest(t, simSEV(t, sim.Options{}), newRun(t))
	req := plain.simPolicy()
	req.RequireGPU = true
	_, err = Verify(plain.att, plain.ev, plain.bundle, req, plain.opts())
	if !errors.As(err, &pe) || !errors.Is(err, ErrPolicy) || pe.Check != "policy/"+policyGPU || pe.Field != "require_gpu" {
		t.Fatalf("require_gpu without gpu evidence: %v", err)
	}
	req.RequireGPU = false
	if _, err := Verify(plain.att, plain.ev, plain.bundle, req, plain.opts()); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestGPUPolicyFile: require_gpu and gpu_measurements_hex parse, encode
// back identically, and malformed values are refused with their path.
func TestGPUPolicyFile(t *testing.T) {
	src := `{"policy_version":"clawea.dev/verify-policy/v1","allow_unchecked_gpu_revocation":true,"require_gpu":true,"gpu_measurements_hex":{"2":"aa01","10":"bb"}}`
	p, err := ParsePolicy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !p.RequireGPU || !p.AllowUncheckedGPURevocation || len(p.GPUMeasurements) != 2 || p.GPUMeasurements[10][0] != 0xbb {
		t.Fatalf("%+v", p)
	}
	enc, err := p.Encode()
	if err != nil || string(enc) != src {
		t.Fatalf("encode: %s %v", enc, err)
	}
	for _, bad := range []string{
		`{"0":"aa"}`, `{"256":"aa"}`, `{"02":"aa"}`, `{"x":"aa"}`, `{"1":"AA"}`, `{"1":""}`, `{"1":"a"}`, `{"1":1}`,
	} {
		if _, err := ParsePolicy([]byte(policyHead + `"gpu_measurements_hex":` + bad + `}`)); !errors.Is(err, ErrPolicyFile) {
			t.Fatalf("%s accepted: %v", bad, err)
		}
	}
}

// TestGPUEvidenceSplicedRefused tries what an attacker holding the
// attester key would: a genuine (simulated-root) GPU report of another run,
// put beside this run's CPU evidence in a document and envelope signed
// with the attester key. The GPU nonce binds the report to its own
// REPORT_DATA, so the attestation is rejected at report-data; without the
// spliced item the same forgery verifies (the refusal is the GPU's).
func TestGPUEvidenceSplicedRefused(t *testing.T) {
	r2 := newRun(t)
	r2.RunID = "run_other"
	other := attestGPU(t, simSEV(t, sim.Options{}), r2)
	doc, err := evidencedoc.Parse(other.ev, attesterKey().Public().(ed25519.PublicKey))
	if err != nil || len(doc.Items) != 2 {
		t.Fatalf("other run's document: %v", err)
	}
	pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true}
	r := newRun(t)
	sev := simSEV(t, sim.Options{})
	spec := forgeRun(t, sev, r)
	att, jws := forge(t, spec)
	if _, err := Verify(att, jws, nil, pol, Options{Now: fixedNow}); err != nil {
		t.Fatalf("control: %v", err)
	}
	spec.extraItems = []evidencedoc.Item{doc.Items[1]}
	att, jws = forge(t, spec)
	_, err = Verify(att, jws, nil, pol, Options{Now: fixedNow})
	wantErr(t, err, ErrRejected, checkReportData, poh.EvidenceMismatch)
	if !errors.Is(err, platform.ErrReportData) {
		t.Fatal(err)
	}
}

// TestGPURevocationRelaxation: allow_unchecked_gpu_revocation accepts the
// GPU chain's unchecked revocation and nothing else: the CPU's revocation
// is still required (the GPU side is in verify/platform's
// TestNVIDIASimulated).
func TestGPURevocationRelaxation(t *testing.T) {
	f := attestGPU(t, simSEV(t, sim.Options{}), newRun(t))
	pol := &Policy{AllowSimulated: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true, AllowUncheckedGPURevocation: true}
	_, err := Verify(f.att, f.ev, nil, pol, Options{Now: fixedNow})
	var ve *Error
	if !errors.As(err, &ve) || !errors.Is(err, ErrCannotCheck) || !strings.Contains(err.Error(), "evidence[0]") {
		t.Fatalf("cpu revocation relaxed by the gpu member: %v", err)
	}
	// The CPU relaxation given on the command line, the GPU's by the policy.
	if _, err := Verify(f.att, f.ev, nil, pol, Options{Now: fixedNow, AllowUncheckedRevocation: true}); err != nil {
		t.Fatal(err)
	}
}
