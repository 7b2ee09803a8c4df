package evidencedoc

import (
	"fmt"

	"github.com/clawea/attester/schema/pohjson"
)

// checkAuditHead checks gate_audit_root_b64u against gate_audit_count
// (docs/spec/attestation-v1.md section 5.3): the root of a log without
// records is empty (docs/spec/gate-v1.md section 5.1), so the root is ""
// exactly when the count is 0, and a b64u SHA-256 hash otherwise.
func checkAuditHead(root string, count int64) error {
	if count < 0 || count > pohjson.MaxSafeInteger {
		return fmt.Errorf("%w: gate_audit_count out of range", ErrMalformed)
	}
	if count == 0 {
		if root != "" {
			return fmt.Errorf("%w: gate_audit_root_b64u must be empty when gate_audit_count is 0", ErrInconsistent)
		}
		return nil
	}
	if root == "" {
		return fmt.Errorf("%w: gate_audit_root_b64u is empty but gate_audit_count is %d", ErrInconsistent, count)
	}
	return checkHash("gate_audit_root_b64u", root)
}
