package poh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// Reason codes for payload.tool_receipts, as the PoH command-line verifier
// (clawverify-core) reports them.
const (
	coSignatureInvalid         Code = "CO_SIGNATURE_INVALID"
	disclosureTypeMismatch     Code = "DISCLOSURE_TYPE_MISMATCH"
	disclosureRootMismatch     Code = "DISCLOSURE_ROOT_MISMATCH"
	disclosureAlgorithmUnknown Code = "DISCLOSURE_ALGORITHM_UNKNOWN"
	ProofBundleAgentMismatch   Code = "PROOF_BUNDLE_AGENT_MISMATCH"
	expiredTTL                 Code = "EXPIRED_TTL"
	unknownVersion             Code = "UNKNOWN_VERSION"
)

// disclosureAlgorithm is the only selective-disclosure algorithm.
const disclosureAlgorithm = "vir_v2_typed_lexicographical"

// receiptForm is the shape of a tool_receipts entry.
type receiptForm string

// The four forms proof_bundle.v1 admits in tool_receipts[], in the order
// they are tried.
const (
	toolReceiptEnvelopeV2 receiptForm = "envelope-v2"
	toolReceiptEnvelopeV1 receiptForm = "envelope-v1"
	toolReceiptPayloadV2  receiptForm = "payload-v2"
	toolReceiptPayloadV1  receiptForm = "payload-v1"
)

// IDs of the other tool receipt schemas (embedded in schema/schemas).
const (
	toolReceiptEnvelopeV2ID = "https://schemas.clawbureau.org/claw.poh.tool_receipt_envelope.v2.json"
	toolReceiptPayloadV2ID  = "https://schemas.clawbureau.org/claw.poh.tool_receipt.v2.json"
	toolReceiptPayloadV1ID  = "https://schemas.clawbureau.com/poh/tool_receipt.v1.json"
)

var toolReceiptForms = []struct {
	form   receiptForm
	schema string
}{
	{toolReceiptEnvelopeV2, toolReceiptEnvelopeV2ID},
	{toolReceiptEnvelopeV1, toolReceiptEnvelopeV1ID},
	{toolReceiptPayloadV2, toolReceiptPayloadV2ID},
	{toolReceiptPayloadV1, toolReceiptPayloadV1ID},
}

// ToolReceipt is a tool_receipts entry that passed every check.
type ToolReceipt struct {
	// Form is the entry's shape: "envelope-v2", "envelope-v1",
	// "payload-v2" or "payload-v1".
	Form      receiptForm
	ReceiptID string
	ToolName  string
	// Payload is the receipt payload (the entry itself for the payload forms).
	Payload *pohjson.Value
	// SignerDID is the verified primary signer of an envelope form, "" for a
	// bare payload (which carries no signature).
	SignerDID string
	// CoSigners are the verified co-signatures of a v2 envelope, in order.
	CoSigners []CoSigner
}

// CoSigner is a verified co-signature.
type CoSigner struct {
	SignerDID string
	Role      string
}

// bindingContext is the bundle's run and event hashes; nil when the bundle
// has no event chain.
type bindingContext struct {
	runID  string
	hashes map[string]bool
}

func newBindingContext(events []Event) *bindingContext {
	if len(events) == 0 {
		return nil
	}
	bc := &bindingContext{runID: events[0].RunID, hashes: make(map[string]bool, len(events))}
	for _, e := range events {
		bc.hashes[e.EventHashB64u] = true
	}
	return bc
}

// verifyToolReceipts checks payload.tool_receipts (docs/spec/
// hashing-and-envelopes.md §5.5). Each entry is checked completely, in this
// order, before the next one: form, agent, binding, envelope signatures,
// selective disclosures.
func verifyToolReceipts(p *pohjson.Value, agentDID string, events []Event, now time.Time) ([]ToolReceipt, error) {
	elems := p.Get("tool_receipts").Elems()
	if len(elems) == 0 {
		return nil, nil
	}
	bc := newBindingContext(events)
	out := make([]ToolReceipt, 0, len(elems))
	for i, e := range elems {
		field := fmt.Sprintf("payload.tool_receipts[%d]", i)
		tr, err := verifyToolReceipt(e, agentDID, bc, now)
		if err != nil {
			if pe, ok := errors.AsType[*Error](err); ok {
				return nil, &Error{Code: pe.Code, Field: joinField(field, pe.Field), Msg: pe.Msg}
			}
			return nil, err
		}
		out = append(out, *tr)
	}
	return out, nil
}

func verifyToolReceipt(entry *pohjson.Value, agentDID string, bc *bindingContext, now time.Time) (*ToolReceipt, error) {
	// 1. form
	form, err := toolReceiptForm(entry)
	if err != nil {
		return nil, err
	}
	env, payload := (*pohjson.Value)(nil), entry
	if form == toolReceiptEnvelopeV2 || form == toolReceiptEnvelopeV1 {
		env, payload = entry, entry.Get("payload")
	}
	prefix := ""
	if env != nil {
		prefix = "payload."
	}
	// 2. agent
	if a, _ := payload.GetString("agent_did"); a != agentDID {
		return nil, fail(ProofBundleAgentMismatch, prefix+"agent_did", "tool receipt agent_did is not the bundle's agent_did")
	}
	// 3. binding
	if err := checkToolReceiptBinding(payload.Get("binding"), bc); err != nil {
		if pe, ok := errors.AsType[*Error](err); ok {
			pe.Field = prefix + pe.Field
		}
		return nil, err
	}
	tr := &ToolReceipt{Form: form, Payload: payload}
	tr.ReceiptID, _ = payload.GetString("receipt_id")
	tr.ToolName, _ = payload.GetString("tool_name")
	// 4. envelope signatures
	if env != nil {
		if tr.SignerDID, tr.CoSigners, err = verifyToolReceiptEnvelope(env, form, now); err != nil {
			return nil, err
		}
	}
	// 5. selective disclosures
	if v, _ := payload.GetString("receipt_version"); v == "2" {
		for _, d := range []struct{ disclosure, commitment string }{
			{"args_disclosure", "args_hash_b64u"},
			{"result_disclosure", "result_hash_b64u"},
		} {
			sd := payload.Get(d.disclosure)
			if sd == nil {
				continue
			}
			committed, _ := payload.GetString(d.commitment)
			if err := verifySelectiveDisclosure(sd, committed); err != nil {
				if pe, ok := errors.AsType[*Error](err); ok {
					pe.Field = joinField(prefix+d.disclosure, pe.Field)
				}
				return nil, err
			}
		}
	}
	return tr, nil
}

