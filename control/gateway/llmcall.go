package gateway

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// headerLLMCall carries the plugin's llm_call event for a call; headerTurn
// the current turn (docs/spec/model-gateway.md section 1).
const (
	headerLLMCall = "Clawea-Llm-Call"
	headerTurn    = "Clawea-Turn-Id"
)

// maxLLMCallBytes bounds the decoded Clawea-Llm-Call header.
const maxLLMCallBytes = 8 << 10

// maxEventField bounds the event id and timestamp.
const maxEventField = 256

// llmCall is the parsed Clawea-Llm-Call header: the event's hash (the
// receipt binds to it) and the payload's self-reported hashes.
type llmCall struct {
	eventHash      string
	systemTextHash string
	suffixHash     string
	suffixLen      int64
}

// parseLLMCall reads the header value h for run runID, checking the payload
// as the attestation will (poh.CheckLLMCall against want).
func parseLLMCall(h, runID string, want poh.PromptCommitments) (*llmCall, error) {
	bad := func(msg string) error { return refuse(reasonLLMCallMalformed, msg) }
	if h == "" {
		return nil, bad(headerLLMCall + " is missing")
	}
	if len(h) > b64u.EncodedLen(maxLLMCallBytes) {
		return nil, bad(headerLLMCall + " is too long")
	}
	raw, err := b64u.Decode(h)
	if err != nil {
		return nil, bad(headerLLMCall + " is not b64u")
	}
	// raw is this call's own decoded copy, and nothing changes it: the
	// parse borrows it (pohjson.ParseOptions.Borrow), so that the payload's
	// hash reads the payload's text when the plugin wrote it in its
	// JSON.stringify form, as it does, instead of encoding it again. The
	// parsed values are pohjson's pooled ones (ParseOptions.Release), given
	// back on return: what the call keeps of them is cloned or hashed.
	var release func()
	v, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxLLMCallBytes, MaxDepth: 4, Borrow: true, Release: &release})
	defer func() {
		if release != nil {
			release()
		}
	}()
	if err != nil {
		return nil, bad("the llm_call event is not a strict JSON object")
	}
	hdr := poh.EventHeader{RunID: runID, EventType: poh.EventTypeLLMCall}
	var payload *pohjson.Value
	for _, m := range v.Members() {
		switch m.Key {
		case "event_id":
			hdr.EventID, _ = m.Value.Str()
		case "timestamp":
			hdr.Timestamp, _ = m.Value.Str()
		case "prev_hash_b64u":
			if p, ok := m.Value.Str(); ok && b64u.ValidHash(p) {
				hdr.PrevHashB64u = &p
			} else if m.Value.Kind() != pohjson.Null {
				return nil, bad("prev_hash_b64u must be a b64u hash or null")
			}
		case "payload":
			payload = m.Value
		default:
			return nil, bad("the llm_call event has a member other than event_id, timestamp, prev_hash_b64u and payload")
		}
	}
	for _, f := range []string{hdr.EventID, hdr.Timestamp} {
		if f == "" || len(f) > maxEventField || !utf8.ValidString(f) {
			return nil, bad("event_id and timestamp must be 1 to 256 bytes of text")
		}
	}
	if len(v.Members()) != 4 {
		return nil, bad("the llm_call event needs event_id, timestamp, prev_hash_b64u and payload")
	}
	if err := poh.CheckLLMCall(payload, "payload", want); err != nil {
		return nil, bad(fmt.Sprintf("the llm_call payload is refused: %v", err))
	}
	if hdr.PayloadHashB64u, err = pohjson.Hash(payload); err != nil {
		return nil, bad("the llm_call payload cannot be serialized")
	}
	c := &llmCall{}
	if c.eventHash, err = hdr.Hash(); err != nil {
		return nil, bad("the llm_call event cannot be hashed")
	}
	// Cloned: the call keeps them while its answer streams, not raw.
	c.systemTextHash, _ = payload.GetString("system_text_hash_b64u")
	c.suffixHash, _ = payload.GetString("suffix_hash_b64u")
	c.systemTextHash, c.suffixHash = strings.Clone(c.systemTextHash), strings.Clone(c.suffixHash)
	c.suffixLen, _ = payload.Get("suffix_utf16_len").Int()
	return c, nil
}

// matches checks the payload's self-reported hashes against the hash of
// the system text S and the suffix X the gateway forwards (3.7).
func (c *llmCall) matches(system [32]byte, suffix string) error {
	if c.systemTextHash != b64u.Encode(system[:]) || c.suffixHash != b64u.SHA256([]byte(suffix)) || c.suffixLen != int64(jsstr.Len(suffix)) {
		return refuse(reasonLLMCallMismatch, "the llm_call payload's hashes are not those of the system text forwarded")
	}
	return nil
}
