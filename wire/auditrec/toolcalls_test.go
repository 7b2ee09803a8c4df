package auditrec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/auditrec"
)

func th(s string) string { return b64u.SHA256([]byte(s)) }

// decision is one audit record of the rule's tests.
type decision struct {
	turn, tool, params string
	allow              bool
}

func records(ds ...decision) []auditrec.Record {
	var out []auditrec.Record
	for i, d := range ds {
		r := auditrec.Record{Seq: uint64(i + 1), Turn: d.turn, Tool: d.tool, ParamsHash: th(d.params), Decision: auditrec.Deny}
		if d.allow {
			r.Decision = auditrec.Allow
		}
		out = append(out, r)
	}
	return out
}

// callPayload is the clawea_tool_calls element of a call (binding "call").
func callPayload(seq int64, turn, tool, params string) *pohjson.Value {
	return pohjson.NewObject(
		pohjson.M("tool_call_version", pohjson.NewString(auditrec.ToolCallVersion)),
		pohjson.M("audit_seq", pohjson.NewInt(seq)),
		pohjson.M("turn_id", pohjson.NewString(turn)),
		pohjson.M("tool", pohjson.NewString(tool)),
		pohjson.M("params_hash_b64u", pohjson.NewString(th(params))),
	)
}

// paramsBundle is a bundle whose tool_call events carry the params hashes
// of params, in order, between llm_call events (binding "params").
func paramsBundle(params ...string) *poh.Bundle {
	b := &poh.Bundle{Events: []poh.Event{{EventHeader: poh.EventHeader{EventType: poh.PromptCommittedEventType}}}}
	for _, p := range params {
		b.Events = append(b.Events,
			poh.Event{EventHeader: poh.EventHeader{EventType: poh.EventTypeLLMCall, PayloadHashB64u: th("llm")}},
			poh.Event{EventHeader: poh.EventHeader{EventType: auditrec.ToolCallEventType, PayloadHashB64u: th(p)}})
	}
	return b
}

// callBundle is a bundle whose tool_call events carry the given payloads
// in metadata.clawea_tool_calls (binding "call").
// calls builds a bundle of the given tool call payloads, for a table.
func calls(payloads ...*pohjson.Value) func(*testing.T) *poh.Bundle {
	return func(t *testing.T) *poh.Bundle { return callBundle(t, payloads...) }
}

