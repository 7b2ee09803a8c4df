package poh

import (
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// Envelope constants.
const (
	envelopeVersion = "1"
	algorithm       = "Ed25519"
	hashAlgorithm   = "SHA-256"
)

// Envelope types this package knows, each with its envelope schema.
const (
	TypeProofBundle          = "proof_bundle"
	TypeGatewayReceipt       = "gateway_receipt"
	TypeExecutionAttestation = "execution_attestation"
	typeToolReceipt          = "tool_receipt"
)

// IDs of the envelope schemas (embedded in schema/schemas) that only this
// package validates against.
const (
	proofBundleEnvelopeV1    = "https://schemas.clawbureau.org/claw.poh.proof_bundle_envelope.v1.json"
	gatewayReceiptEnvelopeV1 = "https://schemas.clawbureau.org/claw.poh.gateway_receipt_envelope.v1.json"
	toolReceiptEnvelopeV1ID  = "https://schemas.clawbureau.com/poh/tool_receipt_envelope.v1.json"
)

var envelopeSchemas = map[string]string{
	TypeProofBundle:          proofBundleEnvelopeV1,
	TypeGatewayReceipt:       gatewayReceiptEnvelopeV1,
	TypeExecutionAttestation: schemas.ExecutionAttestationEnvelopeV1,
	typeToolReceipt:          toolReceiptEnvelopeV1ID,
}

// envelopeFields are the SignedEnvelope members in PoH emitted order.
var envelopeFields = []string{
	"envelope_version", "envelope_type", "payload", "payload_hash_b64u",
	"hash_algorithm", "signature_b64u", "algorithm", "signer_did", "issued_at",
}

// MaxEnvelopeBytes bounds an envelope accepted by Verify.
const MaxEnvelopeBytes = 8 << 20

// timeFormat is how this package writes timestamps: RFC 3339 in UTC with
// milliseconds, as JavaScript's Date.prototype.toISOString does.
const timeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime formats t as JavaScript's toISOString.
func FormatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// Sign builds a SignedEnvelope of the given type around payload and signs it
// with key, an Ed25519 signer (an ed25519.PrivateKey, or a signer over
// sealed memory: sealed.Ed25519Signer). It returns the envelope as compact
// JSON in PoH emitted order.
func Sign(envelopeType string, payload *pohjson.Value, key crypto.Signer, issuedAt time.Time) ([]byte, error) {
	if _, ok := envelopeSchemas[envelopeType]; !ok {
		return nil, fail(UnknownEnvelopeType, "envelope_type", "unknown envelope type %q", envelopeType)
	}
	pub, err := SignerKey(key)
	if err != nil {
		return nil, err
	}
	hash, err := pohjson.Hash(payload)
	if err != nil {
		return nil, fmt.Errorf("poh: payload: %w", err)
	}
	sig, err := key.Sign(nil, []byte(hash), crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("poh: sign: %w", err)
	}
	env := pohjson.NewObject(
		pohjson.M("envelope_version", pohjson.NewString(envelopeVersion)),
		pohjson.M("envelope_type", pohjson.NewString(envelopeType)),
		pohjson.M("payload", payload),
		pohjson.M("payload_hash_b64u", pohjson.NewString(hash)),
		pohjson.M("hash_algorithm", pohjson.NewString(hashAlgorithm)),
		pohjson.M("signature_b64u", pohjson.NewString(b64u.Encode(sig))),
		pohjson.M("algorithm", pohjson.NewString(algorithm)),
		pohjson.M("signer_did", pohjson.NewString(didkey.Format(pub))),
		pohjson.M("issued_at", pohjson.NewString(FormatTime(issuedAt))),
	)
	return pohjson.Stringify(env)
}

// errNotEd25519 refuses a signing key that is not an Ed25519 key.
var errNotEd25519 = errors.New("poh: the signing key is not an Ed25519 key")

// SignerKey returns the public key of s, an Ed25519 signer. It refuses a
// nil signer, a signer whose Public is not a 32-byte ed25519.PublicKey, and
// an ed25519.PrivateKey of the wrong length (whose Public would panic).
// Every signing function of the attester checks its key with it.
func SignerKey(s crypto.Signer) (ed25519.PublicKey, error) {
	if k, ok := s.(ed25519.PrivateKey); s == nil || ok && len(k) != ed25519.PrivateKeySize {
		return nil, errNotEd25519
	}
	pub, ok := s.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, errNotEd25519
	}
	return pub, nil
}

