package gate

import (
	"crypto/sha256"
	"fmt"
	"log/slog"

	"github.com/clawea/attester/schema/b64u"
)

const redacted = "[REDACTED]"

// secretText holds a configured secret (webhook HMAC secret, header value, bot
// token). Every formatting path (fmt verbs, String, GoString, JSON, slog)
// prints "[REDACTED]"; the value is only used by the verifiers.
type secretText struct{ v string }

// newSecret wraps s.
func newSecret(s string) secretText { return secretText{v: s} }

// isSet reports whether the secret is non-empty.
func (s secretText) isSet() bool { return s.v != "" }

func (s secretText) value() string { return s.v }

// String implements fmt.Stringer.
func (secretText) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (secretText) GoString() string { return redacted }

// Format implements fmt.Formatter for every verb.
func (secretText) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON never emits the value.
func (secretText) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue implements slog.LogValuer.
func (secretText) LogValue() slog.Value { return slog.StringValue(redacted) }

// secretCommitmentLabel domain-separates secret commitments in the policy hash.
const secretCommitmentLabel = "clawea.gate.secret-commitment.v1"

// commitment returns b64u(SHA-256(label || 0x00 || value)), the form in which
// the policy hash commits to a secret (docs/spec/gate-v1.md). It reveals a
// low-entropy secret to a guessing attacker, so secrets must be random.
func (s secretText) commitment() string {
	h := sha256.New()
	h.Write([]byte(secretCommitmentLabel))
	h.Write([]byte{0})
	h.Write([]byte(s.v))
	return b64u.Encode(h.Sum(nil))
}
