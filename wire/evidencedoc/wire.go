package evidencedoc

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/nvspdm"
)

// wirePayload is the JWS payload. Field order is the wire order; the first
// member is always evidence_version.
type wirePayload struct {
	EvidenceVersion string            `json:"evidence_version"`
	Kind            string            `json:"kind"`
	AttesterDID     string            `json:"attester_did"`
	IssuedAt        string            `json:"issued_at"`
	NonceB64u       string            `json:"nonce_b64u"`
	Execution       *ExecutionContext `json:"execution,omitempty"`
	Key             *KeyContext       `json:"key,omitempty"`
	Evidence        []wireEvidence    `json:"evidence"`

	// executionJSON and keyJSON are the exact bytes of Execution and Key
	// in a parsed payload.
	executionJSON, keyJSON []byte
}

type wireEvidence struct {
	Platform       string            `json:"platform"`
	Simulated      bool              `json:"simulated"`
	Format         string            `json:"format"`
	BlobB64u       string            `json:"blob_b64u"`
	SignatureB64u  string            `json:"signature_b64u,omitempty"`
	CertChainB64u  []string          `json:"cert_chain_b64u,omitempty"`
	AuxB64u        map[string]string `json:"aux_b64u,omitempty"`
	CollateralB64u map[string]string `json:"collateral_b64u,omitempty"`
}

// platformRule says, for one platform, which format, aux and collateral
// names are defined and whether a detached signature is carried.
type platformRule struct {
	format     string
	signature  bool
	aux        []string
	collateral []string
	// gpu marks accelerator evidence: it follows the CPU evidence, is
	// counted against maxGPUItems, and may carry up to maxGPUCerts
	// certificates.
	gpu bool
}

// platformRules holds the platformRule of each platform an evidence
// document may carry.
var platformRules = map[string]platformRule{
	evidence.PlatformSEVSNP: {
		format:     "sev-snp/attestation-report",
		aux:        []string{"cert_table"},
		collateral: []string{"crl"},
	},
	evidence.PlatformTDX: {
		format:     "tdx/quote-v4",
		aux:        []string{"event_log"},
		collateral: []string{"pck_crl", "qe_identity", "root_ca_crl", "tcb_info", "tcb_signing_chain"},
	},
	evidence.PlatformTPM: {
		format:    "tpm2/quote",
		signature: true,
		aux:       []string{"ak_cert", "ak_public", "event_log", "pcr_values"},
	},
	evidence.PlatformNVIDIAGPU: {
		format: nvspdm.Format,
		gpu:    true,
	},
	// Azure (docs/spec/platform-azure.md): the vTPM quote and its
	// signature, the HCL report and PCRs in aux; the collateral of the
	// hardware report beneath.
	evidence.PlatformAzureSNP: {
		format:     "azure/hcl-vtpm-v1",
		signature:  true,
		aux:        []string{"hcl_report", "pcr_values"},
		collateral: []string{"crl"},
	},
	evidence.PlatformAzureTDX: {
		format:     "azure/hcl-vtpm-v1",
		signature:  true,
		aux:        []string{"hcl_report", "pcr_values", "td_quote"},
		collateral: []string{"pck_crl", "qe_identity", "root_ca_crl", "tcb_info", "tcb_signing_chain"},
	},
}

