package gate

import (
	"crypto/sha256"
	"fmt"
	"log/slog"

	"github.com/clawea/attester/schema/b64u"
)

const redacted = "[REDACTED]"

// Secret holds a configured secret (webhook HMAC secret, header value, bot
// token). Every formatting path (fmt verbs, String, GoString, JSON, slog)
// prints "[REDACTED]"; the value is only used by the verifiers.
type Secret struct{ v string }

// newSecret wraps s.
func newSecret(s string) Secret { return Secret{v: s} }

// isSet reports whether the secret is non-empty.
func (s Secret) isSet() bool { return s.v != "" }

func (s Secret) value() string { return s.v }

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return redacted }

// Format implements fmt.Formatter for every verb.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON never emits the value.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// secretCommitmentLabel domain-separates secret commitments in the policy hash.
const secretCommitmentLabel = "clawea.gate.secret-commitment.v1"

// commitment returns b64u(SHA-256(label || 0x00 || value)), the form in which
// the policy hash commits to a secret (docs/spec/gate-v1.md). It reveals a
// low-entropy secret to a guessing attacker, so secrets must be random.
func (s Secret) commitment() string {
	h := sha256.New()
	h.Write([]byte(secretCommitmentLabel))
	h.Write([]byte{0})
	h.Write([]byte(s.v))
	return b64u.Encode(h.Sum(nil))
}
