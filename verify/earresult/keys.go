package earresult

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/veraison/ear"

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
		return nil, fmt.Errorf("%w: %T cannot be a JWK", errKey, pub)
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: no thumbprint: %w", errKey, err)
	}
	for name, v := range map[string]any{jwk.KeyIDKey: b64u.Encode(tp), jwk.AlgorithmKey: alg, jwk.KeyUsageKey: "sig"} {
		if err := k.Set(name, v); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errKey, name, err)
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
			return nil, fmt.Errorf("%w: key %s listed twice", errKey, k.KeyID())
		}
		seen[k.KeyID()] = true
		if err := set.AddKey(k); err != nil {
			return nil, fmt.Errorf("%w: %w", errKey, err)
		}
	}
	return json.Marshal(set)
}

// maxEARBytes bounds an EAR token Verify reads.
const maxEARBytes = 256 << 10

// Verify checks an EAR (a JWT as Sign makes) against a JWK Set (as
// PublicKeySet makes and a verifier publishes): the protected header's kid
// MUST name a key of the set and its alg MUST be that key's; then the
// claims MUST form a valid EAR. It returns the EAR and the kid. An EAR
// without a kid, or signed by a key not in the set, is refused: a relying
// party trusts the set it fetched or pinned, never a key the token brings.
func Verify(token, keySet []byte) (*ear.AttestationResult, string, error) {
	if len(token) > maxEARBytes {
		return nil, "", fmt.Errorf("EAR over %d bytes", maxEARBytes)
	}
	set, err := jwk.Parse(keySet)
	if err != nil {
		return nil, "", fmt.Errorf("%w: key set: %w", errKey, err)
	}
	for i := range set.Len() {
		k, _ := set.Key(i)
		if k.KeyID() == "" || k.Algorithm().String() == "" {
			return nil, "", fmt.Errorf("%w: key set: key %d has no kid or alg", errKey, i)
		}
	}
	msg, err := jws.Parse(bytes.TrimSpace(token))
	if err != nil {
		return nil, "", fmt.Errorf("EAR is not a compact JWS: %w", err)
	}
	if len(msg.Signatures()) != 1 {
		return nil, "", errors.New("EAR must have exactly one signature")
	}
	kid := msg.Signatures()[0].ProtectedHeaders().KeyID()
	if kid == "" {
		return nil, "", errors.New("EAR header has no kid")
	}
	if _, ok := set.LookupKeyID(kid); !ok {
		return nil, kid, fmt.Errorf("EAR kid %s is not in the key set", kid)
	}
	payload, err := jws.Verify(bytes.TrimSpace(token), jws.WithKeySet(set, jws.WithRequireKid(true)))
	if err != nil {
		return nil, kid, fmt.Errorf("EAR signature: %w", err)
	}
	var ar ear.AttestationResult
	if err := ar.UnmarshalJSON(payload); err != nil {
		return nil, kid, fmt.Errorf("EAR claims: %w", err)
	}
	return &ar, kid, nil
}