// Parse verifies a compact JWS evidence document signed by key and returns
// its contents. It refuses, returning nothing: input over MaxJWSBytes; any
// serialization other than three canonical b64u segments; a protected
// header other than exactly {"alg":"EdDSA","kid":<did:key>,"typ":Type} in
// that form (so alg none, HS256, crit, jwk, b64 and every other parameter
// are refused); a kid other than key's did:key; a bad signature; a payload
// that is not the canonical JSON.stringify form of a known document version
// with only known members; and any field outside its limits. The
// Document's JWS is jws itself (see Document.JWS).
func Parse(jws []byte, key ed25519.PublicKey) (*Document, error) {
	if len(jws) > MaxJWSBytes {
		return nil, fmt.Errorf("%w: jws is %d bytes, limit %d", ErrTooLarge, len(jws), MaxJWSBytes)
	}
	if len(key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: verification key is %d bytes, want %d", ErrSignature, len(key), ed25519.PublicKeySize)
	}
	did, _, payload, sig, err := split(jws)
	if err != nil {
		return nil, err
	}
	if did != didkey.Format(key) {
		return nil, fmt.Errorf("%w: signed by another key (kid %q)", ErrSignature, safetext.Clip(did, 64))
	}
	// The header, segments and signature length are checked, so the JWS
	// signing input (RFC 7515 section 5.2: the header and payload segments
	// and the dot between them) is exactly the bytes received before the
	// second dot. Verifying it directly is what go-jose's Verify does after
	// decoding and re-encoding both segments; FuzzParse checks that go-jose
	// agrees with every document Parse accepts.
	if !ed25519.Verify(key, jws[:bytes.LastIndexByte(jws, '.')], sig) {
		return nil, fmt.Errorf("%w: the EdDSA signature does not verify", ErrSignature)
	}
	return decodePayload(payload, did, key, jws)
}

// SignerKey returns the key named by the JWS kid header without verifying
// anything. Use it only to pick the key for Parse when the key is not known
// in advance (a key attestation); the key is trustworthy only once the
// hardware evidence in the parsed document is verified to commit to it.
func SignerKey(jws []byte) (ed25519.PublicKey, error) {
	if len(jws) > MaxJWSBytes {
		return nil, fmt.Errorf("%w: jws is %d bytes, limit %d", ErrTooLarge, len(jws), MaxJWSBytes)
	}
	did, _, _, _, err := split(jws)
	if err != nil {
		return nil, err
	}
	return didkey.Parse(did)
}

// split checks the compact serialization and the protected header and
// returns the kid, header bytes, payload bytes and signature bytes.
func split(jws []byte) (kid string, header, payload, sig []byte, err error) {
	parts := bytes.Split(jws, []byte("."))
	if len(parts) != 3 {
		return "", nil, nil, nil, fmt.Errorf("%w: compact jws must have 3 segments, has %d", ErrMalformed, len(parts))
	}
	dec := make([][]byte, 3)
	for i, p := range parts {
		if dec[i], err = b64u.Decode(p); err != nil {
			return "", nil, nil, nil, fmt.Errorf("%w: segment %d: %v", ErrMalformed, i, err)
		}
	}
	header, payload, sig = dec[0], dec[1], dec[2]
	if kid, err = checkHeader(header); err != nil {
		return "", nil, nil, nil, err
	}
	if len(sig) != ed25519.SignatureSize {
		return "", nil, nil, nil, fmt.Errorf("%w: signature is %d bytes, want %d", ErrSignature, len(sig), ed25519.SignatureSize)
	}
	return kid, header, payload, sig, nil
}

const maxHeaderBytes = 1024

// checkHeader accepts exactly the canonical protected header.
func checkHeader(h []byte) (string, error) {
	if len(h) > maxHeaderBytes {
		return "", fmt.Errorf("%w: protected header is %d bytes, limit %d", ErrTooLarge, len(h), maxHeaderBytes)
	}
	v, err := pohjson.ParseWith(h, pohjson.ParseOptions{MaxBytes: maxHeaderBytes, MaxDepth: 4})
	if err != nil {
		return "", fmt.Errorf("%w: protected header: %v", ErrMalformed, err)
	}
	if v.Kind() != pohjson.Object {
		return "", fmt.Errorf("%w: protected header is not an object", ErrMalformed)
	}
	if v.Has("crit") {
		return "", fmt.Errorf("%w: critical header parameters are not supported", ErrUnsupported)
	}
	alg, ok := v.GetString("alg")
	if !ok {
		return "", fmt.Errorf("%w: protected header has no alg", ErrMalformed)
	}
	if alg != algorithm {
		return "", fmt.Errorf("%w: alg %q, only %s is accepted", ErrUnsupported, safetext.Clip(alg, 64), algorithm)
	}
	if typ, _ := v.GetString("typ"); typ != jwsType {
		return "", fmt.Errorf("%w: typ %q, want %q", ErrUnsupported, safetext.Clip(typ, 64), jwsType)
	}
	for _, m := range v.Members() {
		switch m.Key {
		case "alg", "kid", "typ":
		default:
			return "", fmt.Errorf("%w: header parameter %q is not allowed", ErrUnsupported, safetext.Clip(m.Key, 64))
		}
	}
	kid, ok := v.GetString("kid")
	if !ok {
		return "", fmt.Errorf("%w: protected header has no kid", ErrMalformed)
	}
	if _, err := didkey.Parse(kid); err != nil {
		return "", fmt.Errorf("%w: kid: %v", ErrMalformed, err)
	}
	if !bytes.Equal(h, canonicalHeader(kid)) {
		return "", fmt.Errorf("%w: protected header is not in canonical form", ErrMalformed)
	}
	return kid, nil
}

