package verify

// verify-v1.md section 1: a verifier MUST NOT use the network. The
// platform libraries it uses (go-sev-guest, go-tdx-guest) fetch
// certificates, CRLs and TCB info over HTTP when given their default
// getters; the attack is evidence that needs exactly that collateral.
// Every HTTP request through the process's default transport is recorded
// and failed, and a verification that would have needed the network must
// end as "could not check", not as a fetch.

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/clawea/attester/schema/poh"
)

type recordingTransport struct {
	mu   sync.Mutex
	urls []string
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.urls = append(rt.urls, r.URL.String())
	rt.mu.Unlock()
	return nil, errors.New("the network is not allowed in a verifier")
}

func TestNoNetworkAttack(t *testing.T) {
	rt := &recordingTransport{}
	saved := http.DefaultTransport
	http.DefaultTransport = rt
	t.Cleanup(func() { http.DefaultTransport = saved })

	for name, q := range platforms(t) {
		t.Run(name, func(t *testing.T) {
			f := attest(t, q(), newRun(t))
			// Revocation required and no CRL supplied: a fetching
			// verifier would download it.
			p := f.simPolicy()
			p.AllowUncheckedRevocation = false
			_, err := Verify(f.att, f.ev, f.bundle, p, f.opts())
			wantErr(t, err, ErrCannotCheck, "platform/", poh.DependencyNotConfigured)
			// With the relaxation it verifies, offline.
			if _, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), f.opts()); err != nil {
				t.Fatal(err)
			}
		})
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.urls) != 0 {
		t.Fatalf("the verifier used the network: %v", rt.urls)
	}
}