// VerifyOptions select what Verify expects. The zero value accepts any known
// envelope type.
type VerifyOptions struct {
	// Type, when set, is the only envelope type accepted.
	Type string
	// PayloadCheck, when set, runs after schema validation and before the
	// hash and signature checks, as the PoH verifier's type-specific payload
	// checks do. It gets the payload and the (syntactically valid, not yet
	// verified) signer DID and returns a *Error.
	PayloadCheck func(payload *pohjson.Value, signerDID string) error
}

// Verified is an envelope that passed every check. Nothing in it is
// available before that.
type Verified struct {
	Type            string
	Payload         *pohjson.Value
	PayloadHashB64u string
	SignerDID       string
	SignerKey       ed25519.PublicKey
	IssuedAt        time.Time
}

// b64uChars is the base64url alphabet.
var b64uChars = charclass.Alnum().Or(charclass.Of("_-"))

// isB64uText reports whether s is a non-empty string of the base64url
// alphabet (^[A-Za-z0-9_-]+$, the envelope schemas' pattern).
func isB64uText(s string) bool { return s != "" && b64uChars.All(s) }

// parseTime parses an ISO 8601 / RFC 3339 date-time with a time zone.
func parseTime(s string) (time.Time, error) {
	if len(s) > 64 {
		return time.Time{}, errors.New("timestamp too long")
	}
	return time.Parse(time.RFC3339Nano, s)
}

// Verify checks a SignedEnvelope exactly as received, in the PoH verifier's
// order:
//
//  1. structure: JSON object with all nine envelope members (MALFORMED_ENVELOPE)
//  2. envelope_version (UNKNOWN_ENVELOPE_VERSION)
//  3. envelope_type, and the expected type (UNKNOWN_ENVELOPE_TYPE)
//  4. algorithm (UNKNOWN_ALGORITHM)
//  5. hash_algorithm (UNKNOWN_HASH_ALGORITHM)
//  6. signer_did syntax (INVALID_DID_FORMAT)
//  7. issued_at (MALFORMED_ENVELOPE)
//  8. payload_hash_b64u and signature_b64u alphabet (MALFORMED_ENVELOPE)
//  9. JSON Schema of the envelope type (SCHEMA_VALIDATION_FAILED)
//  10. type-specific payload checks (opts.PayloadCheck)
//  11. payload hash recomputed over the payload as received (HASH_MISMATCH)
//  12. signer key from did:key (INVALID_DID_FORMAT)
//  13. Ed25519 signature over the payload_hash_b64u string (SIGNATURE_INVALID)
func Verify(raw []byte, opts VerifyOptions) (*Verified, error) {
	if len(raw) > MaxEnvelopeBytes {
		return nil, fail(MalformedEnvelope, "", "envelope is %d bytes, limit %d", len(raw), MaxEnvelopeBytes)
	}
	// OneCopy: one copy of raw holds the strings, and a payload received in
	// its JSON.stringify form is hashed as received (step 11) instead of
	// being encoded again (pohjson.Hash).
	env, err := pohjson.ParseWith(raw, pohjson.ParseOptions{MaxBytes: MaxEnvelopeBytes, OneCopy: true})
	if err != nil {
		return nil, fail(MalformedEnvelope, "", "not acceptable JSON: %v", err)
	}
	return verifyValue(env, opts, true)
}

// verifyParsed is Verify for an envelope already parsed (for example a
// receipt nested in a proof bundle).
func verifyParsed(env *pohjson.Value, opts VerifyOptions) (*Verified, error) {
	return verifyValue(env, opts, false)
}

