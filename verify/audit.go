package verify

import (
	"bytes"
	"errors"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/auditrec"
)

// checkAudit verifies the gate audit log (when supplied): its hash chain,
// its root and count against the attested ones, and, when a bundle was
// verified, that every tool_call event is matched by an allow decision
// (docs/spec/verify-v1.md section 6).
func (st *state) checkAudit() *Error {
	raw := st.opts.AuditLog
	if raw == nil {
		st.skip(CheckAuditLog, "no audit log supplied")
		st.skip(CheckToolCalls, "no audit log supplied")
		st.warn("gate audit log not supplied: the gate decisions were not checked")
		return nil
	}
	var recs []auditrec.Record
	root, count, err := auditrec.Read(bytes.NewReader(raw), func(r auditrec.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		code := poh.MalformedEnvelope
		if le, ok := errors.AsType[*auditrec.LineError](err); ok {
			code = poh.Code(le.Code())
		}
		return wrapRejected(CheckAuditLog, code, err)
	}
	c := &st.res.Commitments
	if count != uint64(c.GateAuditCount) {
		return rejected(CheckAuditLog, poh.EvidenceMismatch, "the log has %d records, the attestation commits to %d", count, c.GateAuditCount)
	}
	if root != c.GateAuditRootB64u {
		return rejected(CheckAuditLog, poh.EvidenceMismatch, "the log's root is not the attested gate_audit_root_b64u")
	}
	ar := &AuditResult{RootB64u: root, Count: count}
	for _, r := range recs {
		if r.Decision == auditrec.Allow {
			ar.Allowed++
		} else {
			ar.Denied++
		}
	}
	st.res.Audit = ar
	st.pass(CheckAuditLog, "%d records (%d allow, %d deny), root and count as attested", count, ar.Allowed, ar.Denied)

	if st.bundle == nil {
		st.skip(CheckToolCalls, "no proof bundle supplied")
		st.warn("tool calls were not matched against the audit log (no proof bundle)")
		return nil
	}
	n, e := matchToolCalls(st.bundle.Events, recs)
	if e != nil {
		return e
	}
	ar.ToolCallsMatched, ar.ToolCallsChecked = n, true
	st.pass(CheckToolCalls, "%d tool_call event(s) matched by allow decisions", n)
	return nil
}

// matchToolCalls matches every tool_call event, in chain order, to a
// distinct allow record, in log order, whose params_hash_b64u equals the
// event's payload_hash_b64u. Greedy earliest matching finds a match for
// every event whenever an order-preserving assignment exists.
func matchToolCalls(events []poh.Event, recs []auditrec.Record) (int, *Error) {
	next, n := 0, 0
	for i, e := range events {
		if e.EventType != eventToolCall {
			continue
		}
		found := false
		for next < len(recs) {
			r := recs[next]
			next++
			if r.Decision == auditrec.Allow && r.ParamsHash == e.PayloadHashB64u {
				found = true
				break
			}
		}
		if !found {
			return n, rejected(CheckToolCalls, poh.EvidenceMismatch,
				"payload.event_chain[%d] (tool_call) has no matching allow decision in the audit log", i)
		}
		n++
	}
	return n, nil
}
