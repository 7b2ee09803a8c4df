package platform

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"hash"
	"sync"
	"time"

	"github.com/google/go-sev-guest/kds"

	"github.com/clawea/attester/wire/snpevidence"
)

// defaultCertCacheSize is the capacity of a CertCache whose MaxEntries is
// not positive.
const defaultCertCacheSize = 1024

// CertCache remembers SEV-SNP endorsement chains (VCEK or VLEK, the pinned
// ASK/ASVK and ARK, and the revocation outcome) that Verify has fully
// verified, keyed by a hash of the exact certificate bytes, the certificate
// table, the trust anchor and the supplied CRLs. A later Verify of evidence
// with the same key, at a time inside the window in which every certificate
// and CRL involved was valid, skips chain and CRL verification; it still
// parses the evidence and verifies the report signature, the endorsement
// binding (REPORTED_TCB, CHIP_ID) and REPORT_DATA.
//
// Only successful verifications are stored. The zero value is an empty
// cache of 1,024 chains. A CertCache is safe for concurrent use and holds at
// most MaxEntries chains; the oldest entry is evicted first.
type CertCache struct {
	// MaxEntries bounds the chains held (1,024 when not positive). Set it
	// before the first use.
	MaxEntries int

	mu    sync.Mutex
	m     map[[32]byte]*chainEntry
	order [][32]byte
	stats CacheStats

	// parsed memoizes x509.ParseCertificate of endorsement certificates,
	// keyed on their exact DER: parsing is deterministic, so a stored
	// success is what parsing the same bytes again returns, and failures
	// are never stored. Bounded at max*snpevidence.MaxChainLength entries
	// (emptied when full).
	parsedMu sync.RWMutex
	parsed   map[string]*x509.Certificate
}

// CacheStats counts what a CertCache did, for metrics.
type CacheStats struct {
	// Hits and Misses count lookups: a miss is a lookup that found no
	// entry usable at the verification time (then the chain is verified in
	// full).
	Hits, Misses uint64
	// Evictions counts entries dropped to stay within capacity.
	Evictions uint64
	// Entries is the number of cached chains; Capacity the bound.
	Entries, Capacity int
}

// capacity is the bound on cached chains.
func (c *CertCache) capacity() int {
	if c.MaxEntries <= 0 {
		return defaultCertCacheSize
	}
	return c.MaxEntries
}

// ParseCertificate is x509.ParseCertificate through the cache's memo of
// endorsement certificates, keyed on the exact DER (successes only). The
// certificate returned is shared: only read it. On a nil cache it parses.
func (c *CertCache) ParseCertificate(der []byte) (*x509.Certificate, error) {
	if c == nil {
		return x509.ParseCertificate(der)
	}
	c.parsedMu.RLock()
	cert := c.parsed[string(der)]
	c.parsedMu.RUnlock()
	if cert != nil {
		return cert, nil
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c.parsedMu.Lock()
	defer c.parsedMu.Unlock()
	if c.parsed == nil {
		c.parsed = map[string]*x509.Certificate{}
	}
	if len(c.parsed) >= c.capacity()*snpevidence.MaxChainLength {
		clear(c.parsed)
	}
	c.parsed[string(der)] = cert
	return cert, nil
}

// chainEntry is a verified chain. It is immutable once stored.
type chainEntry struct {
	leaf       *x509.Certificate
	exts       *kds.Extensions
	rootID     string
	revocation Status
	notBefore  time.Time
	notAfter   time.Time
}

func (e *chainEntry) validAt(t time.Time) bool {
	return !t.Before(e.notBefore) && !t.After(e.notAfter)
}

// size returns the number of cached chains.
func (c *CertCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// hits returns how many verifications used a cached chain.
func (c *CertCache) hits() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.Hits
}

// Stats returns the counters and the current size.
func (c *CertCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Entries, st.Capacity = len(c.m), c.capacity()
	return st
}

func (c *CertCache) get(k [32]byte, now time.Time) *chainEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	if e == nil || !e.validAt(now) {
		c.stats.Misses++
		return nil
	}
	c.stats.Hits++
	return e
}

func (c *CertCache) put(k [32]byte, e *chainEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*chainEntry{}
	}
	if _, ok := c.m[k]; ok {
		c.m[k] = e
		return
	}
	for len(c.order) >= c.capacity() {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
		c.stats.Evictions++
	}
	c.m[k] = e
	c.order = append(c.order, k)
}

// cacheKey hashes everything a chain verification depends on, each item
// length-prefixed under a domain-separation label.
type cacheKey struct{ h hash.Hash }

func newCacheKey(label string) *cacheKey {
	k := &cacheKey{h: sha256.New()}
	k.add([]byte("clawea.dev/verify/platform/v1/cert-cache/" + label))
	return k
}

func (k *cacheKey) add(b []byte) {
	var l [8]byte
	binary.BigEndian.PutUint64(l[:], uint64(len(b)))
	k.h.Write(l[:])
	k.h.Write(b)
}

func (k *cacheKey) sum() (out [32]byte) {
	k.h.Sum(out[:0])
	return out
}
