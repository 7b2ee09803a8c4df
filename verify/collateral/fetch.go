package collateral

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify/platform"
)

// Fetcher defaults.
const (
	defaultAttempts    = 4
	defaultBackoff     = time.Second
	maxBackoff         = 30 * time.Second
	defaultTimeout     = 30 * time.Second
	defaultMinValidity = time.Hour
	maxChainHeader     = 64 << 10
)

// Fetcher downloads collateral. Its zero value is usable except for Now,
// which is required: the clock decides what in the cache is still valid.
// go-sev-guest's and go-tdx-guest's own retrying getters retry for a time
// rather than a number of attempts, retry on every HTTP status, and read
// unbounded bodies; this fetcher bounds all three and keeps their URL
// builders (kds, pcs), rebased on the configured service URLs.
type Fetcher struct {
	// Client performs the requests; nil means a client with defaultTimeout.
	Client *http.Client
	// KDSURL, PCSURL and IntelCertsURL replace the AMD KDS, Intel PCS and
	// Intel certificate service base URLs (scheme and host, optionally a
	// path prefix, no trailing slash); empty means the vendors' (Defaults).
	KDSURL, PCSURL, IntelCertsURL string
	// Attempts bounds the requests per document (0: 4).
	// Network errors, 5xx and 429 answers are retried; other answers are
	// not.
	Attempts int
	// Backoff is the delay before the first retry, doubled for each next
	// one up to maxBackoff (0: one second).
	Backoff time.Duration
	// MinValidity is how long a cached document must stay valid to be kept
	// (0: one hour; negative: any remaining validity).
	MinValidity time.Duration
	// Offline makes Collect check the directory only, without the
	// network; the service fields are then unused.
	Offline bool
	// Now is the clock; required.
	Now func() time.Time
	// Progress, when set, receives one line (no newline) per document and
	// per retry.
	Progress func(line string)
	// sleep waits between attempts; tests replace it.
	sleep func(context.Context, time.Duration) error
}

// Defaults returns a Fetcher with every default spelled out: the vendor
// service URLs, attempts, backoff and minimum validity a zero field means.
// Client, Now and Progress are left for the caller.
func Defaults() Fetcher {
	return Fetcher{
		KDSURL: defaultKDSURL, PCSURL: defaultPCSURL, IntelCertsURL: defaultIntelCertsURL,
		Attempts: defaultAttempts, Backoff: defaultBackoff, MinValidity: defaultMinValidity,
	}
}

func (f *Fetcher) minValidity() time.Duration {
	switch {
	case f.MinValidity == 0:
		return defaultMinValidity
	case f.MinValidity < 0:
		return 0
	}
	return f.MinValidity
}

// Collect makes every item fresh in dir (it fetches what is missing or
// stale) or, when Offline is set, only checks dir: a document is fresh
// when it (and its issuer chain) parses, is for the evidence's platform,
// and stays valid at least MinValidity longer. It returns the status of
// every item and, when one is not fresh, an error naming each such item.
// Only Collect without Offline uses the network.
func (f *Fetcher) Collect(ctx context.Context, dir string, items []Item) ([]Status, error) {
	if f.Now == nil {
		return nil, errors.New("collateral: Fetcher.Now is required")
	}
	if !f.Offline {
		return f.fetch(ctx, dir, items)
	}
	sts := check(dir, items, f.Now(), f.minValidity())
	return sts, incomplete(sts)
}

