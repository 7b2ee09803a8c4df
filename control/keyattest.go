package control

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/clawea/attester/attestation"
)

// The identity (GET /v1/identity) is public and unauthenticated, and a key attestation
// costs a hardware quote. Without a challenge, one attestation is shared
// by every caller for keyAttestationTTL; with one, the quote is fresh but
// the rate of such quotes is bounded by a token bucket
// (challengeQuotesPerSecond, challengeQuoteBurst) shared by all callers:
// beyond it, 429 with Retry-After.
const (
	keyAttestationTTL        = 60 * time.Second
	challengeQuotesPerSecond = 4
	challengeQuoteBurst      = 8
)

// keyAttestations caches the challenge-less key attestation and meters
// challenged ones.
type keyAttestations struct {
	now     func() time.Time
	produce func(ctx context.Context, challenge []byte) ([]byte, error)

	cacheMu  sync.Mutex // held while producing, so concurrent callers share one quote
	cached   []byte
	cachedAt time.Time

	bucket *tokenBucket
}

func newKeyAttestations(now func() time.Time, produce func(context.Context, []byte) ([]byte, error)) *keyAttestations {
	return &keyAttestations{now: now, produce: produce, bucket: newTokenBucket(challengeQuotesPerSecond, challengeQuoteBurst, now)}
}

// get returns a key attestation for challenge (nil: no challenge).
func (k *keyAttestations) get(ctx context.Context, challenge []byte) ([]byte, error) {
	if challenge == nil {
		k.cacheMu.Lock()
		defer k.cacheMu.Unlock()
		if now := k.now(); k.cached != nil && now.Sub(k.cachedAt) < keyAttestationTTL && !now.Before(k.cachedAt) {
			return k.cached, nil
		}
		jws, err := k.produce(ctx, nil)
		if err != nil {
			return nil, refusal(kindInternal, "cannot produce the key attestation", err)
		}
		k.cached, k.cachedAt = jws, k.now()
		return jws, nil
	}
	if wait := k.bucket.take(); wait > 0 {
		return nil, &Error{kind: kindTooMany, Msg: "too many key attestations with a challenge; retry later",
			RetryAfter: int(math.Ceil(wait.Seconds()))}
	}
	jws, err := k.produce(ctx, challenge)
	if err != nil {
		return nil, refusal(kindInternal, "cannot produce the key attestation", err)
	}
	return jws, nil
}

// identityDocument is the attester's public identity (GET /v1/identity):
// the DID, the pack recipient key and a key attestation over a challenge.
// (Fields in key order, as the answer was once a sorted map.)
type identityDocument struct {
	DID            string `json:"did"`
	IdentitySealed bool   `json:"identity_sealed"`
	KeyAttestation string `json:"key_attestation"`
	PackPublicKey  string `json:"pack_public_key"`
	Platform       string `json:"platform"`
	Simulated      bool   `json:"simulated"`
}

// IdentityDocument returns the identity with a key attestation over
// challenge (nil: none). Without a challenge one attestation is shared by
// every caller for a while; with one the quote is fresh, and such quotes
// are metered for all callers together (kindTooMany with RetryAfter).
func (s *Service) IdentityDocument(ctx context.Context, challenge []byte) (*identityDocument, error) {
	jws, err := s.keyAtts.get(ctx, challenge)
	if err != nil {
		return nil, err
	}
	platform, simulated := s.platformName()
	return &identityDocument{
		DID: s.id.DID, PackPublicKey: s.id.PackKey.Public().String(), KeyAttestation: string(jws),
		Platform: platform, Simulated: simulated, IdentitySealed: s.id.Sealed,
	}, nil
}

// produceKeyAttestation makes a fresh key attestation (a hardware quote).
func (s *Service) produceKeyAttestation(ctx context.Context, challenge []byte) (jws []byte, err error) {
	err = s.withIssuer(func(is *attestation.Issuer) (err error) {
		jws, err = is.KeyAttestation(ctx, challenge)
		return err
	})
	return jws, err
}
