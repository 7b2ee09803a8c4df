//go:build !windows

package tpm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"

	"github.com/clawea/attester/enclave"
)

// openDevice opens a TPM character device (normally the kernel resource
// manager, /dev/tpmrm0).
func openDevice(path string) (transport.TPMCloser, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", enclave.ErrNotAvailable, path)
	}
	tp, err := linuxtpm.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tpm: open %s: %w", path, err)
	}
	return tp, nil
}
