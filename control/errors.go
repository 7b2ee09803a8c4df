package control

import "fmt"

// Kind classifies a refusal for the surface that reports it (cmd/attester
// maps each kind to one HTTP status).
type Kind int

// The kinds of refusal. KindInternal is the zero value: an error that names
// no kind is an internal failure.
const (
	KindInternal        Kind = iota // the attester failed (500)
	KindInvalid                     // the request is malformed (400)
	KindUnauthenticated             // no valid run capability (401)
	KindForbidden                   // the caller may not do this (403)
	KindNotFound                    // the attester has no such thing (404)
	KindConflict                    // the request conflicts with the run's state (409)
	KindGone                        // the run is closed (410)
	KindTooLarge                    // an input exceeds its limit (413)
	KindUnprocessable               // well formed but refused (422)
	KindTooMany                     // a per-run or per-attester rate or count is spent (429)
	KindUnavailable                 // the attester cannot serve this now (503)
)

// Error is a refusal: Msg is safe to show the caller; Err carries the
// detail for the log only. Reason is an optional machine-readable code (a
// PoH reason code or an admission rule).
type Error struct {
	Kind   Kind
	Msg    string
	Reason string
	Err    error
	// RetryAfter, when > 0, is how many seconds until the request may
	// succeed (KindTooMany).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

func refusal(k Kind, msg string, err error) *Error { return &Error{Kind: k, Msg: msg, Err: err} }
