// Package poh implements the Proof-of-Harness (PoH) signed-envelope rules:
// building and signing envelopes, verifying them in the same order and with
// the same reason codes as the PoH verifier (clawverify), the TEE nonce
// binding, event-chain header hashing and proof-bundle checks.
//
// The normative rules are in docs/spec/hashing-and-envelopes.md.
package poh

import "fmt"

// Code is a PoH reason code. Codes are errors so that callers can write
// errors.Is(err, poh.SignatureInvalid).
type Code string

// The PoH reason codes, reused verbatim.
const (
	MalformedEnvelope        Code = "MALFORMED_ENVELOPE"
	UnknownEnvelopeVersion   Code = "UNKNOWN_ENVELOPE_VERSION"
	UnknownEnvelopeType      Code = "UNKNOWN_ENVELOPE_TYPE"
	unknownAlgorithm         Code = "UNKNOWN_ALGORITHM"
	unknownHashAlgorithm     Code = "UNKNOWN_HASH_ALGORITHM"
	SchemaValidationFailed   Code = "SCHEMA_VALIDATION_FAILED"
	InvalidDIDFormat         Code = "INVALID_DID_FORMAT"
	DependencyNotConfigured  Code = "DEPENDENCY_NOT_CONFIGURED"
	ClaimNotFound            Code = "CLAIM_NOT_FOUND"
	SignatureInvalid         Code = "SIGNATURE_INVALID"
	HashMismatch             Code = "HASH_MISMATCH"
	Revoked                  Code = "REVOKED"
	EvidenceMismatch         Code = "EVIDENCE_MISMATCH"
	MissingRequiredField     Code = "MISSING_REQUIRED_FIELD"
	Expired                  Code = "EXPIRED"
	PromptCommitmentMismatch Code = "PROMPT_COMMITMENT_MISMATCH"
	ReceiptBindingMismatch   Code = "RECEIPT_BINDING_MISMATCH"
	HashChainBreak           Code = "HASH_CHAIN_BREAK"
)

func (c Code) Error() string { return string(c) }

// Error is a verification failure: a reason code, the field it concerns
// (JSON path, may be empty) and a message safe to show to anyone.
type Error struct {
	Code  Code
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("poh: %s: %s: %s", e.Code, e.Field, e.Msg)
	}
	return fmt.Sprintf("poh: %s: %s", e.Code, e.Msg)
}

// Unwrap returns the Code, so errors.Is matches it.
func (e *Error) Unwrap() error { return e.Code }

func fail(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Msg: fmt.Sprintf(format, args...)}
}