// canonicalHeader is the only protected header accepted. A did:key has no
// characters that JSON escapes.
func canonicalHeader(kid string) []byte {
	return []byte(`{"alg":"` + algorithm + `","kid":"` + kid + `","typ":"` + jwsType + `"}`)
}

var errNotCanonical = fmt.Errorf("%w: payload is not the canonical form of a known document: members unknown, missing, empty or in the wrong order, case or form", ErrMalformed)

func decodePayload(payload []byte, did string, key ed25519.PublicKey, jws []byte) (*Document, error) {
	// The payload must be exactly the canonical (JSON.stringify) encoding
	// of the document it carries, as Sign writes it: the parser refuses
	// any other form (whitespace, escapes JSON.stringify does not write,
	// member order), and wireFrom insists on exactly wirePayload's
	// members, in wire order and with their JSON types, optional members
	// absent rather than null or empty, map members in encoding/json's
	// order, down to the evidence contexts. So no lenient decoder decides
	// what is accepted, and the large evidence strings are read once.
	v, err := payloadTree(payload, true)
	if err != nil {
		return nil, err
	}
	w, ok := wireFrom(v)
	if !ok {
		return nil, errNotCanonical
	}
	if w.AttesterDID != did {
		return nil, fmt.Errorf("%w: attester_did differs from the jws kid", ErrSignature)
	}
	d, err := fromWire(w)
	if err != nil {
		return nil, err
	}
	if d.Kind == KindExecution {
		d.context = w.executionJSON
	} else {
		d.context = w.keyJSON
	}
	d.AttesterKey = append(ed25519.PublicKey(nil), key...)
	d.JWS = jws[:len(jws):len(jws)]
	return d, nil
}

// payloadTree parses a payload (in the canonical form only, when
// canonical) and checks what decides its version: an object whose first
// member is evidence_version, this package's version. A canonical payload
// is read with Borrow: its strings are substrings of payload itself, and
// the exact bytes of the evidence context (contextFrom) are its text, not
// encoded again. Parse owns payload (split decoded it) and nothing
// writes to it afterwards, which is Borrow's condition; the Document's
// strings keep it alive, about the size of the copy OneCopy made.
func payloadTree(payload []byte, canonical bool) (*pohjson.Value, error) {
	v, err := pohjson.ParseWith(payload, pohjson.ParseOptions{MaxBytes: MaxJWSBytes, MaxDepth: 8, Canonical: canonical, Borrow: canonical})
	if errors.Is(err, pohjson.ErrNotCanonical) {
		return nil, errNotCanonical
	}
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if v.Kind() != pohjson.Object {
		return nil, fmt.Errorf("%w: payload is not an object", ErrMalformed)
	}
	ms := v.Members()
	if len(ms) == 0 || ms[0].Key != "evidence_version" {
		return nil, fmt.Errorf("%w: evidence_version must be the first payload member", ErrMalformed)
	}
	if s, ok := ms[0].Value.Str(); !ok || s != version {
		return nil, fmt.Errorf("%w: evidence_version is not %q", ErrUnsupported, version)
	}
	return v, nil
}

