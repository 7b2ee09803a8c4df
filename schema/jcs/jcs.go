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

// Canonicalize returns the RFC 8785 canonical form of data.
func Canonicalize(data []byte) ([]byte, error) {
	if _, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: MaxBytes, AllowFloats: true}); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalid, err)
	}
	out, err := jcs.Transform(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, err)
	}
	return out, nil
}

// Hash returns b64u(SHA-256(JCS(data))).
func Hash(data []byte) (string, error) {
	c, err := AppendCanonical(nil, data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return b64u.Encode(sum[:]), nil
}