// fetch makes every item fresh in dir: a document that check finds fresh is
// kept without a request; any other is downloaded, checked like a cached
// one (a server answer that is already stale or for another platform is
// refused) and written atomically with its issuer chain. It tries every
// item and returns the statuses and the joined errors (each wrapping
// errFetch or errDocument).
func (f *Fetcher) fetch(ctx context.Context, dir string, items []Item) ([]Status, error) {
	if f.Now == nil {
		return nil, errors.New("collateral: Fetcher.Now is required")
	}
	bases := map[service]string{serviceKDS: defaultKDSURL, servicePCS: defaultPCSURL, serviceIntelCerts: defaultIntelCertsURL}
	for s, u := range map[service]string{serviceKDS: f.KDSURL, servicePCS: f.PCSURL, serviceIntelCerts: f.IntelCertsURL} {
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" || strings.HasSuffix(u, "/") {
			return nil, fmt.Errorf("collateral: base url %q: want scheme://host[/prefix] without a trailing slash", u)
		}
		bases[s] = u
	}
	var errs []error
	out := make([]Status, 0, len(items))
	for i, it := range items {
		st := checkOne(dir, it, f.Now(), f.minValidity())
		if st.State == stateFresh {
			f.progress("[%d/%d] %s: cached, valid until %s", i+1, len(items), it.Path, st.ValidUntil.UTC().Format(time.RFC3339))
			out = append(out, st)
			continue
		}
		u := bases[it.from] + it.URL
		f.progress("[%d/%d] %s: %s, fetching %s", i+1, len(items), it.Path, st.State, u)
		st, err := f.fetchOne(ctx, dir, it, u)
		if err != nil {
			f.progress("[%d/%d] %s: failed: %v", i+1, len(items), it.Path, err)
			errs = append(errs, fmt.Errorf("%s: %w", it.Path, err))
		} else {
			f.progress("[%d/%d] %s: fetched, valid until %s", i+1, len(items), it.Path, st.ValidUntil.UTC().Format(time.RFC3339))
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

func (f *Fetcher) fetchOne(ctx context.Context, dir string, it Item, u string) (Status, error) {
	st := Status{Item: it, State: stateMissing}
	header, body, err := f.get(ctx, u)
	if err != nil {
		st.Detail = err.Error()
		return st, err
	}
	var chain []byte
	if it.ChainPath != "" {
		v := header.Values(it.ChainHeader)
		if len(v) != 1 || len(v[0]) > maxChainHeader {
			err := fmt.Errorf("%w: want one %s header", errDocument, it.ChainHeader)
			st.Detail = err.Error()
			return st, err
		}
		s, err := url.QueryUnescape(v[0])
		if err != nil {
			err = fmt.Errorf("%w: %s header is not url-encoded", errDocument, it.ChainHeader)
			st.Detail = err.Error()
			return st, err
		}
		chain = []byte(s)
	}
	from, until, err := validity(it, body, chain)
	if err != nil {
		st.State, st.Detail = stateInvalid, err.Error()
		return st, err
	}
	st.ValidUntil = until
	now := f.Now()
	if now.Before(from) || !now.Add(f.minValidity()).Before(until) {
		err := fmt.Errorf("%w: the service returned a document valid from %s to %s", errDocument,
			from.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
		st.State, st.Detail = stateStale, err.Error()
		return st, err
	}
	if chain != nil {
		if err := writeAtomic(dir, it.ChainPath, chain); err != nil {
			return st, err
		}
	}
	if err := writeAtomic(dir, it.Path, body); err != nil {
		return st, err
	}
	st.State, st.Detail, st.Fetched = stateFresh, "", true
	return st, nil
}

// get performs GET u with bounded retries and returns the headers and a
// body of at most platform.MaxCollateralFile bytes.
func (f *Fetcher) get(ctx context.Context, u string) (http.Header, []byte, error) {
	attempts := f.Attempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	delay := f.Backoff
	if delay <= 0 {
		delay = defaultBackoff
	}
	sleep := f.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	client := f.Client
	if client == nil {
		client = &http.Client{Timeout: defaultTimeout}
	}
	var last error
	for a := 1; ; a++ {
		h, body, retry, err := getOnce(ctx, client, u)
		if err == nil {
			return h, body, nil
		}
		last = err
		if !retry || a == attempts {
			break
		}
		f.progress("  attempt %d/%d: %v; retrying in %s", a, attempts, err, delay)
		if err := sleep(ctx, delay); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errFetch, err)
		}
		delay = min(2*delay, maxBackoff)
	}
	return nil, nil, fmt.Errorf("%w: %v", errFetch, last)
}

func getOnce(ctx context.Context, client *http.Client, u string) (http.Header, []byte, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, ctx.Err() == nil, fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		bounded.Discard(resp.Body, 4096)
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return nil, nil, retry, fmt.Errorf("get %s: http status %d", u, resp.StatusCode)
	}
	body, err := bounded.Read(resp.Body, platform.MaxCollateralFile, "body")
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, nil, false, fmt.Errorf("get %s: %w", u, err)
	}
	if err != nil {
		return nil, nil, true, fmt.Errorf("get %s: %w", u, err)
	}
	return resp.Header, body, false, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (f *Fetcher) progress(format string, args ...any) {
	if f.Progress != nil {
		f.Progress(fmt.Sprintf(format, args...))
	}
}

// writeAtomic writes b to dir/rel through a temporary file and a rename, so
// that a reader sees the old or the new document, never a part.
func writeAtomic(dir, rel string, b []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Sync()
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("collateral: write %s: %w", rel, werr)
	}
	return nil
}
