package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/wire/evidence"
)

// TestGPUAgainstTheBinary: with attester.gpu simulated the binary's
// attestations carry the fake GPU's evidence beside the simulated CPU's;
// they verify, the EAR has both submods, and require_gpu accepts them and
// refuses the same run attested without a GPU. With attester.gpu required
// on a machine without NVML (or a build without the nvml tag) the attester
// refuses to start: it never attests without the GPU evidence it was told
// to give.
func TestGPUAgainstTheBinary(t *testing.T) {
	pf := newPack(t)
	attestOn := func(gpu string) (att, ev []byte) {
		a, code := startAttester(t, writeConfig(t, t.TempDir(), pf, map[string]any{"gpu": gpu}))
		if a == nil {
			t.Fatalf("gpu %s: attester exited with %d", gpu, code)
		}
		rn := a.createRun(t, pf, "agent:main:main")
		_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
		r := a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, nil))
		if r.code != 200 {
			t.Fatalf("gpu %s: attestation %d %v", gpu, r.code, r.body)
		}
		var out struct {
			Attestation json.RawMessage `json:"attestation"`
			EvidenceJWS string          `json:"evidence_jws"`
		}
		if err := json.Unmarshal(r.raw, &out); err != nil {
			t.Fatal(err)
		}
		return out.Attestation, []byte(out.EvidenceJWS)
	}
	pol := &verify.Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true, RequireGPU: true}
	opts := verify.Options{Now: time.Now}

	att, ev := attestOn("simulated")
	res, err := verify.Verify(att, ev, nil, pol, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evidence) != 2 || res.Evidence[0].Platform != evidence.PlatformSEVSNP || res.Evidence[1].Platform != evidence.PlatformNVIDIAGPU {
		t.Fatalf("evidence %+v", res.Evidence)
	}
	ar, err := earresult.New(res, nil, earresult.Options{Now: time.Now(), Policy: pol})
	if err != nil || ar.Submods[earresult.SubmodName] == nil || ar.Submods[earresult.GPUSubmodName] == nil {
		t.Fatalf("ear: %v %v", err, ar)
	}

	att, ev = attestOn("off")
	_, err = verify.Verify(att, ev, nil, pol, opts)
	var ve *verify.Error
	if !errors.As(err, &ve) || !errors.Is(err, verify.ErrPolicy) || ve.Field != "require_gpu" {
		t.Fatalf("require_gpu without gpu evidence: %v", err)
	}

	a, code := startAttester(t, writeConfig(t, t.TempDir(), pf, map[string]any{"gpu": "required"}))
	if a != nil || code != 2 {
		t.Fatalf("gpu required without nvml: started (exit %d)", code)
	}
}
