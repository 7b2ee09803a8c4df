// Package jcs canonicalizes JSON with the JSON Canonicalization Scheme
// (RFC 8785) through github.com/gowebpki/jcs, after a strict I-JSON (RFC 7493)
// check: duplicate keys, lone surrogates, invalid UTF-8 and numbers outside
// IEEE 754 double range are refused instead of being passed through.
//
// JCS is used for the SystemPromptReport.v1 and the other clawea-native
// documents; PoH envelopes use pohjson instead (see DESIGN.md).
package jcs

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// errInvalid is returned (wrapped) when the input is not I-JSON.
var errInvalid = errors.New("jcs: input is not I-JSON")

// MaxBytes bounds the input.
const MaxBytes = 16 << 20

// Canonicalize returns the RFC 8785 canonical form of data. Small documents
// of the common shape take a one-pass path (see appendCanonical); the
// result and the errors are those of the general path.
func Canonicalize(data []byte) ([]byte, error) {
	return appendCanonical(nil, data)
}

// canonicalize is the general path: the I-JSON check, then
// github.com/gowebpki/jcs.
func canonicalize(data []byte) ([]byte, error) {
	if _, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: MaxBytes, AllowFloats: true}); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalid, err)
	}
	out, err := jcs.Transform(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, err)
	}
	return out, nil
}

// Marshal returns the RFC 8785 canonical form of json.Marshal(v). The
// intermediate encoding is cleared before Marshal returns, so a caller whose
// value holds secrets has only the canonical bytes to wipe. Errors from
// either step are returned as they are.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	return Canonicalize(raw)
}

// Hash returns b64u(SHA-256(JCS(data))).
func Hash(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return b64u.Encode(sum[:]), nil
}
