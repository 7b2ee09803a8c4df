package server

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/clawea/attester/attestation"
)

// GET /v1/identity is public and unauthenticated, and a key attestation
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
			return nil, httpErr(http.StatusInternalServerError, "cannot produce the key attestation", err)
		}
		k.cached, k.cachedAt = jws, k.now()
		return jws, nil
	}
	if wait := k.bucket.take(); wait > 0 {
		return nil, &HTTPError{Code: http.StatusTooManyRequests, Msg: "too many key attestations with a challenge; retry later",
			retryAfter: int(math.Ceil(wait.Seconds()))}
	}
	jws, err := k.produce(ctx, challenge)
	if err != nil {
		return nil, httpErr(http.StatusInternalServerError, "cannot produce the key attestation", err)
	}
	return jws, nil
}

// keyAttestation is what GET /v1/identity serves.
func (s *Server) keyAttestation(ctx context.Context, challenge []byte) ([]byte, error) {
	return s.keyAtts.get(ctx, challenge)
}

// produceKeyAttestation makes a fresh key attestation (a hardware quote).
func (s *Server) produceKeyAttestation(ctx context.Context, challenge []byte) (jws []byte, err error) {
	err = s.withIssuer(func(is *attestation.Issuer) (err error) {
		jws, err = is.KeyAttestation(ctx, challenge)
		return err
	})
	return jws, err
}
