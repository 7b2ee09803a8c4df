package verify

import (
	"encoding/hex"
	"maps"
	"slices"
	"strconv"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
)

// policyGPU is the policy check of require_gpu.
const policyGPU = "gpu"

// maxGPUMeasurementBytes bounds a pinned GPU measurement value.
const maxGPUMeasurementBytes = 64

// readGPU reads gpu_measurements_hex: block index (decimal, 1..255, no
// leading zero) to lowercase hex of 1..64 bytes.
func (doc *policyDoc) readGPU(d *confdoc.Decoder, p *Policy) {
	if len(doc.GPUMeasurements) == 0 {
		return
	}
	p.GPUMeasurements = map[int][]byte{}
	for _, k := range slices.Sorted(maps.Keys(doc.GPUMeasurements)) {
		path := jsonobj.Key("$.gpu_measurements_hex", k)
		i, err := strconv.Atoi(k)
		if err != nil || i < 1 || i > 255 || strconv.Itoa(i) != k {
			d.Fail(path, jsonobj.ErrWrongType, "a gpu measurement index is a decimal number 1..255")
			continue
		}
		v := doc.GPUMeasurements[k]
		b, err := hex.DecodeString(v)
		if err != nil || !isLowerHex(v) || len(b) == 0 || len(b) > maxGPUMeasurementBytes {
			d.Fail(path, jsonobj.ErrWrongType, "want 1 to 64 bytes of lowercase hex")
			continue
		}
		p.GPUMeasurements[i] = b
	}
}

// encodeGPU returns the policy file members allow_unchecked_gpu_revocation,
// require_gpu and gpu_measurements_hex (indices in numeric order).
func (p *Policy) encodeGPU() []pohjson.Member {
	var ms []pohjson.Member
	if p.AllowUncheckedGPURevocation {
		ms = append(ms, pohjson.M("allow_unchecked_gpu_revocation", pohjson.NewBool(true)))
	}
	if p.RequireGPU {
		ms = append(ms, pohjson.M("require_gpu", pohjson.NewBool(true)))
	}
	if len(p.GPUMeasurements) > 0 {
		var gm []pohjson.Member
		for _, i := range slices.Sorted(maps.Keys(p.GPUMeasurements)) {
			gm = append(gm, pohjson.M(strconv.Itoa(i), pohjson.NewString(hex.EncodeToString(p.GPUMeasurements[i]))))
		}
		ms = append(ms, pohjson.M("gpu_measurements_hex", pohjson.NewObject(gm...)))
	}
	return ms
}

// checkRequireGPU refuses, under require_gpu, an attestation whose
// verified evidence has no NVIDIA GPU item.
func checkRequireGPU(p *Policy, r *Result) *Error {
	if !p.RequireGPU {
		return nil
	}
	for _, pr := range r.Platform {
		if pr.Platform == evidence.PlatformNVIDIAGPU {
			return nil
		}
	}
	return policyErr(policyGPU, "require_gpu", "the attestation carries no nvidia gpu evidence and require_gpu is set")
}
