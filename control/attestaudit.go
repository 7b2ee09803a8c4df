package control

import (
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/auditrec"
)

// runAudit reads the run's durable audit records as one snapshot, verified
// as a verifier reads them: the records the attestation checks the bundle
// against are exactly those its root and count commit to. A run without
// decisions has no records, root "" and count 0.
func (s *Service) runAudit(rn *Run) ([]auditrec.Record, string, int64, error) {
	snap, err := s.gate.audit.Snapshot(rn.id)
	if err != nil {
		return nil, "", 0, refusal(kindInternal, "cannot read the audit log", err)
	}
	root, count := snap.Root, snap.Count
	recs, err := snap.Records()
	if err != nil {
		return nil, "", 0, refusal(kindInternal, "cannot read the audit log", err)
	}
	return recs, root, int64(count), nil
}

// toolCallCheck is the attester's check of a verified bundle against the
// run's audit records (auditrec.MatchToolCalls, docs/spec/attestation-v1.md
// section 5.5): its tool_call events and the allow decisions correspond one
// to one, in order.
func toolCallCheck(recs []auditrec.Record) func(*poh.Bundle) error {
	return func(b *poh.Bundle) error {
		_, err := auditrec.MatchToolCalls(b, recs)
		return err
	}
}
