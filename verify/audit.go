package verify

import (
	"bytes"
	"errors"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/auditrec"
)

// checkAudit verifies the gate audit log (when supplied): its hash chain,
// its root and count against the attested ones, and, when a bundle was
// verified, that its tool_call events and the allow decisions correspond
// one to one, in order (auditrec.MatchToolCalls, docs/spec/verify-v1.md
// section 6).
func (st *state) checkAudit() *Error {
	raw := st.opts.AuditLog
	if raw == nil {
		st.skip(checkAuditLog, "no audit log supplied")
		st.skip(checkToolCalls, "no audit log supplied")
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
		return wrapRejected(checkAuditLog, code, err)
	}
	c := &st.res.Commitments
	if count != uint64(c.GateAuditCount) {
		return rejected(checkAuditLog, poh.EvidenceMismatch, "the log has %d records, the attestation commits to %d", count, c.GateAuditCount)
	}
	if root != c.GateAuditRootB64u {
		return rejected(checkAuditLog, poh.EvidenceMismatch, "the log's root is not the attested gate_audit_root_b64u")
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
	st.pass(checkAuditLog, "%d records (%d allow, %d deny), root and count as attested", count, ar.Allowed, ar.Denied)

	if st.bundle == nil {
		st.skip(checkToolCalls, "no proof bundle supplied")
		st.warn("tool calls were not matched against the audit log (no proof bundle)")
		return nil
	}
	m, err := auditrec.MatchToolCalls(st.bundle, recs)
	if err != nil {
		code := poh.EvidenceMismatch
		if pe, ok := errors.AsType[*poh.Error](err); ok {
			code = pe.Code
		}
		return wrapRejected(checkToolCalls, code, err)
	}
	ar.ToolCallsMatched, ar.ToolCallsChecked, ar.ToolCallBinding = m.Matched, true, m.Binding
	st.pass(checkToolCalls, "%d tool_call event(s) matched one to one, in order, to the %d allow decision(s) (binding %q)", m.Matched, ar.Allowed, m.Binding)
	if m.Binding == auditrec.BindingParams && m.Matched > 0 {
		st.warn("tool_call events are bound to their allow decisions by parameter hash only: the tool, the turn and the audit seq are not bound (the bundle carries no metadata.clawea_tool_calls)")
	}
	return nil
}
