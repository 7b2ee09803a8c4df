package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/poh"
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
	root, count, err := audit.VerifyAuditLog(bytes.NewReader(raw))
	if err != nil {
		code := poh.MalformedEnvelope
		var le *audit.LineError
		if errors.As(err, &le) {
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
	recs, err := auditRecords(raw)
	if err != nil {
		return wrapRejected(CheckAuditLog, poh.MalformedEnvelope, err)
	}
	ar := &AuditResult{RootB64u: root, Count: count}
	for _, r := range recs {
		if r.Decision == audit.Allow {
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

// auditRecords decodes the lines of a log that VerifyAuditLog accepted.
func auditRecords(raw []byte) ([]audit.Record, error) {
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("audit record: %v", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// matchToolCalls matches every tool_call event, in chain order, to a
// distinct allow record, in log order, whose params_hash_b64u equals the
// event's payload_hash_b64u. Greedy earliest matching finds a match for
// every event whenever an order-preserving assignment exists.
func matchToolCalls(events []poh.Event, recs []audit.Record) (int, *Error) {
	next, n := 0, 0
	for i, e := range events {
		if e.EventType != eventToolCall {
			continue
		}
		found := false
		for next < len(recs) {
			r := recs[next]
			next++
			if r.Decision == audit.Allow && r.ParamsHash == e.PayloadHashB64u {
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
