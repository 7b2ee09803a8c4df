package enclave

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/wire/tpmquote"
)

// errEventLogTooBig reports an event log over tpmquote.MaxEventLogSize.
var errEventLogTooBig = errors.New("enclave: event log too large")

// ReadEventLog reads the platform's event log at path (the TPM event log,
// or the TDX CC event log of the ACPI CCEL table) for the evidence's
// tpmquote.AuxEventLog. The event log is optional evidence: ReadEventLog
// returns nil when path is empty or the file is absent, unreadable (no
// such table, not root) or empty, and an error only for a log over
// tpmquote.MaxEventLogSize.
func ReadEventLog(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := bounded.ReadFile(path, tpmquote.MaxEventLogSize)
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", errEventLogTooBig, path, tpmquote.MaxEventLogSize)
	}
	if err != nil || len(b) == 0 {
		return nil, nil
	}
	return b, nil
}
