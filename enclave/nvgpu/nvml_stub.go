//go:build !nvml

package nvgpu

import (
	"fmt"

	"github.com/clawea/attester/enclave"
)

// OpenNVML is unavailable in builds without the nvml tag: they link no
// NVML binding.
func OpenNVML() ([]*GPU, error) {
	return nil, fmt.Errorf("%w: nvidia gpu (this build has no nvml support; build with -tags nvml)", enclave.ErrNotAvailable)
}
