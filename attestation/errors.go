package attestation

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/poh"
)

// Errors. Every error returned by this package wraps one of them.
var (
	// errConfig: the Issuer is misconfigured (no key, no quoter, a bad
	// recipient key).
	errConfig = errors.New("attestation: issuer misconfigured")
	// ErrInput: the caller's input is invalid (bad hash, DID, id, model
	// identity or challenge).
	ErrInput = errors.New("attestation: invalid input")
	// errBundle: the proof bundle was rejected. The error is a *BundleError
	// carrying the PoH reason code, so errors.Is(err, poh.SignatureInvalid)
	// and errors.Is(err, poh.PromptCommitmentMismatch) work.
	errBundle = errors.New("attestation: proof bundle rejected")
	// errQuote: the platform could not produce evidence.
	errQuote = errors.New("attestation: quote failed")
	// errEvidence: the platform returned evidence this package cannot use
	// (unknown platform or format, or it does not commit to the requested
	// REPORT_DATA).
	errEvidence = errors.New("attestation: unusable platform evidence")
)

// BundleError is a rejected proof bundle: the PoH reason code, the field it
// concerns (a JSON path in the bundle envelope, may be empty) and a message
// safe to show to anyone.
type BundleError struct {
	Code  poh.Code
	Field string
	Msg   string
}

func (e *BundleError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("attestation: proof bundle rejected: %s: %s: %s", e.Code, e.Field, e.Msg)
	}
	return fmt.Sprintf("attestation: proof bundle rejected: %s: %s", e.Code, e.Msg)
}

// Unwrap returns errBundle and the PoH code.
func (e *BundleError) Unwrap() []error { return []error{errBundle, e.Code} }
