package control

import (
	"fmt"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidencedoc"
)

// gatewayRecord is what the execution attestation commits to of the run's
// gateway record: nil when the gateway receipted none of its calls (the
// commitments then keep their version without a gateway member), else the
// count and chain head.
func (r *Run) gatewayRecord() *evidencedoc.GatewayRecord {
	n, chain := r.receipts.summary()
	if n == 0 {
		return nil
	}
	return &evidencedoc.GatewayRecord{ReceiptCount: n, ReceiptChainB64u: chain}
}

// gatewayCheck is check followed, when the run's admission policy requires
// the model gateway (admission-policy-v1.md section 7.1), by the rule that
// every llm_call event of the bundle has its receipt in the run's record.
// The issuer has already held the bundle's receipts to the record
// (attestation-v1.md section 5.7), so equal counts mean one receipt per
// llm_call.
func (r *Run) gatewayCheck(check func(*poh.Bundle) error) func(*poh.Bundle) error {
	if !r.requireGateway {
		return check
	}
	n, _ := r.receipts.summary()
	return func(b *poh.Bundle) error {
		if err := check(b); err != nil {
			return err
		}
		calls := 0
		for _, e := range b.Events {
			if e.EventType == poh.EventTypeLLMCall {
				calls++
			}
		}
		if int64(calls) != n {
			return &poh.Error{Code: poh.MissingRequiredField, Field: "payload.receipts",
				Msg: fmt.Sprintf("the admission policy requires the model gateway: %d llm_call events, %d receipted by the gateway", calls, n)}
		}
		return nil
	}
}
