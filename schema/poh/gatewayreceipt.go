package poh

import (
	"crypto/sha256"
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// receiptChainLabel is the domain-separation label of the gateway receipt
// chain (docs/spec/attestation-v1.md, "Gateway receipts").
const receiptChainLabel = "clawea.dev/attester/v1/gateway-receipt-chain"

// ReceiptCallMember is the gateway receipt metadata member in which the
// attester's gateway states what it saw of the call's system text
// (docs/spec/attestation-v1.md, "Gateway receipts").
const ReceiptCallMember = "clawea_llm_call"

// ChainGatewayReceipt verifies a gateway_receipt envelope (Verify) that is
// to follow count receipts whose chain head is head, and returns it with the
// chain head after it (nextReceiptChain). It refuses a receipt past the
// receipts a proof bundle may carry.
func ChainGatewayReceipt(head string, count int64, envelope []byte) (v *Verified, next string, err error) {
	if count < 0 || count >= maxReceipts {
		return nil, "", fail(MalformedEnvelope, "payload.receipts", "a bundle carries at most %d receipts", maxReceipts)
	}
	if v, err = Verify(envelope, VerifyOptions{Type: TypeGatewayReceipt}); err != nil {
		return nil, "", err
	}
	if next, err = nextReceiptChain(head, v.PayloadHashB64u); err != nil {
		return nil, "", err
	}
	return v, next, nil
}

// nextReceiptChain returns the gateway receipt chain head after the receipt
// whose payload_hash_b64u is payloadHashB64u, given the head before it
// ("" before the first receipt):
//
//	h_i = SHA-256(label || 0x00 || h_(i-1) || payload_hash_i)
//
// with h_0 the empty string and both hashes as raw 32-byte digests; the
// head is b64u(h_n).
func nextReceiptChain(head, payloadHashB64u string) (string, error) {
	ph, err := b64u.DecodeHash(payloadHashB64u)
	if err != nil {
		return "", fmt.Errorf("poh: receipt payload hash: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(receiptChainLabel))
	h.Write([]byte{0})
	if head != "" {
		prev, err := b64u.DecodeHash(head)
		if err != nil {
			return "", fmt.Errorf("poh: receipt chain head: %w", err)
		}
		h.Write(prev[:])
	}
	h.Write(ph[:])
	return b64u.Encode(h.Sum(nil)), nil
}

// CheckGatewayReceipts applies the attester's gateway receipt rules to a
// verified bundle (docs/spec/attestation-v1.md, "Gateway receipts") and
// returns the number of receipts and their chain head in bundle order:
// every receipt is signed by attesterDID and names it as gateway_id, is
// bound to an llm_call event of the chain, one receipt per event, and
// states the system text hashes that event's clawea_llm_calls payload
// reports; when the bundle carries any receipt, every llm_call event has
// one. A bundle without receipts gives (0, "").
func CheckGatewayReceipts(b *Bundle, attesterDID string) (count int64, chain string, err error) {
	if len(b.Receipts) == 0 {
		return 0, "", nil
	}
	calls := llmCallPayloads(b)
	byHash := make(map[string]int, len(b.Events))
	for i, e := range b.Events {
		byHash[e.EventHashB64u] = i
	}
	receipted := make(map[int]bool, len(b.Receipts))
	for i, r := range b.Receipts {
		f := fmt.Sprintf("payload.receipts[%d]", i)
		ev, err := checkGatewayReceipt(r, f, attesterDID, b, byHash, calls)
		if err != nil {
			return 0, "", err
		}
		if receipted[ev] {
			return 0, "", fail(ReceiptBindingMismatch, f+".payload.binding.event_hash_b64u", "a second receipt for llm_call event payload.event_chain[%d]", ev)
		}
		receipted[ev] = true
		if chain, err = nextReceiptChain(chain, r.Envelope.PayloadHashB64u); err != nil {
			return 0, "", fail(HashMismatch, f+".payload_hash_b64u", "is not a SHA-256 hash")
		}
	}
	for i, e := range b.Events {
		if e.EventType == EventTypeLLMCall && !receipted[i] {
			return 0, "", fail(MissingRequiredField, fmt.Sprintf("payload.event_chain[%d]", i), "llm_call event without a gateway receipt")
		}
	}
	return int64(len(b.Receipts)), chain, nil
}

// llmCallPayloads maps the index of each llm_call event in the chain to its
// clawea_llm_calls payload (the n-th payload is the n-th llm_call event's).
func llmCallPayloads(b *Bundle) map[int]*pohjson.Value {
	payloads := b.Metadata.Get("clawea_llm_calls").Elems()
	out := make(map[int]*pohjson.Value, len(payloads))
	n := 0
	for i, e := range b.Events {
		if e.EventType != EventTypeLLMCall {
			continue
		}
		if n < len(payloads) {
			out[i] = payloads[n]
		}
		n++
	}
	return out
}

// checkGatewayReceipt checks one receipt and returns the index of its
// llm_call event.
func checkGatewayReceipt(r Receipt, f, attesterDID string, b *Bundle, byHash map[string]int, calls map[int]*pohjson.Value) (int, error) {
	p := r.Envelope.Payload
	if r.Envelope.SignerDID != attesterDID {
		return 0, fail(ClaimNotFound, f+".signer_did", "the receipt is not signed by the attester")
	}
	if g, _ := p.GetString("gateway_id"); g != attesterDID {
		return 0, fail(EvidenceMismatch, f+".payload.gateway_id", "does not name the attester")
	}
	eh, _ := p.Get("binding").GetString("event_hash_b64u")
	ev, ok := byHash[eh]
	if !ok || b.Events[ev].EventType != EventTypeLLMCall {
		return 0, fail(ReceiptBindingMismatch, f+".payload.binding.event_hash_b64u", "is not the hash of an llm_call event")
	}
	call := calls[ev]
	if call == nil {
		return 0, fail(MissingRequiredField, "payload.metadata.clawea_llm_calls", "llm_call event payload.event_chain[%d] has no payload to check its receipt against", ev)
	}
	if h, err := pohjson.Hash(call); err != nil || h != b.Events[ev].PayloadHashB64u {
		return 0, fail(HashMismatch, "payload.metadata.clawea_llm_calls", "is not the payload of llm_call event payload.event_chain[%d]", ev)
	}
	return ev, checkReceiptCall(p, call, f)
}

// checkReceiptCall checks what the gateway saw against what the llm_call
// payload reports: the provider and model (when the payload names them),
// the system text hash and the suffix.
func checkReceiptCall(p, call *pohjson.Value, f string) error {
	for _, k := range []string{"provider", "model"} {
		got, _ := p.GetString(k)
		if want, _ := call.GetString(k); want != "" && want != got {
			return fail(EvidenceMismatch, f+".payload."+k, "differs from the llm_call event's")
		}
	}
	seen := p.Get("metadata").Get(ReceiptCallMember)
	mf := f + ".payload.metadata." + ReceiptCallMember
	if seen.Kind() != pohjson.Object {
		return fail(MissingRequiredField, mf, "the receipt does not state the system text the gateway forwarded")
	}
	for _, k := range []string{"system_text_hash_b64u", "suffix_hash_b64u"} {
		got, ok := seen.GetString(k)
		if !ok || !b64u.ValidHash(got) {
			return fail(SchemaValidationFailed, mf+"."+k, "must be a b64u SHA-256 hash")
		}
		if want, _ := call.GetString(k); want != got {
			return fail(EvidenceMismatch, mf+"."+k, "the llm_call event reports other bytes than the gateway forwarded")
		}
	}
	got, ok := seen.Get("suffix_utf16_len").Int()
	if !ok || got < 0 || got > pohjson.MaxSafeInteger {
		return fail(SchemaValidationFailed, mf+".suffix_utf16_len", "must be a non-negative safe integer")
	}
	if want, _ := call.Get("suffix_utf16_len").Int(); want != got {
		return fail(EvidenceMismatch, mf+".suffix_utf16_len", "the llm_call event reports another suffix than the gateway forwarded")
	}
	return nil
}
