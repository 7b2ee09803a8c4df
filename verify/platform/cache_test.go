package platform

import (
	"bytes"
	"crypto/x509"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
)

// snpWithLeaf is ev's report endorsed by leaf alone (no certificate
// table), simulated.
func snpWithLeaf(t *testing.T, ev *evidence.Evidence, leaf []byte) *evidence.Evidence {
	t.Helper()
	out, err := snpevidence.Build(ev.Blob, nil, leaf, true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A chain verified and cached once must not vouch for a different chain:
// a tampered leaf, or another chip's genuine leaf, under the same report
// is refused on a warm cache, and failures are never cached.
func TestSEVCertCacheTamperedChain(t *testing.T) {
	rd := testRD(t, "cache")
	good := simSEV(t, sim.Options{}, rd)
	goodLeaf := good.CertChain[0]
	good = snpWithLeaf(t, good, goodLeaf)
	cache := &CertCache{MaxEntries: 8}
	opts := simOpts()
	opts.CertCache = cache
	if _, err := Verify(good, rd, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(good, rd, opts); err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Entries != 1 || st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v, want 1 entry, 1 hit, 1 miss", st)
	}

	// The leaf's signature by the ASK, one bit flipped: the certificate
	// still parses, the chain does not verify.
	tampered := bytes.Clone(goodLeaf)
	tampered[len(tampered)-1] ^= 1
	for range 2 {
		_, err := Verify(snpWithLeaf(t, good, tampered), rd, opts)
		wantErr(t, err, ErrRejected, nil, checkChain)
	}
	if n := cache.size(); n != 1 {
		t.Fatalf("cache holds %d chains after a tampered one, want 1", n)
	}
	// Another simulated chip's genuine VCEK (the simulator signs every
	// chip's reports with one key): the chain verifies and is cached, and
	// the report's CHIP_ID still does not match it, cold or warm.
	other := simSEV(t, sim.Options{Seed: []byte("another chip")}, rd).CertChain[0]
	for range 2 {
		_, err := Verify(snpWithLeaf(t, good, other), rd, opts)
		wantErr(t, err, ErrRejected, nil, checkBinding)
	}
	// The good chain still verifies from the cache.
	hits := cache.hits()
	if _, err := Verify(good, rd, opts); err != nil {
		t.Fatal(err)
	}
	if cache.hits() != hits+1 {
		t.Fatal("good chain not served from the cache")
	}
}

// A full cache evicts the oldest entry and counts it.
func TestCertCacheEvictionStats(t *testing.T) {
	rd := testRD(t, "cache")
	cache := &CertCache{MaxEntries: 1}
	opts := simOpts()
	opts.CertCache = cache
	for i := range 3 {
		ev := simSEV(t, sim.Options{Seed: []byte{byte(i)}}, rd)
		if _, err := Verify(ev, rd, opts); err != nil {
			t.Fatal(err)
		}
	}
	if st := cache.Stats(); st.Entries != 1 || st.Capacity != 1 || st.Evictions != 2 || st.Misses != 3 || st.Hits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The parsed-certificate memo returns what x509.ParseCertificate returns
// for the same bytes, never stores a failure, stays bounded, and does not
// change what Verify refuses on a warm cache.
func TestCertCacheParseMemo(t *testing.T) {
	rd := testRD(t, "memo")
	good := simSEV(t, sim.Options{}, rd)
	der := good.CertChain[0]
	cache := &CertCache{MaxEntries: 1}
	want, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	first, err := cache.ParseCertificate(der)
	if err != nil || !first.Equal(want) {
		t.Fatalf("memo parse: %v", err)
	}
	if again, err := cache.ParseCertificate(bytes.Clone(der)); err != nil || again != first {
		t.Fatalf("same bytes not served from the memo: %v", err)
	}
	for name, bad := range map[string][]byte{
		"truncated":      der[:len(der)-1],
		"trailing bytes": append(bytes.Clone(der), 0),
		"empty":          {},
	} {
		for range 2 {
			if _, werr := x509.ParseCertificate(bad); werr == nil {
				t.Fatalf("%s: x509 parses it", name)
			}
			if c, err := cache.ParseCertificate(bad); err == nil || c != nil {
				t.Fatalf("%s: memo parses it", name)
			}
		}
	}
	if n := len(cache.parsed); n != 1 {
		t.Fatalf("memo holds %d certificates, want 1 (failures are not stored)", n)
	}
	for i := range 2 * snpevidence.MaxChainLength {
		ev := simSEV(t, sim.Options{Seed: []byte{byte(i)}}, rd)
		if _, err := cache.ParseCertificate(ev.CertChain[0]); err != nil {
			t.Fatal(err)
		}
		if n := len(cache.parsed); n > snpevidence.MaxChainLength {
			t.Fatalf("memo holds %d certificates, bound %d", n, snpevidence.MaxChainLength)
		}
	}

	// Warm chain cache and memo: evidence whose leaf no longer parses is
	// refused at parsing, as it is cold.
	opts := simOpts()
	opts.CertCache = &CertCache{}
	for range 2 {
		if _, err := Verify(good, rd, opts); err != nil {
			t.Fatal(err)
		}
	}
	bad := cloneEvidence(good)
	bad.CertChain[0] = der[:len(der)-1]
	for _, o := range []Options{opts, simOpts()} {
		_, err := Verify(bad, rd, o)
		wantErr(t, err, ErrRejected, nil, checkParse)
	}
}