// fromWire validates a decoded payload and converts it.
func fromWire(w *wirePayload) (*Document, error) {
	d := &Document{Kind: w.Kind, AttesterDID: w.AttesterDID}
	if _, err := didkey.Parse(w.AttesterDID); err != nil {
		return nil, fmt.Errorf("%w: attester_did: %v", ErrMalformed, err)
	}
	// issued_at is exactly what poh.FormatTime writes: RFC 3339 UTC with
	// milliseconds, as JavaScript's Date.prototype.toISOString writes it.
	t, err := time.Parse(time.RFC3339, w.IssuedAt)
	if err != nil || poh.FormatTime(t) != w.IssuedAt {
		return nil, fmt.Errorf("%w: issued_at must be %s", ErrMalformed, "YYYY-MM-DDTHH:MM:SS.mmmZ")
	}
	d.IssuedAt = t
	if d.Nonce, err = b64u.DecodeHash(w.NonceB64u); err != nil {
		return nil, fmt.Errorf("%w: nonce_b64u: %v", ErrMalformed, err)
	}
	switch w.Kind {
	case KindExecution:
		if w.Execution == nil || w.Key != nil {
			return nil, fmt.Errorf("%w: an execution_attestation document has exactly an execution context", ErrMalformed)
		}
		c := *w.Execution
		if err := checkExecution(&c, d.Nonce); err != nil {
			return nil, err
		}
		d.Execution = &c
	case KindKey:
		if w.Key == nil || w.Execution != nil {
			return nil, fmt.Errorf("%w: a key_attestation document has exactly a key context", ErrMalformed)
		}
		c := *w.Key
		if err := checkKey(&c, d.Nonce); err != nil {
			return nil, err
		}
		d.Key = &c
	default:
		return nil, fmt.Errorf("%w: kind %q", ErrUnsupported, safetext.Clip(w.Kind, 64))
	}
	if err := checkItemOrder(w.Evidence); err != nil {
		return nil, err
	}
	for i := range w.Evidence {
		it, err := itemFromWire(&w.Evidence[i])
		if err != nil {
			return nil, fmt.Errorf("evidence[%d]: %w", i, err)
		}
		d.Items = append(d.Items, it)
	}
	return d, nil
}

func checkExecution(c *ExecutionContext, nonce [32]byte) error {
	if c.Context != ExecutionContextLabel {
		return fmt.Errorf("%w: execution context %q", ErrUnsupported, safetext.Clip(c.Context, 64))
	}
	if err := checkText("attestation_id", c.AttestationID, 1, MaxIDBytes); err != nil {
		return err
	}
	if len(c.AgentDID) > MaxIDBytes || !didkey.ValidSyntax(c.AgentDID) {
		return fmt.Errorf("%w: agent_did is not a did:key or did:web", ErrMalformed)
	}
	if err := checkText("run_id", c.RunID, 1, MaxIDBytes); err != nil {
		return err
	}
	if err := checkHash("proof_bundle_hash_b64u", c.ProofBundleHashB64u); err != nil {
		return err
	}
	want, err := poh.NonceBinding(c.AgentDID, c.RunID, c.ProofBundleHashB64u)
	if err != nil {
		return fmt.Errorf("%w: nonce binding: %v", ErrMalformed, err)
	}
	if want != nonce {
		return fmt.Errorf("%w: nonce_b64u is not the PoH nonce binding of the execution context", ErrInconsistent)
	}
	return CheckCommitments(&c.Clawea)
}

