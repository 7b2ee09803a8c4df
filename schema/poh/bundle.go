package poh

import (
	"fmt"
	"slices"
	"time"

	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
)

// Proof-bundle limits, as the PoH verifier enforces them.
const (
	maxEventChainEntries = 1000
	maxReceipts          = 1000
	maxAttestations      = 100
	maxMetadataBytes     = 16 << 10
)

// BundleOptions configure VerifyProofBundle.
type BundleOptions struct {
	// ReceiptSignerDIDs is the allowlist of gateway receipt signers. Receipts
	// from other signers still have to verify, but are not counted as
	// allowlisted.
	ReceiptSignerDIDs []string
	// VerificationTime is the time tool receipt envelope expiry (expires_at)
	// is checked against; the zero value means the current time.
	VerificationTime time.Time
}

// Event is a verified event-chain entry.
type Event struct {
	EventHeader
	EventHashB64u string
}

// Receipt is a verified gateway receipt bound to the bundle's event chain.
type Receipt struct {
	Envelope    *Verified
	ReceiptID   string
	Allowlisted bool
}

// Bundle is a proof bundle that passed every check.
type Bundle struct {
	Envelope *Verified
	BundleID string
	AgentDID string
	// RunID is the event chain's run id ("" when the bundle has no chain).
	RunID    string
	Events   []Event
	Receipts []Receipt
	// RateLimitClaims are payload.rate_limit_claims, checked (§5.4).
	RateLimitClaims []RateLimitClaim
	// ToolReceipts are payload.tool_receipts, checked (§5.5).
	ToolReceipts []ToolReceipt
	// Metadata is payload.metadata, or nil.
	Metadata *pohjson.Value
	// parsedMetadata is Metadata as VerifyProofBundle set it: a member of
	// an envelope strictly parsed from bytes, so every value in it has a
	// JSON.stringify form (see validateSub).
	parsedMetadata *pohjson.Value
}

// VerifyProofBundle verifies a proof_bundle envelope: the envelope (Verify),
// the bundle payload rules, the event chain (run id, linkage, recomputed
// header hashes), the rate-limit claims, the URM reference, every gateway
// receipt (signature and binding to this bundle's run and events) and every
// tool receipt (binding, signatures and co-signatures, selective
// disclosures), in that order (docs/spec/hashing-and-envelopes.md §5.2).
func VerifyProofBundle(raw []byte, opts BundleOptions) (*Bundle, error) {
	env, err := Verify(raw, VerifyOptions{Type: TypeProofBundle, PayloadCheck: checkBundlePayload})
	if err != nil {
		return nil, err
	}
	p := env.Payload
	md := p.Get("metadata")
	out := &Bundle{Envelope: env, Metadata: md, parsedMetadata: md}
	out.BundleID, _ = p.GetString("bundle_id")
	out.AgentDID, _ = p.GetString("agent_did")

	if chain := p.Get("event_chain").Elems(); len(chain) > 0 {
		events, err := verifyEventChain(chain)
		if err != nil {
			return nil, err
		}
		out.Events = events
		out.RunID = events[0].RunID
	}
	out.RateLimitClaims = rateLimitClaims(p)
	if err := checkRateLimitClaims(out.RateLimitClaims, out.RunID); err != nil {
		return nil, err
	}
	if err := checkURMReference(p); err != nil {
		return nil, err
	}
	for i, r := range p.Get("receipts").Elems() {
		rc, err := verifyBoundReceipt(i, r, out, opts)
		if err != nil {
			return nil, err
		}
		out.Receipts = append(out.Receipts, *rc)
	}
	now := opts.VerificationTime
	if now.IsZero() {
		now = time.Now()
	}
	if out.ToolReceipts, err = verifyToolReceipts(p, out.AgentDID, out.Events, now); err != nil {
		return nil, err
	}
	return out, nil
}

