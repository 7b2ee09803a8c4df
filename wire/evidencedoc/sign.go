package evidencedoc

import (
	"crypto"
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// Sign encodes d (Kind, IssuedAt, Nonce, Execution or Key, Items; the
// signer fields are taken from key) as a compact JWS signed with key, an
// Ed25519 signer (an ed25519.PrivateKey, or a signer over sealed memory:
// sealed.Ed25519Signer), and returns the document exactly as Parse reads
// it back. It refuses anything Parse would refuse.
func Sign(key crypto.Signer, d *Document) (*Document, error) {
	pub, err := poh.SignerKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if d == nil {
		return nil, fmt.Errorf("%w: no document", ErrMalformed)
	}
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
	sig, err := key.Sign(nil, []byte(input), crypto.Hash(0))
	if err != nil {
		return nil, fmt.Errorf("%w: sign: %w", ErrSignature, err)
	}
	return Parse([]byte(input+"."+b64u.Encode(sig)), pub)
}