// CheckCommitments validates a Commitments object: version, digests, count,
// model identity and its digest, and the members of its version (v1: no
// admission member; v2: sensitive present, and true only with an admission
// policy hash; v3: isolation; v4: gateway, isolation optional). Another version is refused (ErrUnsupported).
func CheckCommitments(c *Commitments) error {
	switch c.Version {
	case CommitmentsVersionV1:
		if c.AdmissionPolicyHashB64u != "" || c.Sensitive != SensitiveAbsent {
			return fmt.Errorf("%w: a %s commitment has no admission_policy_hash_b64u or sensitive member", ErrMalformed, CommitmentsVersionV1)
		}
	case CommitmentsVersionV2, CommitmentsVersionV3, CommitmentsVersionV4:
		if c.Sensitive != SensitiveFalse && c.Sensitive != sensitiveTrue {
			return fmt.Errorf("%w: sensitive is required in %s", ErrMalformed, c.Version)
		}
		if c.AdmissionPolicyHashB64u != "" {
			if err := checkHash("admission_policy_hash_b64u", c.AdmissionPolicyHashB64u); err != nil {
				return err
			}
		} else if c.Sensitive == sensitiveTrue {
			return fmt.Errorf("%w: sensitive is true without admission_policy_hash_b64u", ErrInconsistent)
		}
	default:
		return fmt.Errorf("%w: clawea_version %q", ErrUnsupported, safetext.Clip(c.Version, 64))
	}
	for _, f := range []struct{ name, v string }{
		{"system_prompt_hash_b64u", c.SystemPromptHashB64u},
		{"system_prompt_report_hash_b64u", c.SystemPromptReportHashB64u},
		{"prompt_pack_ciphertext_hash_b64u", c.PromptPackCiphertextHashB64u},
		{"gate_policy_hash_b64u", c.GatePolicyHashB64u},
		{"model_identity_digest_b64u", c.ModelIdentityDigestB64u},
	} {
		if err := checkHash(f.name, f.v); err != nil {
			return err
		}
	}
	if err := checkAuditHead(c.GateAuditRootB64u, c.GateAuditCount); err != nil {
		return err
	}
	if err := checkIsolationMember(c); err != nil {
		return err
	}
	if err := checkGatewayMember(c); err != nil {
		return err
	}
	digest, err := c.ModelIdentity.Digest()
	if err != nil {
		return err
	}
	if digest != c.ModelIdentityDigestB64u {
		return fmt.Errorf("%w: model_identity_digest_b64u does not match model_identity", ErrInconsistent)
	}
	return nil
}

func checkKey(c *KeyContext, nonce [32]byte) error {
	if c.Context != KeyContextLabel {
		return fmt.Errorf("%w: key context %q", ErrUnsupported, safetext.Clip(c.Context, 64))
	}
	if len(c.ChallengeB64u) > (MaxChallengeBytes*4+2)/3 {
		return fmt.Errorf("%w: challenge over %d bytes", ErrTooLarge, MaxChallengeBytes)
	}
	challenge, err := b64u.Decode(c.ChallengeB64u)
	if err != nil {
		return fmt.Errorf("%w: challenge_b64u: %v", ErrMalformed, err)
	}
	want, err := KeyNonce(challenge)
	if err != nil {
		return err
	}
	if want != nonce {
		return fmt.Errorf("%w: nonce_b64u is not the key-attestation nonce of the challenge", ErrInconsistent)
	}
	if c.RecipientX25519B64u != "" {
		r, err := b64u.Decode(c.RecipientX25519B64u)
		if err != nil || len(r) != 32 {
			return fmt.Errorf("%w: recipient_x25519_b64u must be 32 bytes", ErrMalformed)
		}
	}
	return nil
}

// Simulated reports whether any evidence item is marked simulated.
func (d *Document) Simulated() bool {
	for _, it := range d.Items {
		if it.Evidence.Simulated {
			return true
		}
	}
	return false
}

func decodeBounded(field, s string, min, max int) ([]byte, error) {
	if len(s) > (max*4+2)/3 {
		return nil, fmt.Errorf("%w: %s over %d bytes", ErrTooLarge, field, max)
	}
	b, err := b64u.Decode(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, field, err)
	}
	if len(b) < min {
		return nil, fmt.Errorf("%w: %s is %d bytes, minimum %d", ErrMalformed, field, len(b), min)
	}
	return b, nil
}

// checkItemOrder checks the number of items and that CPU evidence (1 to
// maxEvidence items) comes first, GPU evidence (0 to maxGPUItems) after.
func checkItemOrder(items []wireEvidence) error {
	cpu, gpu := 0, 0
	for i := range items {
		if platformRules[items[i].Platform].gpu {
			gpu++
			continue
		}
		if gpu > 0 {
			return fmt.Errorf("%w: evidence[%d]: cpu evidence after gpu evidence", ErrMalformed, i)
		}
		cpu++
	}
	if cpu == 0 || cpu > maxEvidence {
		return fmt.Errorf("%w: %d cpu evidence items, want 1..%d", ErrMalformed, cpu, maxEvidence)
	}
	if gpu > maxGPUItems {
		return fmt.Errorf("%w: %d gpu evidence items, limit %d", ErrMalformed, gpu, maxGPUItems)
	}
	return nil
}

func itemFromWire(w *wireEvidence) (Item, error) {
	rule, ok := platformRules[w.Platform]
	if !ok {
		return Item{}, fmt.Errorf("%w: platform %q", ErrUnsupported, safetext.Clip(w.Platform, 64))
	}
	if w.Format != rule.format {
		return Item{}, fmt.Errorf("%w: format %q for platform %s", ErrUnsupported, safetext.Clip(w.Format, 64), w.Platform)
	}
	ev := &evidence.Evidence{Platform: w.Platform, Simulated: w.Simulated, Format: w.Format}
	var err error
	if ev.Blob, err = decodeBounded("blob_b64u", w.BlobB64u, 1, maxBlobBytes); err != nil {
		return Item{}, err
	}
	switch {
	case rule.signature && w.SignatureB64u == "":
		return Item{}, fmt.Errorf("%w: %s evidence needs signature_b64u", ErrMalformed, w.Platform)
	case !rule.signature && w.SignatureB64u != "":
		return Item{}, fmt.Errorf("%w: %s evidence has no detached signature", ErrMalformed, w.Platform)
	case rule.signature:
		if ev.Signature, err = decodeBounded("signature_b64u", w.SignatureB64u, 1, maxSignatureBytes); err != nil {
			return Item{}, err
		}
	}
	if limit := certLimit(rule); len(w.CertChainB64u) > limit {
		return Item{}, fmt.Errorf("%w: %d certificates, limit %d", ErrMalformed, len(w.CertChainB64u), limit)
	}
	for i, c := range w.CertChainB64u {
		der, err := decodeBounded(fmt.Sprintf("cert_chain_b64u[%d]", i), c, 1, maxCertBytes)
		if err != nil {
			return Item{}, err
		}
		ev.CertChain = append(ev.CertChain, der)
	}
	if ev.Aux, err = decodeMap("aux_b64u", w.AuxB64u, rule.aux, maxAuxBytes); err != nil {
		return Item{}, err
	}
	coll, err := decodeMap("collateral_b64u", w.CollateralB64u, rule.collateral, maxCollateralBytes)
	if err != nil {
		return Item{}, err
	}
	return Item{Evidence: ev, Collateral: coll}, nil
}

func certLimit(r platformRule) int {
	if r.gpu {
		return maxGPUCerts
	}
	return maxCerts
}

func decodeMap(field string, m map[string]string, allowed []string, max int) (map[string][]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(m))
	for k, s := range m {
		if !contains(allowed, k) {
			return nil, fmt.Errorf("%w: %s name %q is not defined for this platform", ErrMalformed, field, safetext.Clip(k, 64))
		}
		b, err := decodeBounded(field+"."+k, s, 1, max)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func encodeMap(m map[string][]byte) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = b64u.Encode(v)
	}
	return out
}

