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

// ErrNoCredential refuses a request without a well-formed run capability.
var ErrNoCredential = &Error{kind: kindUnauthenticated, Msg: "a run capability is required: Authorization: Bearer clawea-cap-v1.<43 b64u characters>"}

// CapabilityHash returns the hash Authorize takes for the capability tok.
// Only the syntax is checked; the error is ErrNoCredential.
func CapabilityHash(tok string) ([32]byte, error) {
	rest, ok := strings.CutPrefix(tok, capPrefix)
	if !ok || len(rest) != 43 {
		return [32]byte{}, ErrNoCredential
	}
	raw, err := b64u.Decode(rest)
	if err != nil || len(raw) != capBytes {
		return [32]byte{}, ErrNoCredential
	}
	return sha256.Sum256(raw), nil
}

// capEqual compares capability hashes in constant time.
func capEqual(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }
