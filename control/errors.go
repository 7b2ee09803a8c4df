package control

import (
	"fmt"
	"net/http"
)

// kind classifies a refusal; Error.Status maps each kind to the HTTP
// status that reports it (attester-api section 4).
type kind int

// The kinds of refusal. kindInternal is the zero value: an error that names
// no kind is an internal failure.
const (
	kindInternal        kind = iota // the attester failed (500)
	kindInvalid                     // the request is malformed (400)
	kindUnauthenticated             // no valid run capability (401)
	kindForbidden                   // the caller may not do this (403)
	kindNotFound                    // the attester has no such thing (404)
	kindConflict                    // the request conflicts with the run's state (409)
	kindGone                        // the run is closed (410)
	kindTooLarge                    // an input exceeds its limit (413)
	kindUnprocessable               // well formed but refused (422)
	kindTooMany                     // a per-run or per-attester rate or count is spent (429)
	kindUnavailable                 // the attester cannot serve this now (503)
)

// statuses is the HTTP status of each kind.
var statuses = [...]int{
	kindInternal:        http.StatusInternalServerError,
	kindInvalid:         http.StatusBadRequest,
	kindUnauthenticated: http.StatusUnauthorized,
	kindForbidden:       http.StatusForbidden,
	kindNotFound:        http.StatusNotFound,
	kindConflict:        http.StatusConflict,
	kindGone:            http.StatusGone,
	kindTooLarge:        http.StatusRequestEntityTooLarge,
	kindUnprocessable:   http.StatusUnprocessableEntity,
	kindTooMany:         http.StatusTooManyRequests,
	kindUnavailable:     http.StatusServiceUnavailable,
}

// Decoder reads a request's body into v, a pointer to the request type of
// the Service method it is given to (a struct whose json tags name the
// body's members). It is the surface's one strict reader (attester-api
// section 3: exact members, no duplicates, nothing after the object); its
// error is returned as it is, so the surface reports its own refusal.
type Decoder func(v any) error

// decodeAs reads the request of type T with decode.
func decodeAs[T any](decode Decoder) (*T, error) {
	req := new(T)
	return req, decode(req)
}

// Error is a refusal: Msg is safe to show the caller; Err carries the
// detail for the log only. Reason is an optional machine-readable code (a
// PoH reason code or an admission rule).
type Error struct {
	kind   kind
	Msg    string
	Reason string
	Err    error
	// RetryAfter, when > 0, is how many seconds until the request may
	// succeed (kindTooMany).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Msg, e.Err)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Status is the HTTP status that reports e (attester-api section 4); an
// unknown kind is an internal failure (500).
func (e *Error) Status() int {
	if e.kind < 0 || int(e.kind) >= len(statuses) {
		return http.StatusInternalServerError
	}
	return statuses[e.kind]
}

func refusal(k kind, msg string, err error) *Error { return &Error{kind: k, Msg: msg, Err: err} }