// verifyValue checks env, parsed strictly from bytes when fromBytes; a
// value built otherwise must also have a JSON.stringify form.
func verifyValue(env *pohjson.Value, opts VerifyOptions, fromBytes bool) (*Verified, error) {
	// 1. structure
	if env.Kind() != pohjson.Object {
		return nil, fail(MalformedEnvelope, "", "envelope is a JSON %s, want an object", env.Kind())
	}
	for _, f := range envelopeFields {
		if !env.Has(f) {
			return nil, fail(MalformedEnvelope, f, "missing required envelope field")
		}
	}
	str := func(f string) string { s, _ := env.GetString(f); return s }
	isStr := func(f string) bool { _, ok := env.GetString(f); return ok }

	// 2. version
	if !isStr("envelope_version") || str("envelope_version") != envelopeVersion {
		return nil, fail(UnknownEnvelopeVersion, "envelope_version", "envelope version is not in the allowlist")
	}
	// 3. type
	typ := str("envelope_type")
	schemaID, known := envelopeSchemas[typ]
	if !isStr("envelope_type") || !known {
		return nil, fail(UnknownEnvelopeType, "envelope_type", "envelope type is not in the allowlist")
	}
	if opts.Type != "" && typ != opts.Type {
		return nil, fail(UnknownEnvelopeType, "envelope_type", "expected a %s envelope, got %s", opts.Type, typ)
	}
	// 4, 5. algorithms
	if !isStr("algorithm") || str("algorithm") != algorithm {
		return nil, fail(unknownAlgorithm, "algorithm", "signature algorithm is not in the allowlist")
	}
	if !isStr("hash_algorithm") || str("hash_algorithm") != hashAlgorithm {
		return nil, fail(unknownHashAlgorithm, "hash_algorithm", "hash algorithm is not in the allowlist")
	}
	// 6. signer DID syntax
	signer := str("signer_did")
	if !isStr("signer_did") || !didkey.ValidSyntax(signer) {
		return nil, fail(InvalidDIDFormat, "signer_did", "signer DID does not match did:key:... or did:web:...")
	}
	// 7. issued_at
	issuedAt, err := parseTime(str("issued_at"))
	if !isStr("issued_at") || err != nil {
		return nil, fail(MalformedEnvelope, "issued_at", "issued_at must be an RFC 3339 date-time")
	}
	// 8. b64u fields
	for _, f := range []string{"payload_hash_b64u", "signature_b64u"} {
		if !isStr(f) || !isB64uText(str(f)) {
			return nil, fail(MalformedEnvelope, f, "must be a base64url string")
		}
	}
	// 9. schema
	if !fromBytes {
		if _, err = pohjson.Stringify(env); err != nil {
			return nil, fail(MalformedEnvelope, "", "envelope cannot be serialized: %v", err)
		}
	}
	if err := schemas.ValidateValue(schemaID, env); err != nil {
		if ve, ok := errors.AsType[*schemas.ValidationError](err); ok {
			return nil, fail(SchemaValidationFailed, ve.Location, "%s", ve.Msg)
		}
		return nil, fail(SchemaValidationFailed, "", "%v", err)
	}
	payload := env.Get("payload")
	// 10. payload checks
	if opts.PayloadCheck != nil {
		if err := opts.PayloadCheck(payload, signer); err != nil {
			return nil, err
		}
	}
	// 11. hash over the payload exactly as received
	hash, err := pohjson.Hash(payload)
	if err != nil {
		return nil, fail(HashMismatch, "payload", "payload hash cannot be computed: %v", err)
	}
	if hash != str("payload_hash_b64u") {
		return nil, fail(HashMismatch, "payload_hash_b64u", "computed payload hash does not match the envelope")
	}
	// 12. signer key
	pub, err := didkey.Parse(signer)
	if err != nil {
		return nil, fail(InvalidDIDFormat, "signer_did", "cannot extract an Ed25519 key from the signer DID")
	}
	// 13. signature
	sig, err := b64u.Decode(str("signature_b64u"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fail(SignatureInvalid, "signature_b64u", "signature is not a canonical 64-byte Ed25519 signature")
	}
	if !ed25519.Verify(pub, []byte(hash), sig) {
		return nil, fail(SignatureInvalid, "signature_b64u", "the Ed25519 signature does not match the payload hash")
	}
	return &Verified{
		Type:            typ,
		Payload:         payload,
		PayloadHashB64u: hash,
		SignerDID:       signer,
		SignerKey:       pub,
		IssuedAt:        issuedAt,
	}, nil
}