// toolReceiptForm finds the first form whose schema the entry satisfies.
func toolReceiptForm(entry *pohjson.Value) (receiptForm, error) {
	raw, err := pohjson.Stringify(entry)
	if err != nil {
		return "", fail(SchemaValidationFailed, "", "tool receipt cannot be serialized: %v", err)
	}
	var first *schemas.ValidationError
	for _, f := range toolReceiptForms {
		err := schemas.Validate(f.schema, raw)
		if err == nil {
			return f.form, nil
		}
		ve, ok := errors.AsType[*schemas.ValidationError](err)
		if !ok {
			return "", fail(SchemaValidationFailed, "", "%v", err)
		}
		if first == nil {
			first = ve
		}
	}
	if entry.Kind() == pohjson.Object && entry.Has("receipt_version") {
		return "", fail(unknownVersion, "receipt_version", "tool receipt receipt_version is not supported")
	}
	return "", fail(SchemaValidationFailed, first.Location, "%s", first.Msg)
}

// checkToolReceiptBinding compares a tool receipt's binding with the
// bundle's event chain. A receipt without a binding, or a bundle without an
// event chain, is not checked; a binding run_id that is not a non-empty
// string is not compared.
func checkToolReceiptBinding(binding *pohjson.Value, bc *bindingContext) error {
	if binding.Kind() != pohjson.Object || bc == nil {
		return nil
	}
	if runID, ok := binding.GetString("run_id"); ok && runID != "" && runID != bc.runID {
		return fail(ReceiptBindingMismatch, "binding.run_id", "tool receipt is bound to another run")
	}
	if !binding.Has("event_hash_b64u") {
		return nil
	}
	h, ok := binding.GetString("event_hash_b64u")
	if !ok || !isB64uText(h) {
		return fail(SchemaValidationFailed, "binding.event_hash_b64u", "must be a base64url string")
	}
	if !bc.hashes[h] {
		return fail(ReceiptBindingMismatch, "binding.event_hash_b64u", "tool receipt is bound to an event not in this bundle's chain")
	}
	return nil
}

// verifyToolReceiptEnvelope checks a (schema-valid) tool receipt envelope:
// expiry, payload hash, primary signature, then each co-signature of a v2
// envelope. Co-signatures sign the same message as the primary signature:
// the UTF-8 bytes of the payload_hash_b64u string.
func verifyToolReceiptEnvelope(env *pohjson.Value, form receiptForm, now time.Time) (string, []CoSigner, error) {
	str := func(f string) string { s, _ := env.GetString(f); return s }
	if env.Has("expires_at") {
		exp, err := parseTime(str("expires_at"))
		if err != nil {
			return "", nil, fail(SchemaValidationFailed, "expires_at", "expires_at must be a date-time")
		}
		if now.UnixMilli() > exp.UnixMilli() {
			return "", nil, fail(expiredTTL, "expires_at", "tool receipt envelope has expired")
		}
	}
	if str("hash_algorithm") != hashAlgorithm {
		return "", nil, fail(unknownHashAlgorithm, "hash_algorithm", "tool receipt hash algorithm is not supported")
	}
	hash, err := pohjson.Hash(env.Get("payload"))
	if err != nil || hash != str("payload_hash_b64u") {
		return "", nil, fail(HashMismatch, "payload_hash_b64u", "computed payload hash does not match the envelope")
	}
	signer := str("signer_did")
	if !verifyDetached(signer, str("algorithm"), str("signature_b64u"), hash) {
		return "", nil, fail(SignatureInvalid, "signature_b64u", "tool receipt signature does not verify")
	}
	var cos []CoSigner
	if form == toolReceiptEnvelopeV2 {
		for i, co := range env.Get("co_signatures").Elems() {
			cs := func(f string) string { s, _ := co.GetString(f); return s }
			if !verifyDetached(cs("signer_did"), cs("algorithm"), cs("signature_b64u"), hash) {
				return "", nil, fail(coSignatureInvalid, fmt.Sprintf("co_signatures[%d].signature_b64u", i), "co-signature does not verify")
			}
			cos = append(cos, CoSigner{SignerDID: cs("signer_did"), Role: cs("role")})
		}
	}
	return signer, cos, nil
}

// verifyDetached verifies an Ed25519 signature by a did:key over the UTF-8
// bytes of msg. Any failure (algorithm, DID, encoding, length) is false.
func verifyDetached(did, alg, sigB64u, msg string) bool {
	if alg != algorithm {
		return false
	}
	pub, err := didkey.Parse(did)
	if err != nil {
		return false
	}
	sig, err := b64u.Decode(sigB64u)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, []byte(msg), sig)
}
