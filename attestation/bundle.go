package attestation

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidencedoc"
)

// verifyBundle verifies the proof bundle envelope and its binding to the
// run the attester served (whose DID is attesterDID).
func verifyBundle(in *AttestInput, attesterDID string) (*poh.Bundle, error) {
	b, err := poh.VerifyProofBundle(in.BundleEnvelope, poh.BundleOptions{ReceiptSignerDIDs: in.ReceiptSignerDIDs})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	if err := bundleError(poh.CheckBundleRun(b, in.AgentDID, in.RunID)); err != nil {
		return nil, err
	}
	if err := checkPromptCommitments(b, in); err != nil {
		return nil, err
	}
	if err := checkGatewayRecord(b, in.Gateway, attesterDID); err != nil {
		return nil, err
	}
	if in.BundleCheck != nil {
		if err := bundleError(in.BundleCheck(b)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// bundleError marks a *poh.Error as a rejection of the bundle (ErrBundle);
// any other error passes unchanged.
func bundleError(err error) error {
	if _, ok := errors.AsType[*poh.Error](err); ok {
		return fmt.Errorf("%w: %w", ErrBundle, err)
	}
	return err
}

// harnessID is the id of the harness the attestation will name.
func harnessID(h *poh.Harness) string {
	if h == nil {
		return ""
	}
	return h.ID
}

// checkPromptCommitments applies docs/spec/attestation-v1.md section 5.1
// (poh.CheckPromptCommitments) with the values the attester rebuilt.
func checkPromptCommitments(b *poh.Bundle, in *AttestInput) error {
	err := poh.CheckPromptCommitments(b, poh.PromptCommitments{
		RunID:                        in.RunID,
		AgentDID:                     in.AgentDID,
		SystemPromptHashB64u:         in.PromptHashB64u,
		SystemPromptReportHashB64u:   in.ReportHashB64u,
		PromptPackCiphertextHashB64u: in.PackCiphertextHashB64u,
		Provider:                     in.Model.Provider,
		Model:                        in.Model.Model,
		PromptRootHashB64u:           in.PromptRootHashB64u,
		PromptCommittedEventHashB64u: in.PromptCommittedEventHashB64u,
		HarnessID:                    harnessID(in.Harness),
	})
	return bundleError(err)
}

// checkGatewayRecord applies docs/spec/attestation-v1.md section 5.7 when
// the run has a gateway record: the bundle's receipts follow the gateway
// receipt rules (poh.CheckGatewayReceipts) and are exactly the record's,
// in its order. A receipt the record does not hold, one it holds that the
// bundle lacks, and a reordered one all change the count or the chain.
func checkGatewayRecord(b *poh.Bundle, rec *evidencedoc.GatewayRecord, attesterDID string) error {
	if rec == nil {
		return nil
	}
	count, chain, err := poh.CheckGatewayReceipts(b, attesterDID)
	if err != nil {
		return bundleError(err)
	}
	if count != rec.ReceiptCount || chain != rec.ReceiptChainB64u {
		return bundleError(&poh.Error{Code: poh.EvidenceMismatch, Field: "payload.receipts",
			Msg: fmt.Sprintf("the bundle's %d gateway receipts are not the %d of the run's gateway record, in its order", count, rec.ReceiptCount)})
	}
	return nil
}

// commitmentsVersion is the clawea_version the issuer writes: v4 when it
// has a gateway record to commit to, v3 when it has isolation claims, v2
// otherwise.
func commitmentsVersion(in *AttestInput) string {
	if in.Gateway != nil {
		return evidencedoc.CommitmentsVersionV4
	}
	if in.Isolation != nil {
		return evidencedoc.CommitmentsVersionV3
	}
	return evidencedoc.CommitmentsVersionV2
}
