//go:build !linux

package sevsnp

import (
	"fmt"

	"github.com/clawea/attester/enclave"
)

// Open reports enclave.ErrNotAvailable: SEV-SNP guests are Linux only.
func Open(opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: sev-snp: guest devices are supported on linux only", enclave.ErrNotAvailable)
}
