package evidencedoc

import (
	"bytes"
	"crypto/ed25519"
	"fmt"

	"github.com/go-jose/go-jose/v4"

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
	opts := (&jose.SignerOptions{}).WithType(Type).WithHeader("kid", did)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, opts)
	if err != nil {
		return nil, fmt.Errorf("evidencedoc: signer: %w", err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("evidencedoc: sign: %w", err)
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		return nil, fmt.Errorf("evidencedoc: serialize: %w", err)
	}
	jws := []byte(compact)
	// go-jose writes the header with sorted keys; insist on the canonical
	// form so a library change cannot silently produce documents verifiers
	// refuse.
	if want := b64u.Encode(canonicalHeader(did)) + "."; !bytes.HasPrefix(jws, []byte(want)) {
		return nil, fmt.Errorf("%w: signer produced a non-canonical protected header", ErrMalformed)
	}
	return Parse(jws, pub)
}
