//go:build windows

package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/enclave"
)

// openDevice is not supported on Windows: use Options.Address.
func openDevice(path string) (transport.TPMCloser, error) {
	return nil, fmt.Errorf("%w: tpm device %s on windows", enclave.ErrNotAvailable, path)
}
