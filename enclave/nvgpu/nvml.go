//go:build nvml

package nvgpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlDevice is a GPU reached through NVML (libnvidia-ml, loaded at run
// time by go-nvml).
type nvmlDevice struct {
	d nvml.Device
}

// OpenNVML initialises NVML (left initialised for the life of the process)
// and returns one GPU per device. It fails when NVML cannot be loaded, when
// there is no GPU, and when the system's confidential-computing feature is
// off: CC-off GPUs never yield evidence.
func OpenNVML() ([]*GPU, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvgpu: nvml init: %v", ret)
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvgpu: nvml device count: %v", ret)
	}
	if n == 0 {
		return nil, fmt.Errorf("nvgpu: nvml reports no gpu")
	}
	var gpus []*GPU
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvgpu: gpu %d: %v", i, ret)
		}
		g, err := newGPU(&nvmlDevice{d: d}, false)
		if err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// ccEnabled reads the system's confidential-computing state (NVML reports
// it for the whole system, not per GPU): on means the feature enabled, in
// the production environment, with devtools (debug) mode off.
func (n *nvmlDevice) ccEnabled() (bool, error) {
	st, ret := nvml.SystemGetConfComputeState()
	if ret != nvml.SUCCESS {
		return false, fmt.Errorf("nvml: %v", ret)
	}
	return ccOn(st), nil
}

func ccOn(st nvml.ConfComputeSystemState) bool {
	return st.CcFeature == nvml.CC_SYSTEM_FEATURE_ENABLED && st.Environment == nvml.CC_SYSTEM_ENVIRONMENT_PROD &&
		st.DevToolsMode == nvml.CC_SYSTEM_DEVTOOLS_MODE_OFF
}

// attest asks the GPU for its attestation report over nonce and its
// attestation certificate chain.
func (n *nvmlDevice) attest(nonce [32]byte) ([]byte, []byte, error) {
	var r nvml.ConfComputeGpuAttestationReport
	copy(r.Nonce[:], nonce[:])
	if ret := nvml.DeviceGetConfComputeGpuAttestationReport(n.d, &r); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("nvml attestation report: %v", ret)
	}
	if int(r.AttestationReportSize) > len(r.AttestationReport) {
		return nil, nil, fmt.Errorf("nvml attestation report size %d out of range", r.AttestationReportSize)
	}
	c, ret := nvml.DeviceGetConfComputeGpuCertificate(n.d)
	if ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("nvml certificate: %v", ret)
	}
	if int(c.AttestationCertChainSize) > len(c.AttestationCertChain) {
		return nil, nil, fmt.Errorf("nvml certificate chain size %d out of range", c.AttestationCertChainSize)
	}
	report := append([]byte(nil), r.AttestationReport[:r.AttestationReportSize]...)
	chain := append([]byte(nil), c.AttestationCertChain[:c.AttestationCertChainSize]...)
	return report, chain, nil
}