func callBundle(t *testing.T, payloads ...*pohjson.Value) *poh.Bundle {
	t.Helper()
	b := &poh.Bundle{Events: []poh.Event{{EventHeader: poh.EventHeader{EventType: poh.PromptCommittedEventType}}}}
	for _, p := range payloads {
		h, err := pohjson.Hash(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Events = append(b.Events, poh.Event{EventHeader: poh.EventHeader{EventType: auditrec.ToolCallEventType, PayloadHashB64u: h}})
	}
	b.Metadata = pohjson.NewObject(pohjson.M(auditrec.ToolCallsMember, pohjson.NewArray(payloads...)))
	return b
}

// log is a run's audit log: two allowed calls around a denied one, in two
// turns.
var log = records(
	decision{"t1", "exec", `{"cmd":"ls"}`, true},
	decision{"t1", "exec", `{"cmd":"rm -rf /"}`, false},
	decision{"t2", "read", `{"path":"/etc/hosts"}`, true},
)

// TestMatchToolCallsOneToOne: the tool_call events and the allow records
// correspond one to one and in order (denials take no event); with no
// decisions, a bundle without tool calls matches.
func TestMatchToolCallsOneToOne(t *testing.T) {
	m, err := auditrec.MatchToolCalls(paramsBundle(`{"cmd":"ls"}`, `{"path":"/etc/hosts"}`), log)
	if err != nil || m.Matched != 2 || m.Binding != auditrec.BindingParams {
		t.Fatalf("params binding: %+v %v", m, err)
	}
	m, err = auditrec.MatchToolCalls(callBundle(t, callPayload(1, "t1", "exec", `{"cmd":"ls"}`), callPayload(3, "t2", "read", `{"path":"/etc/hosts"}`)), log)
	if err != nil || m.Matched != 2 || m.Binding != auditrec.BindingCall {
		t.Fatalf("call binding: %+v %v", m, err)
	}
	m, err = auditrec.MatchToolCalls(paramsBundle(), nil)
	if err != nil || m.Matched != 0 {
		t.Fatalf("no decisions, no calls: %+v %v", m, err)
	}
	m, err = auditrec.MatchToolCalls(paramsBundle(), records(decision{"t1", "exec", "x", false}))
	if err != nil || m.Matched != 0 {
		t.Fatalf("only a denial, no calls: %+v %v", m, err)
	}
}

// TestMatchToolCallsRefuses: the attacks on the rule, each refused with its
// code and a message naming the mismatch. The first three passed the
// earlier rule ("every event has some later allow with the same params").
func TestMatchToolCallsRefuses(t *testing.T) {
	ls, hosts := `{"cmd":"ls"}`, `{"path":"/etc/hosts"}`
	for name, c := range map[string]struct {
		b        func(t *testing.T) *poh.Bundle
		recs     []auditrec.Record
		code     poh.Code
		field    string
		contains string
	}{
		"an allowed decision without its event": {
			func(*testing.T) *poh.Bundle { return paramsBundle(ls) }, log,
			poh.EvidenceMismatch, "payload.event_chain", "audit seq 3 (tool \"read\") has no tool_call event",
		},
		"an extra tool_call": {
			func(*testing.T) *poh.Bundle { return paramsBundle(ls, hosts, hosts) }, log,
			poh.EvidenceMismatch, "payload.event_chain[6]", "without an allow decision",
		},
		"an extra tool_call with the parameters of a later allow": {
			func(*testing.T) *poh.Bundle { return paramsBundle(hosts, ls, hosts) },
			records(decision{"t1", "exec", ls, true}, decision{"t2", "read", hosts, true}),
			poh.EvidenceMismatch, "payload.event_chain[2]", "does not match the allow decision of audit seq 1",
		},
		"two tool calls swapped": {
			func(*testing.T) *poh.Bundle { return paramsBundle(hosts, ls) }, log,
			poh.EvidenceMismatch, "payload.event_chain[2]", "out of order",
		},
		"a tool call of another run": {
			func(*testing.T) *poh.Bundle { return paramsBundle(ls, `{"path":"/other/run"}`) }, log,
			poh.EvidenceMismatch, "payload.event_chain[4]", "does not match the allow decision of audit seq 3",
		},
		"a denied call logged as run": {
			func(*testing.T) *poh.Bundle { return paramsBundle(ls, `{"cmd":"rm -rf /"}`) }, log,
			poh.EvidenceMismatch, "payload.event_chain[4]", "does not match",
		},
		"a tool call of another turn": {
			calls(callPayload(1, "t1", "exec", ls), callPayload(3, "t1", "read", hosts)), log,
			poh.EvidenceMismatch, "payload.event_chain[2]", "another turn",
		},
		"another tool with the same parameters": {
			calls(callPayload(1, "t1", "write", ls), callPayload(3, "t2", "read", hosts)), log,
			poh.EvidenceMismatch, "payload.event_chain[1]", "another tool",
		},
		"the denied decision's seq": {
			calls(callPayload(2, "t1", "exec", `{"cmd":"rm -rf /"}`), callPayload(3, "t2", "read", hosts)), log,
			poh.EvidenceMismatch, "payload.event_chain[1]", "names audit seq 2",
		},
		"call payloads swapped": {
			calls(callPayload(3, "t2", "read", hosts), callPayload(1, "t1", "exec", ls)), log,
			poh.EvidenceMismatch, "payload.event_chain[1]", "out of order",
		},
		"a payload that is not the event's": {
			func(t *testing.T) *poh.Bundle {
				b := callBundle(t, callPayload(1, "t1", "exec", ls), callPayload(3, "t2", "read", hosts))
				b.Events[2].PayloadHashB64u = th(hosts)
				return b
			}, log,
			poh.HashMismatch, "payload.metadata.clawea_tool_calls[1]", "not the payload of tool_call event",
		},
		"a payload missing": {
			func(t *testing.T) *poh.Bundle {
				b := callBundle(t, callPayload(1, "t1", "exec", ls), callPayload(3, "t2", "read", hosts))
				b.Metadata = pohjson.NewObject(pohjson.M(auditrec.ToolCallsMember, pohjson.NewArray(callPayload(1, "t1", "exec", ls))))
				return b
			}, log,
			poh.EvidenceMismatch, "payload.metadata.clawea_tool_calls", "1 elements for 2 tool_call events",
		},
		"payloads not an array": {
			func(t *testing.T) *poh.Bundle {
				b := paramsBundle(ls, hosts)
				b.Metadata = pohjson.NewObject(pohjson.M(auditrec.ToolCallsMember, pohjson.NewObject()))
				return b
			}, log,
			poh.SchemaValidationFailed, "payload.metadata.clawea_tool_calls", "array",
		},
		"a payload without audit_seq": {
			func(t *testing.T) *poh.Bundle {
				return callBundle(t, pohjson.NewObject(pohjson.M("tool_call_version", pohjson.NewString("1"))))
			}, records(decision{"t1", "exec", ls, true}),
			poh.MissingRequiredField, "payload.metadata.clawea_tool_calls[0].audit_seq", "required",
		},
		"a payload of another version": {
			func(t *testing.T) *poh.Bundle {
				p := callPayload(1, "t1", "exec", ls)
				p.Members()[0].Value = pohjson.NewString("2")
				return callBundle(t, p)
			}, records(decision{"t1", "exec", ls, true}),
			poh.SchemaValidationFailed, "payload.metadata.clawea_tool_calls[0]", "tool_call_version",
		},
		"a payload with members reordered": {
			func(t *testing.T) *poh.Bundle {
				ms := callPayload(1, "t1", "exec", ls).Members()
				ms[1], ms[2] = ms[2], ms[1]
				return callBundle(t, pohjson.NewObject(ms...))
			}, records(decision{"t1", "exec", ls, true}),
			poh.SchemaValidationFailed, "payload.metadata.clawea_tool_calls[0]", "in that order",
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := auditrec.MatchToolCalls(c.b(t), c.recs)
			pe, ok := errors.AsType[*poh.Error](err)
			if !ok || !errors.Is(err, c.code) || pe.Field != c.field || !strings.Contains(pe.Msg, c.contains) || m != (auditrec.ToolCallMatch{}) {
				t.Fatalf("got %+v %v, want %s at %s containing %q", m, err, c.code, c.field, c.contains)
			}
		})
	}
}
