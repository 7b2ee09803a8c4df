package verify

import (
	"errors"

	"github.com/clawea/attester/schema/poh"
)

// checkGateway names the check of the bundle's gateway receipts against the
// attested gateway record; policyGateway the policy check of
// require_gateway.
const (
	checkGateway  = "gateway-receipts"
	policyGateway = "gateway"
)

// checkGatewayReceipts holds the bundle's gateway receipts to the gateway
// record the attestation commits to (docs/spec/attestation-v1.md section
// 5.7, the rules the attester applied before signing): each is signed by
// the attester and names it as gateway, is bound to an llm_call event of
// this run, one per llm_call, and states the system text that event
// reports; their count and chain in bundle order are the committed ones. A
// receipt moved to another event or run, reordered, dropped, added or
// altered is refused with its reason code.
func (st *state) checkGatewayReceipts(b *poh.Bundle) *Error {
	rec := st.res.Commitments.Gateway
	if rec == nil {
		if len(b.Receipts) > 0 {
			st.skip(checkGateway, "the attestation (%s) commits to no gateway record: the %d receipts are checked by the PoH rules only", st.res.Commitments.Version, len(b.Receipts))
		}
		return nil
	}
	count, chain, err := poh.CheckGatewayReceipts(b, st.res.AttesterDID)
	if err != nil {
		return pohErr(checkGateway, err)
	}
	if count != rec.ReceiptCount || chain != rec.ReceiptChainB64u {
		return rejected(checkGateway, poh.EvidenceMismatch, "the bundle's %d gateway receipts are not the %d of the attested gateway record, in its order", count, rec.ReceiptCount)
	}
	st.pass(checkGateway, "%d receipts signed by the attester, one per llm_call, chain %s", count, chain)
	return nil
}

// checkRequireGateway applies require_gateway: the attestation commits to
// a gateway record, and every llm_call event of the bundle has its
// receipt. It needs the bundle.
func (st *state) checkRequireGateway() *Error {
	if !st.policy.RequireGateway {
		return nil
	}
	rec := st.res.Commitments.Gateway
	if rec == nil {
		return policyErr(policyGateway, "require_gateway", "the attestation (%s) commits to no model gateway record and require_gateway is set", st.res.Commitments.Version)
	}
	if st.bundle == nil {
		return &Error{Class: ErrCannotCheck, Check: checkPolicy + "/" + policyGateway, Code: poh.DependencyNotConfigured,
			Err: errors.New("require_gateway needs the proof bundle, to see that every llm_call has its receipt")}
	}
	calls := 0
	for _, e := range st.bundle.Events {
		if e.EventType == poh.EventTypeLLMCall {
			calls++
		}
	}
	if int64(calls) != rec.ReceiptCount {
		return policyErr(policyGateway, "require_gateway", "%d llm_call events but %d gateway receipts: not every model call went through the attester's gateway", calls, rec.ReceiptCount)
	}
	return nil
}
