package auditrec

import (
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// The tool-call rule (docs/spec/attestation-v1.md section 5.5,
// docs/spec/verify-v1.md section 6): the attester applies it to the run's
// own audit records before it signs, and a verifier applies it to the
// attested log, so both read the same rule from here.

// ToolCallEventType is the PoH event type of a tool call the harness ran.
const ToolCallEventType = "tool_call"

// ToolCallsMember is the bundle metadata member that carries the payload of
// each tool_call event (binding "call"; docs/spec/openclaw-plugin.md).
const ToolCallsMember = "clawea_tool_calls"

// ToolCallVersion is the tool_call_version of a clawea_tool_calls element.
const ToolCallVersion = "1"

// The tool-call bindings MatchToolCalls reports.
const (
	// BindingParams: no metadata.clawea_tool_calls; a tool_call event's
	// payload_hash_b64u is the allowed decision's params_hash_b64u. The
	// tool, the turn and the audit seq are not bound.
	BindingParams = "params"
	// BindingCall: metadata.clawea_tool_calls carries each event's payload,
	// which names the decision's audit seq, turn, tool and params hash.
	BindingCall = "call"
)

// toolCallKeys are the members of a clawea_tool_calls element, in order.
var toolCallKeys = [...]string{"tool_call_version", "audit_seq", "turn_id", "tool", "params_hash_b64u"}

// ToolCallMatch is what MatchToolCalls established.
type ToolCallMatch struct {
	// Matched is the number of tool_call events, each matched to its
	// allowed decision (equal to the number of allow records).
	Matched int
	// Binding is BindingParams or BindingCall.
	Binding string
}

// toolCall is one tool_call event as the rule sees it: its index in the
// chain and, for BindingCall, its decoded payload.
type toolCall struct {
	index   int
	payload string // payload_hash_b64u
	call    *callPayload
}

// callPayload is a checked clawea_tool_calls element.
type callPayload struct {
	seq                    uint64
	turn, tool, paramsHash string
}

// MatchToolCalls applies the tool-call rule to a verified bundle and the
// records of the run's verified audit log, in log order: the bundle's
// tool_call events, in chain order, correspond one to one and in order to
// the log's allow records. The i-th event matches the i-th allow record
// when, without metadata.clawea_tool_calls, its payload_hash_b64u is the
// record's params_hash_b64u, and, with it, when its payload (the i-th
// element, whose JSON.stringify hash is the event's payload_hash_b64u)
// names the record's seq, turn, tool and params_hash_b64u.
//
// The error is a *poh.Error: EVIDENCE_MISMATCH, with a message that names
// the event and the decision, for calls out of order (an event that matches
// a later allow record than its own), an event without its allow record (an
// extra call, or one of another run or turn), an allow record without its
// event (a missing call), or another mismatch; both chains are intact, so
// this is not a HASH_CHAIN_BREAK. A clawea_tool_calls element that is not
// the event's payload is HASH_MISMATCH; its form, checkCallPayload's codes.
func MatchToolCalls(b *poh.Bundle, recs []Record) (ToolCallMatch, error) {
	calls, binding, err := toolCalls(b)
	if err != nil {
		return ToolCallMatch{}, err
	}
	var allows []*Record
	for i := range recs {
		if recs[i].Decision == Allow {
			allows = append(allows, &recs[i])
		}
	}
	counts := fmt.Sprintf("the bundle has %d tool_call events, the audit log %d allow decisions", len(calls), len(allows))
	for i, c := range calls {
		f := fmt.Sprintf("payload.event_chain[%d]", c.index)
		if i >= len(allows) {
			return ToolCallMatch{}, &poh.Error{Code: poh.EvidenceMismatch, Field: f, Msg: "tool_call without an allow decision: " + counts}
		}
		if c.matches(allows[i]) {
			continue
		}
		if len(calls) == len(allows) {
			for _, later := range allows[i+1:] {
				if c.matches(later) {
					return ToolCallMatch{}, &poh.Error{Code: poh.EvidenceMismatch, Field: f,
						Msg: fmt.Sprintf("tool_call out of order: it matches the allow decision of audit seq %d, but the allow decision of audit seq %d comes first", later.Seq, allows[i].Seq)}
				}
			}
		}
		return ToolCallMatch{}, &poh.Error{Code: poh.EvidenceMismatch, Field: f,
			Msg: fmt.Sprintf("tool_call does not match the allow decision of audit seq %d (tool %q): %s; %s", allows[i].Seq, allows[i].Tool, c.mismatch(allows[i]), counts)}
	}
	if len(calls) < len(allows) {
		r := allows[len(calls)]
		return ToolCallMatch{}, &poh.Error{Code: poh.EvidenceMismatch, Field: "payload.event_chain",
			Msg: fmt.Sprintf("the allow decision of audit seq %d (tool %q) has no tool_call event: %s", r.Seq, r.Tool, counts)}
	}
	return ToolCallMatch{Matched: len(calls), Binding: binding}, nil
}

func (c *toolCall) matches(r *Record) bool {
	if c.call == nil {
		return c.payload == r.ParamsHash
	}
	return c.call.seq == r.Seq && c.call.turn == r.Turn && c.call.tool == r.Tool && c.call.paramsHash == r.ParamsHash
}

// mismatch names what differs between c and r (c does not match r).
func (c *toolCall) mismatch(r *Record) string {
	if c.call == nil {
		return "another params hash"
	}
	switch {
	case c.call.seq != r.Seq:
		return fmt.Sprintf("it names audit seq %d", c.call.seq)
	case c.call.turn != r.Turn:
		return "it names another turn"
	case c.call.tool != r.Tool:
		return "it names another tool"
	}
	return "another params hash"
}

// toolCalls lists the bundle's tool_call events in chain order with their
// payloads when the bundle carries metadata.clawea_tool_calls.
func toolCalls(b *poh.Bundle) ([]toolCall, string, error) {
	var calls []toolCall
	for i, e := range b.Events {
		if e.EventType == ToolCallEventType {
			calls = append(calls, toolCall{index: i, payload: e.PayloadHashB64u})
		}
	}
	var pv *pohjson.Value
	if b.Metadata != nil {
		pv = b.Metadata.Get(ToolCallsMember)
	}
	if pv == nil {
		return calls, BindingParams, nil
	}
	lf := "payload.metadata." + ToolCallsMember
	if pv.Kind() != pohjson.Array {
		return nil, "", &poh.Error{Code: poh.SchemaValidationFailed, Field: lf, Msg: "must be an array"}
	}
	elems := pv.Elems()
	if len(elems) != len(calls) {
		return nil, "", &poh.Error{Code: poh.EvidenceMismatch, Field: lf,
			Msg: fmt.Sprintf("has %d elements for %d tool_call events", len(elems), len(calls))}
	}
	for n := range calls {
		f := fmt.Sprintf("%s[%d]", lf, n)
		cp, err := checkCallPayload(elems[n], f)
		if err != nil {
			return nil, "", err
		}
		h, herr := pohjson.Hash(elems[n])
		if herr != nil {
			return nil, "", &poh.Error{Code: poh.MalformedEnvelope, Field: f, Msg: "cannot be serialized"}
		}
		if h != calls[n].payload {
			return nil, "", &poh.Error{Code: poh.HashMismatch, Field: f,
				Msg: fmt.Sprintf("is not the payload of tool_call event payload.event_chain[%d]", calls[n].index)}
		}
		calls[n].call = cp
	}
	return calls, BindingCall, nil
}

// checkCallPayload reads one clawea_tool_calls element: exactly the members
// of toolCallKeys, in that order (a missing one MISSING_REQUIRED_FIELD;
// another member, order, type, version or hash form
// SCHEMA_VALIDATION_FAILED).
func checkCallPayload(v *pohjson.Value, f string) (*callPayload, error) {
	bad := func(format string, args ...any) error {
		return &poh.Error{Code: poh.SchemaValidationFailed, Field: f, Msg: fmt.Sprintf(format, args...)}
	}
	if v.Kind() != pohjson.Object {
		return nil, bad("must be an object")
	}
	ms := v.Members()
	for _, k := range toolCallKeys {
		if !v.Has(k) {
			return nil, &poh.Error{Code: poh.MissingRequiredField, Field: f + "." + k, Msg: "required"}
		}
	}
	if len(ms) != len(toolCallKeys) {
		return nil, bad("must have exactly the members %v", toolCallKeys)
	}
	for i, m := range ms {
		if m.Key != toolCallKeys[i] {
			return nil, bad("members must be %v, in that order", toolCallKeys)
		}
	}
	cp := &callPayload{}
	ver, ok1 := v.Get("tool_call_version").Str()
	seq, ok2 := v.Get("audit_seq").Int()
	turn, ok3 := v.Get("turn_id").Str()
	tool, ok4 := v.Get("tool").Str()
	ph, ok5 := v.Get("params_hash_b64u").Str()
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil, bad("tool_call_version, turn_id, tool and params_hash_b64u are strings, audit_seq an integer")
	}
	if ver != ToolCallVersion {
		return nil, bad("tool_call_version must be %q", ToolCallVersion)
	}
	if seq < 1 || seq > maxSeq {
		return nil, bad("audit_seq must be 1..%d", int64(maxSeq))
	}
	if len(turn) > MaxFieldBytes || len(tool) > MaxFieldBytes {
		return nil, bad("turn_id and tool are at most %d bytes", MaxFieldBytes)
	}
	if _, err := b64u.DecodeHash(ph); err != nil {
		return nil, bad("params_hash_b64u must be a b64u SHA-256 hash")
	}
	cp.seq, cp.turn, cp.tool, cp.paramsHash = uint64(seq), turn, tool, ph
	return cp, nil
}
