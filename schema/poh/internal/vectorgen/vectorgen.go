// Package vectorgen builds the proof-bundle test vectors in
// schema/poh/testdata/bundles: signed proof bundles that exercise the
// rate_limit_claims and tool_receipts rules (docs/spec/
// hashing-and-envelopes.md §5.4, §5.5), each with the verdict and reason code
// a verifier must give. Everything is deterministic: keys come from fixed
// seeds and Ed25519 signatures are deterministic, so Build always returns the
// same bytes and a test can check that the files are current.
//
// Run `go generate ./schema/poh` to rewrite the files.
package vectorgen

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// Vector is one test vector.
type Vector struct {
	// Name is the file name.
	Name string
	// Valid and Code are the expected outcome ("OK" when valid).
	Valid bool
	Code  string
	// Clawverify is clawverify-core's outcome when it differs from ours
	// ("" when the same), with the reason in Note.
	Clawverify string
	Note       string
	Data       []byte
}

// key is a deterministic test key: Ed25519 from SHA-256 of a label. These
// keys exist only for the vectors.
func key(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("clawea/poh/test-vector-key/v1/" + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

// didOf is the did:key of k.
func didOf(k ed25519.PrivateKey) string { return didkey.Format(k.Public().(ed25519.PublicKey)) }

// SignerDID is the did:key of the vectors' key for label ("agent",
// "tool-dispatcher", "co-signer-proxy", "co-signer-auditor", "outsider").
func SignerDID(label string) string { return didOf(key(label)) }

var (
	agentKey   = key("agent")
	toolKey    = key("tool-dispatcher")
	proxyKey   = key("co-signer-proxy")
	auditorKey = key("co-signer-auditor")
	otherKey   = key("outsider")
)

const runID = "run_vectors_001"

var (
	s   = pohjson.NewString
	n   = pohjson.NewInt
	m   = pohjson.M
	obj = pohjson.NewObject
	arr = pohjson.NewArray
)

// salt returns a deterministic 16-byte salt, b64u.
func salt(label string) string {
	h := sha256.Sum256([]byte("salt/" + label))
	return b64u.Encode(h[:16])
}

type events struct {
	entries []*pohjson.Value
	hashes  []string
}

func chain() (*events, error) {
	out := &events{}
	var prev *string
	for i, typ := range []string{"tool_call", "llm_call"} {
		h := poh.EventHeader{
			EventID:         fmt.Sprintf("evt_%d", i+1),
			RunID:           runID,
			EventType:       typ,
			Timestamp:       fmt.Sprintf("2026-11-22T00:00:0%d.000Z", i+1),
			PayloadHashB64u: b64u.SHA256([]byte(typ)),
			PrevHashB64u:    prev,
		}
		e, err := h.EntryValue()
		if err != nil {
			return nil, err
		}
		hash, _ := h.Hash()
		out.entries = append(out.entries, e)
		out.hashes = append(out.hashes, hash)
		prev = &hash
	}
	return out, nil
}

// leaf is a disclosure leaf before hashing.
type leaf struct {
	path     string
	value    *pohjson.Value
	typ      string // "" means the JSON type of value
	redacted bool
}

// disclosure builds a selective_disclosure object and its root.
func disclosure(label string, leaves []leaf) (*pohjson.Value, string, error) {
	dl := make([]poh.DisclosureLeaf, len(leaves))
	for i, l := range leaves {
		dl[i] = poh.DisclosureLeaf{Path: l.path, Type: l.typ, Value: l.value, SaltB64u: salt(label + "/" + l.path), Redacted: l.redacted}
	}
	return poh.NewDisclosure(dl)
}

func argsLeaves() []leaf {
	return []leaf{
		{path: "path", value: s("/srv/data/report.csv")},
		{path: "max_bytes", value: n(65536)},
		{path: "api_token", value: s("secret-not-disclosed"), redacted: true},
	}
}

func resultLeaves() []leaf {
	return []leaf{
		{path: "ok", value: pohjson.NewBool(true)},
		{path: "columns", value: arr(s("date"), s("amount"))},
		{path: "content", value: s("2026-11-21,12\n"), redacted: true},
	}
}

// toolPayload is the tool_receipt.v2 payload, members in schema order.
type toolPayload struct {
	agentDID      string
	bindingRunID  string
	bindingEvent  string
	argsLeaves    []leaf
	resultLeaves  []leaf
	argsHashOver  string // when set, replaces args_hash_b64u
	mutateArgs    func(*pohjson.Value) *pohjson.Value
	noDisclosures bool
}

func (tp toolPayload) build() (*pohjson.Value, error) {
	if tp.agentDID == "" {
		tp.agentDID = didOf(agentKey)
	}
	if tp.argsLeaves == nil {
		tp.argsLeaves = argsLeaves()
	}
	if tp.resultLeaves == nil {
		tp.resultLeaves = resultLeaves()
	}
	args, argsRoot, err := disclosure("args", tp.argsLeaves)
	if err != nil {
		return nil, err
	}
	res, resRoot, err := disclosure("result", tp.resultLeaves)
	if err != nil {
		return nil, err
	}
	if tp.mutateArgs != nil {
		args = tp.mutateArgs(args)
	}
	if tp.argsHashOver != "" {
		argsRoot = tp.argsHashOver
	}
	ms := []pohjson.Member{
		m("receipt_version", s("2")),
		m("receipt_id", s("tr_001")),
		m("tool_name", s("read_file")),
		m("tool_version", s("1.4.0")),
		m("args_hash_b64u", s(argsRoot)),
		m("result_hash_b64u", s(resRoot)),
		m("result_status", s("success")),
		m("hash_algorithm", s("SHA-256")),
		m("agent_did", s(tp.agentDID)),
		m("timestamp", s("2026-11-22T00:00:01.500Z")),
		m("latency_ms", n(12)),
	}
	if tp.bindingRunID != "" || tp.bindingEvent != "" {
		var b []pohjson.Member
		if tp.bindingRunID != "" {
			b = append(b, m("run_id", s(tp.bindingRunID)))
		}
		if tp.bindingEvent != "" {
			b = append(b, m("event_hash_b64u", s(tp.bindingEvent)))
		}
		ms = append(ms, m("binding", obj(b...)))
	}
	ms = append(ms, m("args_salt_b64u", s(salt("args"))), m("result_salt_b64u", s(salt("result"))))
	if !tp.noDisclosures {
		ms = append(ms, m("args_disclosure", args), m("result_disclosure", res))
	}
	return obj(ms...), nil
}

// coSig describes one co-signature.
type coSig struct {
	key       ed25519.PrivateKey
	signerDID string // when set, replaces the key's DID
	role      string
	message   string // when set, signed instead of the payload hash
}

// toolEnvelope is a tool_receipt_envelope.v2 around payload.
type toolEnvelope struct {
	version       string // "" means "2"
	payload       *pohjson.Value
	signer        ed25519.PrivateKey
	signerDID     string // when set, replaces the signer's DID
	hashAlgorithm string
	badSignature  bool
	expiresAt     string
	coSigs        []coSig
	// tamper, when set, changes the payload after signing.
	tamper func(*pohjson.Value) *pohjson.Value
}

func (te toolEnvelope) build() (*pohjson.Value, error) {
	hash, err := pohjson.Hash(te.payload)
	if err != nil {
		return nil, err
	}
	sig := signHash(te.signer, hash)
	if te.badSignature {
		sig = signHash(otherKey, hash)
	}
	did := didOf(te.signer)
	if te.signerDID != "" {
		did = te.signerDID
	}
	alg := te.hashAlgorithm
	if alg == "" {
		alg = "SHA-256"
	}
	payload := te.payload
	if te.tamper != nil {
		payload = te.tamper(payload)
	}
	version := te.version
	if version == "" {
		version = "2"
	}
	ms := []pohjson.Member{
		m("envelope_version", s(version)),
		m("envelope_type", s("tool_receipt")),
		m("payload", payload),
		m("payload_hash_b64u", s(hash)),
		m("hash_algorithm", s(alg)),
		m("signature_b64u", s(sig)),
		m("algorithm", s("Ed25519")),
		m("signer_did", s(did)),
		m("issued_at", s("2026-11-22T00:00:02.000Z")),
	}
	if te.expiresAt != "" {
		ms = append(ms, m("expires_at", s(te.expiresAt)))
	}
	if te.coSigs != nil {
		var cs []*pohjson.Value
		for _, c := range te.coSigs {
			msg := hash
			if c.message != "" {
				msg = c.message
			}
			cdid := didOf(c.key)
			if c.signerDID != "" {
				cdid = c.signerDID
			}
			cs = append(cs, obj(
				m("signature_b64u", s(signHash(c.key, msg))),
				m("algorithm", s("Ed25519")),
				m("signer_did", s(cdid)),
				m("issued_at", s("2026-11-22T00:00:03.000Z")),
				m("role", s(c.role)),
			))
		}
		ms = append(ms, m("co_signatures", arr(cs...)))
	}
	return obj(ms...), nil
}

// forge makes c a signature by the outsider key under c's claimed DID.
func forge(c *coSig) {
	if c.signerDID == "" {
		c.signerDID = didOf(c.key)
	}
	c.key = otherKey
}

// v1Payload is a tool_receipt.v1 payload bound to the standard chain.
func v1Payload(id string) *pohjson.Value {
	return obj(
		m("receipt_version", s("1")),
		m("receipt_id", s(id)),
		m("tool_name", s("bash")),
		m("args_hash_b64u", s(b64u.SHA256([]byte("args "+id)))),
		m("result_hash_b64u", s(b64u.SHA256([]byte("result "+id)))),
		m("result_status", s("success")),
		m("hash_algorithm", s("SHA-256")),
		m("agent_did", s(didOf(agentKey))),
		m("timestamp", s("2026-11-22T00:00:01.250Z")),
		m("latency_ms", n(3)),
		m("binding", obj(m("run_id", s(runID)), m("event_hash_b64u", s(eventHash(0))))),
	)
}

// v1Bundle is a bundle with a v1 tool receipt envelope (built by te around
// a v1 payload) and a bare v1 payload.
func v1Bundle(te toolEnvelope) (bundle, error) {
	te.version = "1"
	te.payload = v1Payload("tr_v1_env")
	te.signer = toolKey
	e, err := te.build()
	if err != nil {
		return bundle{}, err
	}
	return bundle{toolReceipts: []*pohjson.Value{e, v1Payload("tr_v1_bare")}}, nil
}

func goodCoSigs() []coSig {
	return []coSig{{key: proxyKey, role: "proxy"}, {key: auditorKey, role: "auditor"}}
}

// claim is a rate_limit_claims entry; nil pointers are left out.
type claim struct {
	start, end     string
	maxReq, obsReq int64
	maxIn, obsIn   *int64
	maxOut, obsOut *int64
	runID          string
	// maxReqNull writes max_requests as null (what JSON.stringify writes
	// for a non-finite number).
	maxReqNull bool
}

func i64(v int64) *int64 { return &v }

func goodClaim() claim {
	return claim{
		start: "2026-11-22T00:00:00.000Z", end: "2026-11-22T00:01:00.000Z",
		maxReq: 100, obsReq: 2,
		maxIn: i64(10000), obsIn: i64(1200),
		maxOut: i64(5000), obsOut: i64(800),
		runID: runID,
	}
}

func (c claim) value() *pohjson.Value {
	ms := []pohjson.Member{
		m("claim_version", s("1")),
		m("scope", s("agent")),
		m("scope_key", s(didOf(agentKey))),
		m("window_start", s(c.start)),
		m("window_end", s(c.end)),
		m("max_requests", n(c.maxReq)),
		m("observed_requests", n(c.obsReq)),
	}
	if c.maxReqNull {
		ms[5] = m("max_requests", pohjson.NewNull())
	}
	for _, p := range []struct {
		k string
		v *int64
	}{{"max_tokens_input", c.maxIn}, {"observed_tokens_input", c.obsIn}, {"max_tokens_output", c.maxOut}, {"observed_tokens_output", c.obsOut}} {
		if p.v != nil {
			ms = append(ms, m(p.k, n(*p.v)))
		}
	}
	if c.runID != "" {
		ms = append(ms, m("run_id", s(c.runID)))
	}
	return obj(ms...)
}

// bundle is a proof bundle under construction.
type bundle struct {
	// noChain leaves out the event chain; attestation adds one attestation
	// reference (so that the bundle still has a component).
	noChain      bool
	attestation  bool
	urm          bool
	claims       []claim
	toolReceipts []*pohjson.Value
	// replace, when set, rewrites the signed envelope bytes (old, new).
	replace [2]string
}

func (b bundle) sign() ([]byte, error) {
	ev, err := chain()
	if err != nil {
		return nil, err
	}
	ms := []pohjson.Member{
		m("bundle_version", s("1")),
		m("bundle_id", s("bundle_vectors_001")),
		m("agent_did", s(didOf(agentKey))),
	}
	if b.urm {
		ms = append(ms, m("urm", obj(
			m("urm_version", s("1")), m("urm_id", s("urm_001")), m("resource_type", s("urm")),
			m("resource_hash_b64u", s(b64u.SHA256([]byte("urm document")))),
		)))
	}
	if !b.noChain {
		ms = append(ms, m("event_chain", arr(ev.entries...)))
	}
	if len(b.toolReceipts) > 0 {
		ms = append(ms, m("tool_receipts", arr(b.toolReceipts...)))
	}
	if b.attestation {
		ms = append(ms, m("attestations", arr(obj(
			m("attestation_id", s("att_001")), m("attestation_type", s("owner")),
			m("attester_did", s(didOf(otherKey))), m("subject_did", s(didOf(agentKey))),
			m("signature_b64u", s(b64u.Encode(ed25519.Sign(otherKey, []byte("not checked here"))))),
		))))
	}
	if len(b.claims) > 0 {
		var cs []*pohjson.Value
		for _, c := range b.claims {
			cs = append(cs, c.value())
		}
		ms = append(ms, m("rate_limit_claims", arr(cs...)))
	}
	raw, err := poh.Sign(poh.TypeProofBundle, obj(ms...), agentKey, time.Date(2026, 11, 22, 0, 0, 10, 0, time.UTC))
	if err != nil {
		return nil, err
	}
	if b.replace[0] != "" {
		if !bytes.Contains(raw, []byte(b.replace[0])) {
			return nil, fmt.Errorf("replacement %q not found", b.replace[0])
		}
		raw = bytes.Replace(raw, []byte(b.replace[0]), []byte(b.replace[1]), 1)
	}
	return raw, nil
}

// eventHash returns the i-th event hash of the standard chain.
func eventHash(i int) string {
	ev, err := chain()
	if err != nil {
		panic(err)
	}
	return ev.hashes[i]
}

func boundPayload() toolPayload {
	return toolPayload{bindingRunID: runID, bindingEvent: eventHash(0)}
}

// envelopeBundle is a bundle with one v2 tool receipt envelope built from
// tp and te (te.payload is filled in) and the good rate-limit claim.
func envelopeBundle(tp toolPayload, te toolEnvelope) (bundle, error) {
	p, err := tp.build()
	if err != nil {
		return bundle{}, err
	}
	te.payload = p
	if te.signer == nil {
		te.signer = toolKey
	}
	env, err := te.build()
	if err != nil {
		return bundle{}, err
	}
	return bundle{claims: []claim{goodClaim()}, toolReceipts: []*pohjson.Value{env}}, nil
}

func withMember(v *pohjson.Value, key string, nv *pohjson.Value) *pohjson.Value {
	var ms []pohjson.Member
	for _, mm := range v.Members() {
		if mm.Key == key {
			mm.Value = nv
		}
		ms = append(ms, mm)
	}
	return obj(ms...)
}

// Build returns every vector, valid ones first.
func Build() ([]Vector, error) {
	type spec struct {
		name, code, clawverify, note string
		make                         func() (bundle, error)
	}
	claims := func(cs ...claim) func() (bundle, error) {
		return func() (bundle, error) { return bundle{claims: cs}, nil }
	}
	mod := func(f func(*claim)) claim { c := goodClaim(); f(&c); return c }
	env := func(tp toolPayload, te toolEnvelope) func() (bundle, error) {
		return func() (bundle, error) { return envelopeBundle(tp, te) }
	}
	cosigned := func(f func(*toolEnvelope)) toolEnvelope {
		te := toolEnvelope{coSigs: goodCoSigs()}
		if f != nil {
			f(&te)
		}
		return te
	}
	specs := []spec{
		{"valid_v2_cosigned_envelope.json", "OK", "", "v2 tool receipt envelope with proxy and auditor co-signatures, args and result disclosures, bound to the chain; one rate-limit claim with both token pairs",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.expiresAt = "2999-01-01T00:00:00.000Z" }))},
		{"valid_v2_payload_unsigned.json", "OK", "", "bare v2 tool receipt payload (no envelope) with disclosures",
			func() (bundle, error) {
				p, err := boundPayload().build()
				return bundle{toolReceipts: []*pohjson.Value{p}}, err
			}},
		{"valid_v2_envelope_no_cosignatures.json", "OK", "", "v2 envelope without co_signatures and without disclosures",
			env(toolPayload{noDisclosures: true}, toolEnvelope{})},
		{"valid_v1_envelope_and_payload.json", "OK", "", "a v1 tool receipt envelope and a bare v1 payload, both bound to the chain",
			func() (bundle, error) { return v1Bundle(toolEnvelope{}) }},
		{"valid_rate_limit_boundaries.json", "OK", "", "window_start == window_end, observed == max for requests and both token limits, no run_id",
			claims(claim{start: "2026-11-22T00:00:00.000Z", end: "2026-11-22T00:00:00.000Z", maxReq: 5, obsReq: 5, maxIn: i64(7), obsIn: i64(7), maxOut: i64(0), obsOut: i64(0)})},
		{"valid_rate_limit_submillisecond.json", "OK", "", "window_start is after window_end only below one millisecond: equal as Date.parse values",
			claims(mod(func(c *claim) { c.start, c.end = "2026-11-22T00:00:00.0009Z", "2026-11-22T00:00:00.0001Z" }))},
		{"valid_no_chain_binding_not_compared.json", "OK", "", "no event chain (an attestation reference instead): a tool receipt bound to another run and a claim naming another run are not compared",
			func() (bundle, error) {
				b, err := envelopeBundle(toolPayload{bindingRunID: "run_other", bindingEvent: b64u.SHA256([]byte("elsewhere"))}, cosigned(nil))
				b.noChain, b.attestation = true, true
				b.claims = []claim{mod(func(c *claim) { c.runID = "run_other" })}
				return b, err
			}},
		{"valid_rate_limit_offsets.json", "OK", "", "window in two time zones: 01:00+01:00 is before 00:30Z",
			claims(mod(func(c *claim) { c.start, c.end = "2026-11-22T01:00:00.000+01:00", "2026-11-22T00:30:00.000Z" }))},

		{"rate_window_reversed.json", "RATE_LIMIT_WINDOW_INVALID", "", "window_start after window_end",
			claims(mod(func(c *claim) { c.start, c.end = c.end, c.start }))},
		{"rate_window_reversed_by_offset.json", "RATE_LIMIT_WINDOW_INVALID", "", "window_end 01:10+01:00 is 00:10Z, before window_start 00:30Z",
			claims(mod(func(c *claim) { c.start, c.end = "2026-11-22T00:30:00.000Z", "2026-11-22T01:10:00.000+01:00" }))},
		{"rate_window_one_millisecond.json", "RATE_LIMIT_WINDOW_INVALID", "", "window_start one millisecond after window_end",
			claims(mod(func(c *claim) { c.start, c.end = "2026-11-22T00:00:00.001Z", "2026-11-22T00:00:00.000Z" }))},
		{"rate_requests_exceeded.json", "RATE_LIMIT_EXCEEDED", "", "observed_requests > max_requests",
			claims(mod(func(c *claim) { c.obsReq = 101 }))},
		{"rate_tokens_input_exceeded.json", "RATE_LIMIT_EXCEEDED", "", "observed_tokens_input > max_tokens_input",
			claims(mod(func(c *claim) { c.obsIn = i64(10001) }))},
		{"rate_tokens_output_exceeded.json", "RATE_LIMIT_EXCEEDED", "", "observed_tokens_output > max_tokens_output",
			claims(mod(func(c *claim) { c.obsOut = i64(5001) }))},
		{"rate_tokens_input_missing_observed.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "max_tokens_input without observed_tokens_input",
			claims(mod(func(c *claim) { c.obsIn = nil }))},
		{"rate_tokens_output_missing_max.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "observed_tokens_output without max_tokens_output",
			claims(mod(func(c *claim) { c.maxOut = nil }))},
		{"rate_run_id_mismatch.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "claim run_id is not the event chain's run id",
			claims(mod(func(c *claim) { c.runID = "run_other" }))},
		{"rate_window_leap_second.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "23:59:60 passes the date-time format but is not a parseable instant (Date.parse gives NaN)",
			claims(mod(func(c *claim) { c.start, c.end = "2026-12-31T23:59:60.000Z", "2027-01-01T00:01:00.000Z" }))},
		{"rate_order_window_before_exceeded.json", "RATE_LIMIT_WINDOW_INVALID", "", "reversed window and exceeded requests: the window is checked first",
			claims(mod(func(c *claim) { c.start, c.end = c.end, c.start; c.obsReq = 500 }))},
		{"rate_order_requests_before_pairs.json", "RATE_LIMIT_EXCEEDED", "", "exceeded requests and a missing token pair: requests are checked first",
			claims(mod(func(c *claim) { c.obsReq = 500; c.obsIn = nil }))},
		{"rate_order_input_before_output.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "missing input pair and exceeded output: tokens_input is checked first",
			claims(mod(func(c *claim) { c.obsIn = nil; c.obsOut = i64(9999) }))},
		{"rate_order_pairs_before_run_id.json", "RATE_LIMIT_EXCEEDED", "", "exceeded output and a foreign run_id: run_id is checked last",
			claims(mod(func(c *claim) { c.obsOut = i64(9999); c.runID = "run_other" }))},
		{"rate_order_first_claim_first.json", "RATE_LIMIT_CLAIM_INCONSISTENT", "", "claim 0 misses a pair, claim 1 has a reversed window: claims are checked in order",
			claims(mod(func(c *claim) { c.maxIn = nil }), mod(func(c *claim) { c.start, c.end = c.end, c.start }))},
		{"rate_negative_max.json", "SCHEMA_VALIDATION_FAILED", "", "max_requests below 0 fails the schema (minimum 0) before the rate-limit rules",
			claims(mod(func(c *claim) { c.maxReq = -1 }))},
		{"rate_nonfinite_max.json", "MALFORMED_ENVELOPE", "RATE_LIMIT_CLAIM_INCONSISTENT",
			"max_requests is 1e400 (Infinity in JavaScript; signed over the JSON.stringify form, which writes null): we refuse the number when parsing (§2.1)",
			func() (bundle, error) {
				c := goodClaim()
				c.maxReqNull = true
				return bundle{claims: []claim{c}, replace: [2]string{`"max_requests":null`, `"max_requests":1e400`}}, nil
			}},

		{"urm_without_document.json", "URM_MISSING", "", "payload.urm references a URM document that is not supplied (checked after the rate-limit claims)",
			func() (bundle, error) { return bundle{urm: true, claims: []claim{goodClaim()}}, nil }},
		{"order_rate_limit_before_urm.json", "RATE_LIMIT_EXCEEDED", "", "an exceeded claim and a URM reference: rate-limit claims are checked first",
			func() (bundle, error) {
				return bundle{urm: true, claims: []claim{mod(func(c *claim) { c.obsReq = 1000 })}}, nil
			}},

		{"tool_cosignature_wrong_key.json", "CO_SIGNATURE_INVALID", "", "the proxy co-signature is made by another key",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.coSigs[0] = coSig{key: otherKey, signerDID: didOf(proxyKey), role: "proxy"} }))},
		{"tool_cosignature_wrong_message.json", "CO_SIGNATURE_INVALID", "", "the auditor co-signs a different payload hash",
			env(boundPayload(), cosigned(func(te *toolEnvelope) {
				te.coSigs[1].message = b64u.SHA256([]byte("another payload"))
			}))},
		{"tool_cosignature_did_web.json", "CO_SIGNATURE_INVALID", "", "a did:web co-signer: no key can be extracted offline",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.coSigs[1].signerDID = "did:web:auditor.example" }))},
		{"tool_cosignature_unknown_role.json", "SCHEMA_VALIDATION_FAILED", "", "co-signature role outside the schema enum",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.coSigs[0].role = "witness" }))},
		{"tool_cosignature_too_many.json", "SCHEMA_VALIDATION_FAILED", "", "17 co-signatures (schema maxItems 16)",
			env(boundPayload(), cosigned(func(te *toolEnvelope) {
				for len(te.coSigs) < 17 {
					te.coSigs = append(te.coSigs, coSig{key: auditorKey, role: "auditor"})
				}
			}))},
		{"tool_signature_invalid.json", "SIGNATURE_INVALID", "", "primary signature by another key; a co-signature is bad too: the primary signature is checked first",
			env(boundPayload(), cosigned(func(te *toolEnvelope) {
				te.badSignature = true
				forge(&te.coSigs[0])
			}))},
		{"tool_signer_did_web.json", "SIGNATURE_INVALID", "", "did:web primary signer (clawverify treats a key it cannot extract as a failed signature)",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.signerDID = "did:web:tools.example" }))},
		{"tool_v1_signature_invalid.json", "SIGNATURE_INVALID", "", "v1 tool receipt envelope signed by another key",
			func() (bundle, error) { return v1Bundle(toolEnvelope{badSignature: true}) }},
		{"tool_v1_with_cosignatures.json", "SCHEMA_VALIDATION_FAILED", "", "a v1 envelope cannot carry co_signatures (no tool receipt form matches)",
			func() (bundle, error) { return v1Bundle(toolEnvelope{coSigs: goodCoSigs()}) }},
		{"tool_payload_hash_mismatch.json", "HASH_MISMATCH", "", "the receipt payload changed after signing",
			env(boundPayload(), cosigned(func(te *toolEnvelope) {
				te.tamper = func(p *pohjson.Value) *pohjson.Value { return withMember(p, "latency_ms", n(13)) }
			}))},
		{"tool_hash_algorithm_blake3.json", "UNKNOWN_HASH_ALGORITHM", "", "BLAKE3 passes the schema but no verifier implements it",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.hashAlgorithm = "BLAKE3" }))},
		{"tool_expired.json", "EXPIRED_TTL", "", "expires_at is in the past",
			env(boundPayload(), cosigned(func(te *toolEnvelope) { te.expiresAt = "2001-01-01T00:00:00.000Z" }))},
		{"tool_disclosure_type_mismatch.json", "DISCLOSURE_TYPE_MISMATCH", "", "a disclosed string leaf declared as number (the root still matches the commitment)",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), argsLeaves: []leaf{
				{path: "path", value: s("/srv/data/report.csv"), typ: "number"},
				{path: "max_bytes", value: n(65536)},
			}}, cosigned(nil))},
		{"tool_disclosure_root_not_committed.json", "DISCLOSURE_ROOT_MISMATCH", "", "args_hash_b64u is not the disclosure's merkle_root_b64u",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), argsHashOver: b64u.SHA256([]byte("args"))}, cosigned(nil))},
		{"tool_disclosure_value_changed.json", "DISCLOSURE_ROOT_MISMATCH", "", "a disclosed value differs from the one hashed into the root",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), mutateArgs: func(d *pohjson.Value) *pohjson.Value {
				leaves := d.Get("disclosed_leaves")
				pathLeaf := leaves.Get("path")
				return withMember(d, "disclosed_leaves", withMember(leaves, "path", withMember(pathLeaf, "value", s("/etc/shadow"))))
			}}, cosigned(nil))},
		{"tool_disclosure_redacted_leaf_dropped.json", "DISCLOSURE_ROOT_MISMATCH", "", "a redacted leaf hash is missing",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), mutateArgs: func(d *pohjson.Value) *pohjson.Value {
				return withMember(d, "redacted_leaf_hashes_b64u", arr())
			}}, cosigned(nil))},
		{"tool_disclosure_unknown_algorithm.json", "SCHEMA_VALIDATION_FAILED", "", "disclosure_algorithm other than vir_v2_typed_lexicographical fails the schema (const)",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), mutateArgs: func(d *pohjson.Value) *pohjson.Value {
				return withMember(d, "disclosure_algorithm", s("sd_jwt"))
			}}, cosigned(nil))},
		{"tool_result_disclosure_type_mismatch_unsigned.json", "DISCLOSURE_TYPE_MISMATCH", "", "bare v2 payload whose result disclosure declares an array as object",
			func() (bundle, error) {
				tp := boundPayload()
				tp.resultLeaves = []leaf{{path: "columns", value: arr(s("date")), typ: "object"}}
				p, err := tp.build()
				return bundle{toolReceipts: []*pohjson.Value{p}}, err
			}},
		{"tool_binding_run_mismatch.json", "RECEIPT_BINDING_MISMATCH", "", "binding.run_id is another run",
			env(toolPayload{bindingRunID: "run_other", bindingEvent: eventHash(0)}, cosigned(nil))},
		{"tool_binding_event_not_in_chain.json", "RECEIPT_BINDING_MISMATCH", "", "binding.event_hash_b64u names no event of the chain",
			env(toolPayload{bindingRunID: runID, bindingEvent: b64u.SHA256([]byte("no such event"))}, cosigned(nil))},
		{"tool_order_binding_before_signatures.json", "RECEIPT_BINDING_MISMATCH", "", "foreign run and a bad co-signature: the binding is checked before the signatures",
			env(toolPayload{bindingRunID: "run_other", bindingEvent: eventHash(0)}, cosigned(func(te *toolEnvelope) { forge(&te.coSigs[0]) }))},
		{"tool_order_cosignature_before_disclosure.json", "CO_SIGNATURE_INVALID", "", "bad co-signature and a disclosure type mismatch: signatures are checked before disclosures",
			env(toolPayload{bindingRunID: runID, bindingEvent: eventHash(0), argsLeaves: []leaf{{path: "path", value: s("x"), typ: "boolean"}}},
				cosigned(func(te *toolEnvelope) { forge(&te.coSigs[1]) }))},
		{"tool_agent_mismatch.json", "PROOF_BUNDLE_AGENT_MISMATCH", "", "tool receipt agent_did is not the bundle's agent (checked before the binding)",
			env(toolPayload{agentDID: didOf(otherKey), bindingRunID: "run_other"}, cosigned(nil))},
		{"order_rate_limit_before_tool_receipts.json", "RATE_LIMIT_EXCEEDED", "", "an exceeded rate-limit claim and a bad co-signature: rate-limit claims are checked first",
			func() (bundle, error) {
				b, err := envelopeBundle(boundPayload(), cosigned(func(te *toolEnvelope) { forge(&te.coSigs[0]) }))
				b.claims = []claim{mod(func(c *claim) { c.obsReq = 1000 })}
				return b, err
			}},
	}
	var out []Vector
	seen := map[string]bool{}
	for _, sp := range specs {
		if seen[sp.name] {
			return nil, fmt.Errorf("duplicate vector name %s", sp.name)
		}
		seen[sp.name] = true
		b, err := sp.make()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		raw, err := b.sign()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		out = append(out, Vector{Name: sp.name, Valid: sp.code == "OK", Code: sp.code, Clawverify: sp.clawverify, Note: sp.note, Data: raw})
	}
	return out, nil
}

// Index renders INDEX.tsv: file, expected_valid, expected_reason_code,
// clawverify_reason_code ("-" when the same), note.
func Index(vs []Vector) []byte {
	var b strings.Builder
	b.WriteString("file\texpected_valid\texpected_reason_code\tclawverify_reason_code\tnote\n")
	for _, v := range vs {
		cv := v.Clawverify
		if cv == "" {
			cv = "-"
		}
		fmt.Fprintf(&b, "%s\t%t\t%s\t%s\t%s\n", v.Name, v.Valid, v.Code, cv, v.Note)
	}
	return []byte(b.String())
}

// signHash signs a tool receipt envelope's payload_hash_b64u, as the primary
// signer and every co-signer do (the signed message is the b64u string).
func signHash(key ed25519.PrivateKey, payloadHashB64u string) string {
	return b64u.Encode(ed25519.Sign(key, []byte(payloadHashB64u)))
}
