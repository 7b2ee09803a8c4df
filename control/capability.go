package control

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/clawea/attester/schema/b64u"
)

// Capability text form: "clawea-cap-v1." and 43 characters of b64u (32
// random bytes).
const (
	capPrefix = "clawea-cap-v1."
	capBytes  = 32
)

// newCapability returns a fresh capability and the SHA-256 the run keeps.
func newCapability() (string, [32]byte, error) {
	var b [capBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [32]byte{}, err
	}
	return capPrefix + b64u.Encode(b[:]), sha256.Sum256(b[:]), nil
}

// errNoCredential refuses a request without a well-formed run capability.
var errNoCredential = &Error{kind: kindUnauthenticated, Msg: "a run capability is required: Authorization: Bearer clawea-cap-v1.<43 b64u characters>"}

// bearerCapability returns the hash the run store compares for the
// capability in an Authorization header ("Bearer clawea-cap-v1.<43 b64u
// characters>", the scheme in any case). Only the syntax is checked; the
// error is a 401 refusal.
func bearerCapability(authorization string) ([32]byte, error) {
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return [32]byte{}, errNoCredential
	}
	return capabilityHash(tok)
}

// capabilityHash returns the hash the run store compares for the capability tok.
// Only the syntax is checked; the error is errNoCredential.
func capabilityHash(tok string) ([32]byte, error) {
	rest, ok := strings.CutPrefix(tok, capPrefix)
	if !ok || len(rest) != 43 {
		return [32]byte{}, errNoCredential
	}
	raw, err := b64u.Decode(rest)
	if err != nil || len(raw) != capBytes {
		return [32]byte{}, errNoCredential
	}
	return sha256.Sum256(raw), nil
}

// capEqual compares capability hashes in constant time.
func capEqual(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }
