package control

import (
	"fmt"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/wire/evidencedoc"
)

// signReceipt signs the gateway_receipt of a model call of rn with the
// attester's DID key and appends it to the run's gateway record, which the
// run's execution attestation commits to (docs/spec/attestation-v1.md
// section 5.7). It is the model gateway's receipt step.
func (s *Service) signReceipt(rn *Run, c gateway.Call) ([]byte, error) {
	if c.RunID != rn.id {
		return nil, fmt.Errorf("control: a receipt for run %q is not one of run %q", c.RunID, rn.id)
	}
	env, err := gateway.SignReceipt(c, s.id)
	if err != nil {
		return nil, err
	}
	if err := rn.receipts.Append(env); err != nil {
		return nil, err
	}
	return env, nil
}

// gatewayRecord is what the execution attestation commits to of the run's
// gateway record: nil when the gateway receipted none of its calls (the
// commitments then keep their version without a gateway member), else the
// count and chain head.
func (r *Run) gatewayRecord() *evidencedoc.GatewayRecord {
	n, chain := r.receipts.Summary()
	if n == 0 {
		return nil
	}
	return &evidencedoc.GatewayRecord{ReceiptCount: n, ReceiptChainB64u: chain}
}
