package evidencedoc

import (
	"crypto/ed25519"
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
)

// Sign encodes d (Kind, IssuedAt, Nonce, Execution or Key, Items; the
// signer fields are taken from key) as a compact JWS signed with key and
// returns the document exactly as Parse reads it back. It refuses anything
// Parse would refuse.
func Sign(key ed25519.PrivateKey, d *Document) (*Document, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: signing key has the wrong length", ErrSignature)
	}
	if d == nil {
		return nil, fmt.Errorf("%w: no document", ErrMalformed)
	}
	pub := key.Public().(ed25519.PublicKey)
	did := didkey.Format(pub)
	w := toWire(d, did)
	// Validate exactly as Parse will, before signing anything.
	if _, err := fromWire(w); err != nil {
		return nil, err
	}
	payload, err := pohjson.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	if len(payload) > MaxJWSBytes*3/4-maxHeaderBytes {
		return nil, fmt.Errorf("%w: payload is %d bytes", ErrTooLarge, len(payload))
	}
	// The compact serialization (RFC 7515 section 7.1) with the one
	// protected header Parse accepts: header and payload segments, a dot,
	// and the Ed25519 signature over exactly those bytes (RFC 8037).
	// go-jose and the npm jose package verify it (TestJoseInterop,
	// TestGoJoseSignsTheSameBytes).
	input := b64u.Encode(canonicalHeader(did)) + "." + b64u.Encode(payload)
	jws := []byte(input + "." + b64u.Encode(ed25519.Sign(key, []byte(input))))
	return Parse(jws, pub)
}
