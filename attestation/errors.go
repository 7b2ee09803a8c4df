package attestation

import "errors"

// Errors. Every error returned by this package wraps one of them.
var (
	// errConfig: the Issuer is misconfigured (no key, no quoter, a bad
	// recipient key).
	errConfig = errors.New("attestation: issuer misconfigured")
	// ErrInput: the caller's input is invalid (bad hash, DID, id, model
	// identity or challenge).
	ErrInput = errors.New("attestation: invalid input")
	// ErrBundle: the proof bundle was rejected. Where a rule of the PoH
	// verifier or of attestation-v1 section 5 refused it, the error also
	// wraps that rule's *poh.Error (reason code, field and a message safe
	// to show), so errors.Is(err, poh.SignatureInvalid) and
	// errors.AsType[*poh.Error] work.
	ErrBundle = errors.New("attestation: proof bundle rejected")
	// errQuote: the platform could not produce evidence.
	errQuote = errors.New("attestation: quote failed")
	// errEvidence: the platform returned evidence this package cannot use
	// (unknown platform or format, or it does not commit to the requested
	// REPORT_DATA).
	errEvidence = errors.New("attestation: unusable platform evidence")
)
