package control

import (
	"sync"
	"time"
)

// tokenBucket meters an operation for all callers together.
type tokenBucket struct {
	rate, burst float64
	now         func() time.Time

	mu       sync.Mutex
	tokens   float64
	filledAt time.Time
}

func newTokenBucket(rate, burst float64, now func() time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, now: now, tokens: burst, filledAt: now()}
}

// take takes a token, or returns how long until one is available.
func (b *tokenBucket) take() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.filledAt); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
	}
	b.filledAt = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}