// toWire converts an unsigned document to its wire form.
func toWire(d *Document, did string) *wirePayload {
	w := &wirePayload{
		EvidenceVersion: version,
		Kind:            d.Kind,
		AttesterDID:     did,
		IssuedAt:        poh.FormatTime(d.IssuedAt),
		NonceB64u:       b64u.Encode(d.Nonce[:]),
		Execution:       d.Execution,
		Key:             d.Key,
	}
	for _, it := range d.Items {
		ev := it.Evidence
		if ev == nil {
			ev = &evidence.Evidence{}
		}
		we := wireEvidence{
			Platform:       ev.Platform,
			Simulated:      ev.Simulated,
			Format:         ev.Format,
			BlobB64u:       b64u.Encode(ev.Blob),
			AuxB64u:        encodeMap(ev.Aux),
			CollateralB64u: encodeMap(it.Collateral),
		}
		if len(ev.Signature) > 0 {
			we.SignatureB64u = b64u.Encode(ev.Signature)
		}
		for _, c := range ev.CertChain {
			we.CertChainB64u = append(we.CertChainB64u, b64u.Encode(c))
		}
		w.Evidence = append(w.Evidence, we)
	}
	return w
}

// wireFrom reads a payload tree into its wire form strictly: exactly the
// members of wirePayload, in wire order, each of its JSON type; ok is
// false otherwise. Together with the payload being the tree's
// JSON.stringify form, that accepts exactly the payloads that are the
// canonical encoding (pohjson.Marshal) of the wirePayload they decode to.
func wireFrom(v *pohjson.Value) (w *wirePayload, ok bool) {
	m := membersOf(v)
	w = &wirePayload{}
	w.EvidenceVersion = m.str("evidence_version")
	w.Kind = m.str("kind")
	w.AttesterDID = m.str("attester_did")
	w.IssuedAt = m.str("issued_at")
	w.NonceB64u = m.str("nonce_b64u")
	if c := m.take("execution"); c != nil {
		w.Execution, w.executionJSON, m.ok = contextFrom[ExecutionContext](c, m.ok)
	}
	if c := m.take("key"); c != nil {
		w.Key, w.keyJSON, m.ok = contextFrom[KeyContext](c, m.ok)
	}
	switch ev := m.take("evidence"); ev.Kind() {
	case pohjson.Null: // decodes to no items, which fromWire refuses
	case pohjson.Array:
		w.Evidence = make([]wireEvidence, len(ev.Elems()))
		for i, e := range ev.Elems() {
			m.ok = m.ok && readStruct(e, &w.Evidence[i])
		}
	default:
		m.ok = false
	}
	return w, m.done()
}

// contextFrom reads an evidence context object (readStruct) and returns
// it with its exact bytes (the payload being canonical, its JSON.stringify
// form). ok passes a failure through.
func contextFrom[T any](v *pohjson.Value, ok bool) (*T, []byte, bool) {
	c := new(T)
	if !ok || !readStruct(v, c) {
		return nil, nil, false
	}
	b, err := pohjson.Stringify(v)
	if err != nil {
		return nil, nil, false
	}
	return c, b, true
}

// readStruct reads an object into the struct dst points to, strictly, as
// encoding/json (and so pohjson.Marshal) writes that struct: its exported
// fields' json members in declaration order, each of the field's JSON
// type; an omitempty or omitzero member absent or non-empty, never null.
// The struct tags are thus the one declaration of a member for Sign and
// Parse alike. ok is false on any other member, order, type or form.
func readStruct[T any](v *pohjson.Value, dst *T) bool {
	m := membersOf(v)
	s := reflect.ValueOf(dst).Elem()
	for i := range s.NumField() {
		f := s.Type().Field(i)
		name, opt, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		m.field(name, opt == "omitempty" || opt == "omitzero", s.Field(i))
	}
	return m.done()
}

// field reads member key into f, of one of the types the wire structs use.
func (m *members) field(key string, optional bool, f reflect.Value) {
	if optional && (len(m.ms) == 0 || m.ms[0].Key != key) {
		return // an optional member is absent
	}
	switch p := f.Addr().Interface().(type) {
	case *string:
		if *p = m.str(key); optional && *p == "" {
			m.ok = false
		}
	case *int64:
		*p = m.integer(key)
	case *bool:
		*p = m.boolean(key)
	case *sensitivity:
		*p = SensitivityOf(m.boolean(key))
	case *[]string:
		*p = m.optStrings(key)
	case *map[string]string:
		*p = m.optMap(key)
	case *[]int64:
		*p = m.integers(key)
	case *ModelIdentity:
		m.ok = m.ok && readStruct(m.take(key), p)
	case *Commitments:
		m.ok = m.ok && readStruct(m.take(key), p)
	case **Isolation:
		*p = new(Isolation)
		m.ok = m.ok && readStruct(m.take(key), *p)
	case **GatewayRecord:
		*p = new(GatewayRecord)
		m.ok = m.ok && readStruct(m.take(key), *p)
	default:
		panic("evidencedoc: no wire reader for " + f.Type().String())
	}
}

