package evidencedoc

import (
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/pohjson"
)

// checkAuditHead checks gate_audit_root_b64u against gate_audit_count
// (docs/spec/attestation-v1.md section 5.3): the root of a log without
// records is empty (docs/spec/gate-v1.md section 5.1), so the root is ""
// exactly when the count is 0, and a b64u SHA-256 hash otherwise.
func checkAuditHead(root string, count int64) error {
	return checkChainHead("gate_audit_root_b64u", root, "gate_audit_count", count)
}

// checkChainHead checks a chain head against its count: "" exactly when
// the count is 0, a b64u SHA-256 hash otherwise.
func checkChainHead(rootName, root, countName string, count int64) error {
	if count < 0 || count > pohjson.MaxSafeInteger {
		return fmt.Errorf("%w: %s out of range", ErrMalformed, countName)
	}
	if count == 0 {
		if root != "" {
			return fmt.Errorf("%w: %s must be empty when %s is 0", ErrInconsistent, rootName, countName)
		}
		return nil
	}
	if root == "" {
		return fmt.Errorf("%w: %s is empty but %s is %d", ErrInconsistent, rootName, countName, count)
	}
	return checkHash(rootName, root)
}

// checkGatewayMember requires the gateway record in v4 commitments,
// refuses it in earlier versions, and checks its chain head against its
// count (docs/spec/attestation-v1.md section 5.7).
func checkGatewayMember(c *Commitments) error {
	if err := memberInVersion(c.Version, "gateway", c.Gateway != nil, CommitmentsVersionV4); err != nil || c.Gateway == nil {
		return err
	}
	return checkChainHead("gateway.receipt_chain_b64u", c.Gateway.ReceiptChainB64u, "gateway.receipt_count", c.Gateway.ReceiptCount)
}

// memberInVersion checks that a commitment member is present in the
// version that requires it and absent from every version other than that
// one and those that admit it.
func memberInVersion(version, name string, present bool, required string, admitted ...string) error {
	switch {
	case version == required && !present:
		return fmt.Errorf("%w: %s is required in %s", ErrMalformed, name, required)
	case present && version != required && !slices.Contains(admitted, version):
		return fmt.Errorf("%w: a %s commitment has no %s member", ErrMalformed, version, name)
	}
	return nil
}
