package poh

import (
	"crypto/sha256"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/pohjson"
)

// EventHeader is one event-chain entry without its hash; field order is the
// PoH canonical header order.
type EventHeader struct {
	EventID         string
	RunID           string
	EventType       string
	Timestamp       string
	PayloadHashB64u string
	// PrevHashB64u is nil for the first event of a chain.
	PrevHashB64u *string
}

// value returns the canonical header object: event_id, run_id, event_type,
// timestamp, payload_hash_b64u, prev_hash_b64u (null for the first event).
func (h *EventHeader) value() *pohjson.Value {
	prev := pohjson.NewNull()
	if h.PrevHashB64u != nil {
		prev = pohjson.NewString(*h.PrevHashB64u)
	}
	return pohjson.NewObject(
		pohjson.M("event_id", pohjson.NewString(h.EventID)),
		pohjson.M("run_id", pohjson.NewString(h.RunID)),
		pohjson.M("event_type", pohjson.NewString(h.EventType)),
		pohjson.M("timestamp", pohjson.NewString(h.Timestamp)),
		pohjson.M("payload_hash_b64u", pohjson.NewString(h.PayloadHashB64u)),
		pohjson.M("prev_hash_b64u", prev),
	)
}

// Hash returns event_hash_b64u: b64u(SHA-256(JSON.stringify(header))).
// The header's JSON.stringify form is written straight into a stack buffer
// (a verifier hashes every event of every bundle): its keys need no
// escaping and are not array indexes, so it is the six members in order,
// each string value quoted as JSON.stringify quotes it. A string that is
// not valid UTF-8 has no such form; the value's own encoder then gives the
// error (FuzzEventHeaderHash checks both paths agree).
func (h *EventHeader) Hash() (string, error) {
	vals := [...]string{h.EventID, h.RunID, h.EventType, h.Timestamp, h.PayloadHashB64u, ""}
	if h.PrevHashB64u != nil {
		vals[5] = *h.PrevHashB64u
	}
	var stack [512]byte
	buf := stack[:0]
	for i, v := range vals {
		if !utf8.ValidString(v) {
			return pohjson.Hash(h.value())
		}
		buf = append(buf, headerKeys[i]...)
		if i == 5 && h.PrevHashB64u == nil {
			buf = append(buf, "null"...)
		} else {
			buf = jsstr.AppendQuote(buf, v)
		}
	}
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	var out [43]byte
	return string(b64u.AppendEncode(out[:0], sum[:])), nil
}

// headerKeys are what precedes each header value in its JSON.stringify
// form, in value's member order.
var headerKeys = [...]string{`{"event_id":`, `,"run_id":`, `,"event_type":`, `,"timestamp":`, `,"payload_hash_b64u":`, `,"prev_hash_b64u":`}

// EntryValue returns the full event_chain entry (header plus event_hash_b64u)
// as it appears in a proof bundle.
func (h *EventHeader) EntryValue() (*pohjson.Value, error) {
	hash, err := h.Hash()
	if err != nil {
		return nil, err
	}
	v := h.value()
	return pohjson.NewObject(append(v.Members(), pohjson.M("event_hash_b64u", pohjson.NewString(hash)))...), nil
}

// Entry returns the event_chain entry for h: its members and
// event_hash_b64u. It is the one way this module builds chain entries;
// Next links a following one.
func (h *EventHeader) Entry() (EventChainEntry, error) {
	hash, err := h.Hash()
	if err != nil {
		return EventChainEntry{}, err
	}
	var prev *string
	if h.PrevHashB64u != nil {
		p := *h.PrevHashB64u
		prev = &p
	}
	return EventChainEntry{
		EventID: h.EventID, RunID: h.RunID, EventType: h.EventType, Timestamp: h.Timestamp,
		PayloadHashB64u: h.PayloadHashB64u, PrevHashB64u: prev, EventHashB64u: hash,
	}, nil
}

// Next returns the entry that follows e in its chain: same run id,
// prev_hash_b64u set to e's event hash.
func (e *EventChainEntry) Next(eventID, eventType, timestamp, payloadHashB64u string) (EventChainEntry, error) {
	prev := e.EventHashB64u
	h := EventHeader{
		EventID: eventID, RunID: e.RunID, EventType: eventType, Timestamp: timestamp,
		PayloadHashB64u: payloadHashB64u, PrevHashB64u: &prev,
	}
	return h.Entry()
}
