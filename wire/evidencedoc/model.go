package evidencedoc

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/safetext"
)

// modelIdentityVersion is the model_identity_version of a ModelIdentity.
const modelIdentityVersion = "clawea.dev/model-identity/v1"

// ModelIdentity names the model a run used: provider, model and an optional
// revision, as configured for the run. It is a claim by the attester, not a
// measurement of weights (docs/spec/attestation-v1.md, "Model identity").
// Field order is the wire order.
type ModelIdentity struct {
	Version  string `json:"model_identity_version"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Revision string `json:"revision,omitempty"`
}

// NewModelIdentity returns a ModelIdentity with the current version after
// checking its fields.
func NewModelIdentity(provider, model, revision string) (ModelIdentity, error) {
	m := ModelIdentity{Version: modelIdentityVersion, Provider: provider, Model: model, Revision: revision}
	if err := m.check(); err != nil {
		return ModelIdentity{}, err
	}
	return m, nil
}

func (m ModelIdentity) check() error {
	if m.Version != modelIdentityVersion {
		return fmt.Errorf("%w: model_identity_version %q", ErrUnsupported, safetext.Clip(m.Version, 64))
	}
	if err := checkText("model_identity.provider", m.Provider, 1, maxProviderBytes); err != nil {
		return err
	}
	if err := checkText("model_identity.model", m.Model, 1, maxModelBytes); err != nil {
		return err
	}
	return checkText("model_identity.revision", m.Revision, 0, maxRevisionBytes)
}

// Digest returns b64u(SHA-256(JCS(m))): the value of
// measurements.model_weights_digest_b64u.
func (m ModelIdentity) Digest() (string, error) {
	if err := m.check(); err != nil {
		return "", err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("%w: model identity: %v", ErrMalformed, err)
	}
	h, err := jcs.Hash(raw)
	if err != nil {
		return "", fmt.Errorf("%w: model identity: %v", ErrMalformed, err)
	}
	return h, nil
}

// KeyNonce returns REPORT_DATA bytes 0..31 of a key attestation:
// SHA-256(keyNonceLabel || 0x00 || u32be(len(challenge)) || challenge).
func KeyNonce(challenge []byte) ([32]byte, error) {
	if len(challenge) > MaxChallengeBytes {
		return [32]byte{}, fmt.Errorf("%w: challenge is %d bytes, limit %d", ErrTooLarge, len(challenge), MaxChallengeBytes)
	}
	pre := binary.BigEndian.AppendUint32(append([]byte(keyNonceLabel), 0), uint32(len(challenge)))
	return sha256.Sum256(append(pre, challenge...)), nil
}

// checkText checks a text field: valid UTF-8 without control characters,
// between min and max bytes.
func checkText(field, s string, min, max int) error {
	if len(s) < min || len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, want %d..%d", ErrMalformed, field, len(s), min, max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformed, field)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s contains a control character", ErrMalformed, field)
		}
	}
	return nil
}

// checkHash checks a b64u SHA-256 digest (43 characters).
func checkHash(field, s string) error {
	if _, err := b64u.DecodeHash(s); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, field, err)
	}
	return nil
}
