package earresult

import (
	"crypto"
	"encoding/json"
	"fmt"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"

	"github.com/clawea/attester/schema/b64u"
)

// keyID is the "kid" an EAR signed by the key with public key pub carries,
// and the "kid" of that key in a published key set: the RFC 7638 JWK
// thumbprint of the public key (SHA-256, base64url without padding). It
// depends on the key alone, so a relying party recomputes it from a key it
// pinned, and a rotated key gets a new one.
func keyID(pub crypto.PublicKey) (string, error) {
	k, err := publicJWK(pub)
	if err != nil {
		return "", err
	}
	return k.KeyID(), nil
}

// publicJWK returns pub as a JWK with kid (keyID), alg and use "sig".
func publicJWK(pub crypto.PublicKey) (jwk.Key, error) {
	alg, err := algorithm(pub)
	if err != nil {
		return nil, err
	}
	k, err := jwk.FromRaw(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %T cannot be a JWK", ErrKey, pub)
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: no thumbprint: %w", ErrKey, err)
	}
	for name, v := range map[string]any{jwk.KeyIDKey: b64u.Encode(tp), jwk.AlgorithmKey: alg, jwk.KeyUsageKey: "sig"} {
		if err := k.Set(name, v); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKey, name, err)
		}
	}
	return k, nil
}

// PublicKeySet is the JSON Web Key Set (RFC 7517 section 5) of the public
// keys that verify this verifier's EARs, the current key first: what a
// verifier publishes so that a relying party can check an EAR by its kid
// (docs/spec/verifier-api.md section 7). Each key has "kid" (the kid of
// the EARs it signs: the RFC 7638 thumbprint), "alg" and "use": "sig". A
// key that cannot sign EARs (not Ed25519 or P-256) is refused.
func PublicKeySet(pubs ...crypto.PublicKey) ([]byte, error) {
	set := jwk.NewSet()
	seen := map[string]bool{}
	for _, p := range pubs {
		k, err := publicJWK(p)
		if err != nil {
			return nil, err
		}
		if seen[k.KeyID()] {
			return nil, fmt.Errorf("%w: key %s listed twice", ErrKey, k.KeyID())
		}
		seen[k.KeyID()] = true
		if err := set.AddKey(k); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKey, err)
		}
	}
	return json.Marshal(set)
}

// signingJWK is key as a private JWK with the kid of its public key, so
// that the JWS header of the EAR names the key (jwx puts a signing JWK's
// kid in the protected header).
func signingJWK(key crypto.Signer, alg jwa.SignatureAlgorithm) (jwk.Key, error) {
	kid, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	k, err := jwk.FromRaw(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %T: only in-memory Ed25519 and ECDSA P-256 keys sign EARs", ErrKey, key)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		return nil, fmt.Errorf("%w: kid: %w", ErrKey, err)
	}
	if err := k.Set(jwk.AlgorithmKey, alg); err != nil {
		return nil, fmt.Errorf("%w: alg: %w", ErrKey, err)
	}
	return k, nil
}