func checkBundlePayload(p *pohjson.Value, signerDID string) error {
	if p.Kind() != pohjson.Object {
		return fail(MalformedEnvelope, "payload", "payload must be an object")
	}
	if v, _ := p.GetString("bundle_version"); v != "1" {
		return fail(MalformedEnvelope, "payload.bundle_version", `bundle_version must be "1"`)
	}
	if id, _ := p.GetString("bundle_id"); id == "" {
		return fail(MalformedEnvelope, "payload.bundle_id", "bundle_id is required and must be non-empty")
	}
	n := 0
	for _, k := range []string{"event_chain", "receipts", "attestations"} {
		n += len(p.Get(k).Elems())
	}
	if n == 0 && !p.Has("urm") {
		return fail(MalformedEnvelope, "payload", "at least one of urm, event_chain, receipts, or attestations is required")
	}
	for k, limit := range map[string]int{"event_chain": maxEventChainEntries, "receipts": maxReceipts, "attestations": maxAttestations} {
		if l := len(p.Get(k).Elems()); l > limit {
			return fail(MalformedEnvelope, "payload."+k, "%d entries exceed the limit of %d", l, limit)
		}
	}
	if md := p.Get("metadata"); md != nil {
		b, err := pohjson.Stringify(md)
		if err != nil || len(b) > maxMetadataBytes {
			return fail(MalformedEnvelope, "payload.metadata", "metadata exceeds %d bytes", maxMetadataBytes)
		}
	}
	seen := map[string]bool{}
	for i, e := range p.Get("event_chain").Elems() {
		id, _ := e.GetString("event_id")
		if seen[id] {
			return fail(MalformedEnvelope, fmt.Sprintf("payload.event_chain[%d].event_id", i), "event_id must be unique")
		}
		seen[id] = true
	}
	seen = map[string]bool{}
	for i, r := range p.Get("receipts").Elems() {
		id, _ := r.Get("payload").GetString("receipt_id")
		if seen[id] {
			return fail(MalformedEnvelope, fmt.Sprintf("payload.receipts[%d].payload.receipt_id", i), "receipt_id must be unique")
		}
		seen[id] = true
	}
	agent, _ := p.GetString("agent_did")
	if !didkey.ValidSyntax(agent) {
		return fail(InvalidDIDFormat, "payload.agent_did", "agent_did does not match the DID format")
	}
	if signerDID != agent {
		return fail(InvalidDIDFormat, "signer_did", "proof bundle signer_did must equal payload.agent_did")
	}
	return nil
}

func verifyEventChain(chain []*pohjson.Value) ([]Event, error) {
	events := make([]Event, 0, len(chain))
	var prevHash string
	for i, e := range chain {
		field := fmt.Sprintf("payload.event_chain[%d]", i)
		var ev Event
		ev.EventID, _ = e.GetString("event_id")
		ev.RunID, _ = e.GetString("run_id")
		ev.EventType, _ = e.GetString("event_type")
		ev.Timestamp, _ = e.GetString("timestamp")
		ev.PayloadHashB64u, _ = e.GetString("payload_hash_b64u")
		ev.EventHashB64u, _ = e.GetString("event_hash_b64u")
		if i > 0 && ev.RunID != events[0].RunID {
			return nil, fail(MalformedEnvelope, field+".run_id", "inconsistent run_id")
		}
		prev := e.Get("prev_hash_b64u")
		switch {
		case i == 0:
			if prev.Kind() != pohjson.Null {
				return nil, fail(HashChainBreak, field+".prev_hash_b64u", "the first event must have a null prev_hash_b64u")
			}
		default:
			s, ok := prev.Str()
			if !ok || s != prevHash {
				return nil, fail(HashChainBreak, field+".prev_hash_b64u", "does not link to the previous event's hash")
			}
			ev.PrevHashB64u = &s
		}
		want, err := ev.EventHeader.Hash()
		if err != nil {
			return nil, fail(HashMismatch, field, "event header cannot be hashed: %v", err)
		}
		if want != ev.EventHashB64u {
			return nil, fail(HashMismatch, field+".event_hash_b64u", "does not match SHA-256 of the canonical event header")
		}
		prevHash = ev.EventHashB64u
		events = append(events, ev)
	}
	return events, nil
}

func verifyBoundReceipt(i int, r *pohjson.Value, b *Bundle, opts BundleOptions) (*Receipt, error) {
	field := fmt.Sprintf("payload.receipts[%d]", i)
	env, err := verifyParsed(r, VerifyOptions{Type: TypeGatewayReceipt})
	if err != nil {
		if pe, ok := err.(*Error); ok {
			return nil, &Error{Code: pe.Code, Field: joinField(field, pe.Field), Msg: pe.Msg}
		}
		return nil, err
	}
	binding := env.Payload.Get("binding")
	runID, _ := binding.GetString("run_id")
	eventHash, _ := binding.GetString("event_hash_b64u")
	if len(b.Events) == 0 {
		return nil, fail(ReceiptBindingMismatch, field, "receipt cannot be bound: the bundle has no event chain")
	}
	if binding == nil || runID != b.RunID {
		return nil, fail(ReceiptBindingMismatch, field+".payload.binding.run_id", "receipt is bound to another run")
	}
	if !slices.ContainsFunc(b.Events, func(e Event) bool { return e.EventHashB64u == eventHash }) {
		return nil, fail(ReceiptBindingMismatch, field+".payload.binding.event_hash_b64u", "receipt is bound to an event not in this bundle's chain")
	}
	id, _ := env.Payload.GetString("receipt_id")
	return &Receipt{Envelope: env, ReceiptID: id, Allowlisted: slices.Contains(opts.ReceiptSignerDIDs, env.SignerDID)}, nil
}

func joinField(prefix, f string) string {
	if f == "" {
		return prefix
	}
	if f[0] == '/' {
		return prefix + f
	}
	return prefix + "." + f
}