// members reads an object's members in order, as encoding/json writes a
// struct: each read takes the next member when it has the expected name.
// Any mismatch clears ok; done also demands that nothing is left. It is
// not a schema/confdoc declaration because confdoc reads members by name
// in any order, while a signed payload must be exactly its canonical
// encoding: member order, empty optional members left out and map key
// order are what this reader checks, in the same pass.
type members struct {
	ms []pohjson.Member
	ok bool
}

// membersOf reads the members of v, which must be an object.
func membersOf(v *pohjson.Value) members {
	return members{ms: v.Members(), ok: v.Kind() == pohjson.Object}
}

func (m *members) done() bool { return m.ok && len(m.ms) == 0 }

// take returns the next member's value when it is named key, else nil.
func (m *members) take(key string) *pohjson.Value {
	if len(m.ms) == 0 || m.ms[0].Key != key {
		return nil
	}
	v := m.ms[0].Value
	m.ms = m.ms[1:]
	return v
}

// str reads a string member that encoding/json always writes.
func (m *members) str(key string) string { return read(m, key, (*pohjson.Value).Str) }

// integer reads an int64 member (the parser admits only safe integers).
func (m *members) integer(key string) int64 { return read(m, key, (*pohjson.Value).Int) }

func (m *members) boolean(key string) bool { return read(m, key, (*pohjson.Value).Bool) }

// read takes the member named key with get, which fails on a missing
// member (a nil *pohjson.Value) or one of another JSON type.
func read[T any](m *members, key string, get func(*pohjson.Value) (T, bool)) T {
	x, ok := get(m.take(key))
	m.ok = m.ok && ok
	return x
}

// integers reads a []int64 member that encoding/json always writes: an
// array of integers (a nil slice, written null, is refused).
func (m *members) integers(key string) []int64 {
	v := m.take(key)
	m.ok = m.ok && v.Kind() == pohjson.Array
	var out []int64
	for _, e := range v.Elems() {
		n, ok := e.Int()
		m.ok = m.ok && ok
		out = append(out, n)
	}
	return out
}

// optStrings reads an omitempty []string member: absent, or a non-empty
// array of strings.
func (m *members) optStrings(key string) []string {
	v := m.take(key)
	if v == nil {
		return nil
	}
	es := v.Elems()
	m.ok = m.ok && v.Kind() == pohjson.Array && len(es) > 0
	out := make([]string, len(es))
	for i, e := range es {
		var ok bool
		out[i], ok = e.Str()
		m.ok = m.ok && ok
	}
	return out
}

// optMap reads an omitempty map[string]string member: absent, or a
// non-empty object of strings whose keys are in the order
// pohjson.Marshal writes a Go map (sorted, then JavaScript property
// order).
func (m *members) optMap(key string) map[string]string {
	v := m.take(key)
	if v == nil {
		return nil
	}
	ms := v.Members()
	m.ok = m.ok && v.Kind() == pohjson.Object && len(ms) > 0
	out := make(map[string]string, len(ms))
	keys := make([]string, len(ms))
	for i, mm := range ms {
		s, ok := mm.Value.Str()
		m.ok = m.ok && ok
		out[mm.Key], keys[i] = s, mm.Key
	}
	m.ok = m.ok && len(out) == len(ms) // no duplicate keys
	sorted := slices.Sorted(maps.Keys(out))
	for i, j := range jsstr.PropertyOrder(sorted) {
		m.ok = m.ok && sorted[j] == keys[i]
	}
	return out
}
