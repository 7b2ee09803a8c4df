package collateral

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/google/go-tdx-guest/pcs"
	testcases "github.com/google/go-tdx-guest/testing"
)

var testNow = time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// fakeService is a loopback AMD KDS / Intel PCS: it serves documents by
// request path and query, counts requests, and can answer with errors first.
type fakeService struct {
	mu       sync.Mutex
	docs     map[string]fakeDoc
	requests map[string]int
	total    int
}

type fakeDoc struct {
	body   []byte
	header http.Header
	// fail answers with failStatus for the first fail requests (-1: always).
	fail       int
	failStatus int
}

func newFake(t *testing.T) (*fakeService, string) {
	f := &fakeService{docs: map[string]fakeDoc{}, requests: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.URL.RequestURI()
	f.requests[key]++
	f.total++
	d, ok := f.docs[key]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if d.fail < 0 || f.requests[key] <= d.fail {
		http.Error(w, "unavailable", d.failStatus)
		return
	}
	for k, v := range d.header {
		w.Header()[k] = v
	}
	_, _ = w.Write(d.body)
}

// set publishes d under path and resets the path's request count.
func (f *fakeService) set(path string, d fakeDoc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = d
	f.requests[path] = 0
}

func (f *fakeService) reqs(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

func (f *fakeService) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

func testRD(t testing.TB) evidence.ReportData {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(sha256.Sum256([]byte("collateral")), pub, []byte("verify/collateral test"))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func simSEV(t testing.TB) (*evidence.Evidence, evidence.ReportData) {
	t.Helper()
	s, err := sim.New(sim.Options{Seed: []byte("collateral test machine")})
	return quote(t, s, err)
}

func simTDX(t testing.TB) (*evidence.Evidence, evidence.ReportData) {
	t.Helper()
	s, err := tdx.NewSimulated(fakeqe.Options{})
	return quote(t, s, err)
}

// quote returns q's evidence over testRD, and that report data; newErr is
// the error of making q.
func quote(t testing.TB, q enclave.Quoter, newErr error) (*evidence.Evidence, evidence.ReportData) {
	t.Helper()
	if newErr != nil {
		t.Fatal(newErr)
	}
	rd := testRD(t)
	ev, err := q.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	return ev, rd
}

// serveSEV publishes the simulated machine's documents under the KDS paths.
func serveSEV(t *testing.T, f *fakeService, ev *evidence.Evidence, crl []byte) []Item {
	t.Helper()
	items, err := Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("sev-snp needs %d items, want vcek, chain, crl", len(items))
	}
	for _, it := range items {
		switch it.Kind {
		case kindSEVSNPVCEK:
			f.set(it.URL, fakeDoc{body: ev.CertChain[0]})
		case kindSEVSNPChain:
			f.set(it.URL, fakeDoc{body: simroots.SEVSNPCertChainPEM()})
		case kindSEVSNPCRL:
			f.set(it.URL, fakeDoc{body: crl})
		}
	}
	return items
}

func testFetcher(base string, slept *[]time.Duration) *Fetcher {
	return &Fetcher{
		KDSURL: base, PCSURL: base, IntelCertsURL: base,
		Now: func() time.Time { return testNow },
		sleep: func(_ context.Context, d time.Duration) error {
			if slept != nil {
				*slept = append(*slept, d)
			}
			return nil
		},
	}
}

func TestSEVSNPNeedsUseKDSPaths(t *testing.T) {
	ev, _ := simSEV(t)
	items, err := Needs([]*evidence.Evidence{ev, ev})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		kindSEVSNPChain: "/vcek/v1/Milan/cert_chain",
		kindSEVSNPCRL:   "/vcek/v1/Milan/crl",
	}
	if len(items) != 3 {
		t.Fatalf("got %d items (duplicates not removed?)", len(items))
	}
	for _, it := range items {
		if w, ok := want[it.Kind]; ok && it.URL != w {
			t.Errorf("%s: url %q, want %q", it.Kind, it.URL, w)
		}
		if it.Kind == kindSEVSNPVCEK && (!strings.HasPrefix(it.URL, "/vcek/v1/Milan/") || !strings.Contains(it.URL, "?blSPL=")) {
			t.Errorf("vcek url %q", it.URL)
		}
	}
	if _, err := Needs([]*evidence.Evidence{{Platform: "sgx"}}); !errors.Is(err, errEvidence) {
		t.Fatalf("unknown platform: %v", err)
	}
	bad := *ev
	bad.Blob = bad.Blob[:10]
	if _, err := Needs([]*evidence.Evidence{&bad}); !errors.Is(err, errEvidence) {
		t.Fatalf("truncated report: %v", err)
	}
}

func TestFetchCleanThenCached(t *testing.T) {
	ev, rd := simSEV(t)
	f, base := newFake(t)
	items := serveSEV(t, f, ev, testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(7*day)))
	dir := t.TempDir()

	// Before: everything missing.
	for _, st := range check(dir, items, testNow, time.Hour) {
		if st.State != stateMissing {
			t.Fatalf("%s: %s before fetch", st.Item.Path, st.State)
		}
	}
	var lines []string
	fe := testFetcher(base, nil)
	fe.Progress = func(l string) { lines = append(lines, l) }
	sts, err := fe.fetch(context.Background(), dir, items)
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != 3 {
		t.Fatalf("%d requests, want 3", f.count())
	}
	for _, st := range sts {
		if st.State != stateFresh || !st.Fetched {
			t.Fatalf("%+v", st)
		}
	}
	if len(lines) < 3 || !strings.Contains(lines[0], "[1/3]") {
		t.Fatalf("progress %q", lines)
	}
	if err := incomplete(check(dir, items, testNow, time.Hour)); err != nil {
		t.Fatal(err)
	}

	// Cached: no request while every document stays valid.
	sts, err = fe.fetch(context.Background(), dir, items)
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != 3 {
		t.Fatalf("cached fetch made %d requests", f.count()-3)
	}
	for _, st := range sts {
		if st.Fetched {
			t.Fatalf("%s refetched", st.Item.Path)
		}
	}

	// The directory is what the verifier reads: strict options pass.
	c, err := platform.LoadCollateralDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := platform.Verify(ev, rd, platform.Options{Now: fe.Now, AllowSimulated: true, Collateral: c})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revocation != platform.StatusChecked {
		t.Fatalf("revocation %s", res.Revocation)
	}
}

func TestFetchRefetchesExpiredCRL(t *testing.T) {
	ev, _ := simSEV(t)
	f, base := newFake(t)
	items := serveSEV(t, f, ev, testfixture.SimSEVCRL(t, testNow.Add(-3*day), testNow.Add(-day)))
	dir := t.TempDir()
	fe := testFetcher(base, nil)
	// The service itself serves an expired CRL: refused, nothing written.
	_, err := fe.fetch(context.Background(), dir, items)
	if !errors.Is(err, errDocument) {
		t.Fatalf("expired crl from the service: %v", err)
	}
	crlItem := itemOf(t, items, kindSEVSNPCRL)
	if _, err := os.Stat(filepath.Join(dir, crlItem.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("an expired crl was written")
	}
	// An expired CRL in the cache is refetched; the others are not.
	testfile.Write(t, dir, crlItem.Path, testfixture.SimSEVCRL(t, testNow.Add(-3*day), testNow.Add(-day)))
	st := check(dir, []Item{crlItem}, testNow, time.Hour)[0]
	if st.State != stateStale {
		t.Fatalf("expired crl: %+v", st)
	}
	fresh := testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day))
	f.set(crlItem.URL, fakeDoc{body: fresh})
	before := f.count()
	sts, err := fe.fetch(context.Background(), dir, items)
	if err != nil {
		t.Fatal(err)
	}
	if f.count()-before != 1 {
		t.Fatalf("%d requests, want only the crl", f.count()-before)
	}
	got, _ := os.ReadFile(filepath.Join(dir, crlItem.Path))
	if !bytes.Equal(got, fresh) || !itemStatus(sts, crlItem.Path).Fetched {
		t.Fatal("crl not replaced")
	}
	// A CRL that expires within MinValidity is refetched too.
	fe.MinValidity = 2 * day
	before = f.count()
	if _, err := fe.fetch(context.Background(), dir, items); !errors.Is(err, errDocument) {
		t.Fatalf("crl valid for less than MinValidity: %v", err)
	}
	if f.count()-before != 1 {
		t.Fatalf("%d requests", f.count()-before)
	}
}

func TestFetchRetries(t *testing.T) {
	ev, _ := simSEV(t)
	f, base := newFake(t)
	items := serveSEV(t, f, ev, testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day)))
	crlItem := itemOf(t, items, kindSEVSNPCRL)
	crl := testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day))

	t.Run("5xx then success", func(t *testing.T) {
		f.set(crlItem.URL, fakeDoc{body: crl, fail: 2, failStatus: http.StatusServiceUnavailable})
		var slept []time.Duration
		fe := testFetcher(base, &slept)
		if _, err := fe.fetch(context.Background(), t.TempDir(), []Item{crlItem}); err != nil {
			t.Fatal(err)
		}
		if f.reqs(crlItem.URL) != 3 {
			t.Fatalf("%d requests, want 3", f.reqs(crlItem.URL))
		}
		if len(slept) != 2 || slept[0] != defaultBackoff || slept[1] != 2*defaultBackoff {
			t.Fatalf("backoff %v", slept)
		}
	})
	t.Run("persistent 5xx", func(t *testing.T) {
		f.set(crlItem.URL, fakeDoc{fail: -1, failStatus: http.StatusInternalServerError})
		var slept []time.Duration
		fe := testFetcher(base, &slept)
		fe.Attempts = 3
		fe.Backoff = 20 * time.Second
		_, err := fe.fetch(context.Background(), t.TempDir(), []Item{crlItem})
		if !errors.Is(err, errFetch) || !strings.Contains(err.Error(), "status 500") {
			t.Fatalf("persistent failure: %v", err)
		}
		if f.reqs(crlItem.URL) != 3 || len(slept) != 2 || slept[1] != maxBackoff {
			t.Fatalf("%d requests, backoff %v", f.reqs(crlItem.URL), slept)
		}
	})
	t.Run("404 is not retried", func(t *testing.T) {
		missing := crlItem
		missing.URL = "/vcek/v1/Milan/nothing-here"
		before := f.count()
		_, err := testFetcher(base, nil).fetch(context.Background(), t.TempDir(), []Item{missing})
		if !errors.Is(err, errFetch) || f.count()-before != 1 {
			t.Fatalf("404: %v after %d requests", err, f.count()-before)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		dead := srv.URL
		srv.Close()
		fe := testFetcher(dead, nil)
		fe.Attempts = 2
		if _, err := fe.fetch(context.Background(), t.TempDir(), []Item{crlItem}); !errors.Is(err, errFetch) {
			t.Fatalf("dead service: %v", err)
		}
	})
	t.Run("bad base url", func(t *testing.T) {
		fe := testFetcher("ftp://example.invalid", nil)
		if _, err := fe.fetch(context.Background(), t.TempDir(), []Item{crlItem}); err == nil {
			t.Fatal("ftp base accepted")
		}
	})
}

func TestFetchedRevokedVCEKRefused(t *testing.T) {
	ev, rd := simSEV(t)
	leaf, err := x509.ParseCertificate(ev.CertChain[0])
	if err != nil {
		t.Fatal(err)
	}
	f, base := newFake(t)
	items := serveSEV(t, f, ev, testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day), leaf.SerialNumber))
	dir := t.TempDir()
	fe := testFetcher(base, nil)
	if _, err := fe.fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	c, err := platform.LoadCollateralDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = platform.Verify(ev, rd, platform.Options{Now: fe.Now, AllowSimulated: true, Collateral: c})
	if !errors.Is(err, platform.ErrRevoked) || !errors.Is(err, platform.ErrRejected) {
		t.Fatalf("revoked vcek: %v", err)
	}
}

func TestCheckReportsMissingStaleInvalid(t *testing.T) {
	ev, _ := simSEV(t)
	f, base := newFake(t)
	items := serveSEV(t, f, ev, testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day)))
	dir := t.TempDir()
	if _, err := testFetcher(base, nil).fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	vcek := itemOf(t, items, kindSEVSNPVCEK)
	chain := itemOf(t, items, kindSEVSNPChain)
	crl := itemOf(t, items, kindSEVSNPCRL)
	if err := os.Remove(filepath.Join(dir, vcek.Path)); err != nil {
		t.Fatal(err)
	}
	testfile.Write(t, dir, chain.Path, []byte("not pem"))
	sts := check(dir, items, testNow.Add(2*day), time.Hour)
	want := map[string]State{vcek.Path: stateMissing, chain.Path: stateInvalid, crl.Path: stateStale}
	for _, st := range sts {
		if st.State != want[st.Item.Path] {
			t.Errorf("%s: %s, want %s (%s)", st.Item.Path, st.State, want[st.Item.Path], st.Detail)
		}
	}
	err := incomplete(sts)
	if !errors.Is(err, errIncomplete) || !strings.Contains(err.Error(), vcek.Path+" missing") {
		t.Fatalf("incomplete: %v", err)
	}
	if f.count() != 3 {
		t.Fatal("Check used the network")
	}
}

// TDX: go-tdx-guest's real PCS documents (Intel-signed, valid in June and
// July 2023) for its real quote, served under the PCS paths.
var tdxNow = time.Date(2023, 7, 1, 1, 0, 0, 0, time.UTC)

func serveTDX(t *testing.T, f *fakeService, items []Item) map[string][]byte {
	t.Helper()
	c := tdxtest.ShippedCollateral(t)
	bodies := map[string][]byte{}
	for _, it := range items {
		var d fakeDoc
		switch it.Kind {
		case kindTDXTCBInfo:
			d = fakeDoc{body: c.TcbInfo, header: testcases.TcbInfoHeader}
		case kindTDXQEIdentity:
			d = fakeDoc{body: c.QeIdentity, header: testcases.QeIdentityHeader}
		case kindTDXPCKCRL:
			d = fakeDoc{body: c.PckCrl, header: testcases.PckCrlHeader}
		case kindTDXRootCRL:
			d = fakeDoc{body: c.RootCrl}
		default:
			t.Fatalf("unexpected tdx item %s", it.Kind)
		}
		f.set(it.URL, d)
		bodies[it.Path] = d.body
	}
	return bodies
}

func TestFetchTDX(t *testing.T) {
	ev, _ := tdxtest.Evidence(t, tdxtest.SampleSPR)
	items, err := Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	wantURL := map[string]string{
		kindTDXTCBInfo:    "/tdx/certification/v4/tcb?fmspc=50806f000000",
		kindTDXQEIdentity: "/tdx/certification/v4/qe/identity",
		kindTDXPCKCRL:     "/sgx/certification/v4/pckcrl?ca=platform&encoding=der",
		kindTDXRootCRL:    rootCRLPath,
	}
	for _, it := range items {
		if it.URL != wantURL[it.Kind] {
			t.Fatalf("%s: url %q, want %q", it.Kind, it.URL, wantURL[it.Kind])
		}
	}
	f, base := newFake(t)
	bodies := serveTDX(t, f, items)
	dir := t.TempDir()
	fe := testFetcher(base, nil)
	fe.Now = func() time.Time { return tdxNow }
	if _, err := fe.fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	c, err := platform.LoadCollateralDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	chain := func(h map[string][]string, phrase string) []byte {
		s, err := url.QueryUnescape(h[phrase][0])
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	for name, pair := range map[string][2][]byte{
		"tcb info":       {c.TDXTCBInfo, bodies[platform.CollateralFiles().TDXTCBInfo]},
		"tcb info chain": {c.TDXTCBInfoIssuerChain, chain(testcases.TcbInfoHeader, pcs.TcbInfoIssuerChainPhrase)},
		"qe identity":    {c.TDXQEIdentity, bodies[platform.CollateralFiles().TDXQEIdentity]},
		"qe chain":       {c.TDXQEIdentityIssuerChain, chain(testcases.QeIdentityHeader, pcs.SgxQeIdentityIssuerChainPhrase)},
		"pck crl":        {c.TDXPCKCRL, bodies[platform.CollateralFiles().TDXPCKCRL]},
		"pck crl chain":  {c.TDXPCKCRLIssuerChain, chain(testcases.PckCrlHeader, pcs.SgxPckCrlIssuerChainPhrase)},
		"root crl":       {c.TDXRootCRL, bodies[platform.CollateralFiles().TDXRootCRL]},
	} {
		if len(pair[0]) == 0 || !bytes.Equal(pair[0], pair[1]) {
			t.Errorf("%s: not stored as served", name)
		}
	}
	// Cached until the QE identity's nextUpdate (2023-07-08): a week later
	// it and the PCK CRL are stale, the TCB info (until 07-18) is not.
	later := check(dir, items, time.Date(2023, 7, 9, 0, 0, 0, 0, time.UTC), time.Hour)
	for _, st := range later {
		want := stateStale
		if st.Item.Kind == kindTDXTCBInfo || st.Item.Kind == kindTDXRootCRL {
			want = stateFresh
		}
		if st.State != want {
			t.Errorf("%s on 2023-07-09: %s, want %s", st.Item.Path, st.State, want)
		}
	}

	t.Run("tcb info for another fmspc", func(t *testing.T) {
		ti := itemOf(t, items, kindTDXTCBInfo)
		body := bytes.Replace(bodies[ti.Path], []byte(`"fmspc":"50806f000000"`), []byte(`"fmspc":"00906ed50000"`), 1)
		f.set(ti.URL, fakeDoc{body: body, header: testcases.TcbInfoHeader})
		_, err := fe.fetch(context.Background(), t.TempDir(), []Item{ti})
		if !errors.Is(err, errDocument) || !strings.Contains(err.Error(), "fmspc") {
			t.Fatalf("other fmspc: %v", err)
		}
	})
	t.Run("missing issuer chain header", func(t *testing.T) {
		qi := itemOf(t, items, kindTDXQEIdentity)
		f.set(qi.URL, fakeDoc{body: bodies[qi.Path]})
		_, err := fe.fetch(context.Background(), t.TempDir(), []Item{qi})
		if !errors.Is(err, errDocument) {
			t.Fatalf("no chain header: %v", err)
		}
	})
}

func itemOf(t testing.TB, items []Item, kind string) Item {
	t.Helper()
	for _, it := range items {
		if it.Kind == kind {
			return it
		}
	}
	t.Fatalf("no %s item", kind)
	return Item{}
}

func itemStatus(sts []Status, path string) Status {
	for _, s := range sts {
		if s.Item.Path == path {
			return s
		}
	}
	return Status{}
}

// TestFetchSimTDX: the simulated TDX platform's collateral (TEST ONLY, signed
// under the simulation root) through a loopback PCS: strict verification
// passes with it, a PCK on the fetched CRL is refused as revoked, and an
// OutOfDate level is reported for the policy to judge.
func TestFetchSimTDX(t *testing.T) {
	ev, rd := simTDX(t)
	items, err := Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, base := newFake(t)
	publish := func(o fakeqe.PCSOptions) {
		o.Issued = testNow.Add(-day)
		pc, err := qe.PCSCollateral(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			switch it.Kind {
			case kindTDXTCBInfo:
				f.set(it.URL, fakeDoc{body: pc.TCBInfo, header: fakeqe.Header(it.ChainHeader, pc.TCBInfoIssuerChain)})
			case kindTDXQEIdentity:
				f.set(it.URL, fakeDoc{body: pc.QEIdentity, header: fakeqe.Header(it.ChainHeader, pc.QEIdentityIssuerChain)})
			case kindTDXPCKCRL:
				f.set(it.URL, fakeDoc{body: pc.PCKCRL, header: fakeqe.Header(it.ChainHeader, pc.PCKCRLIssuerChain)})
			case kindTDXRootCRL:
				f.set(it.URL, fakeDoc{body: pc.RootCRL})
			}
		}
	}
	verifyDir := func(dir string) (*platform.Result, error) {
		c, err := platform.LoadCollateralDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return platform.Verify(ev, rd, platform.Options{Now: func() time.Time { return testNow }, AllowSimulated: true, Collateral: c})
	}
	fe := testFetcher(base, nil)

	publish(fakeqe.PCSOptions{})
	dir := t.TempDir()
	if _, err := fe.fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	res, err := verifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Collateral != platform.StatusChecked || res.Revocation != platform.StatusChecked || res.TCBStatus != "UpToDate" {
		t.Fatalf("result %+v", res)
	}

	publish(fakeqe.PCSOptions{RevokePCK: true})
	dir = t.TempDir()
	if _, err := fe.fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	if _, err := verifyDir(dir); !errors.Is(err, platform.ErrRevoked) || !errors.Is(err, platform.ErrRejected) {
		t.Fatalf("revoked pck: %v", err)
	}

	publish(fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{{Status: "UpToDate", AboveQuote: true}, {Status: "OutOfDate", AdvisoryIDs: []string{"INTEL-SA-00837"}}}})
	dir = t.TempDir()
	if _, err := fe.fetch(context.Background(), dir, items); err != nil {
		t.Fatal(err)
	}
	res, err = verifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.TCBStatus != "OutOfDate" {
		t.Fatalf("tcb status %q", res.TCBStatus)
	}
	if err := platform.CheckPolicy(res, platform.Policy{AllowAnyMeasurement: true}); !errors.Is(err, platform.ErrPolicy) {
		t.Fatalf("out-of-date tcb accepted by the zero policy: %v", err)
	}
	ok := platform.Policy{AllowAnyMeasurement: true, TCBStatuses: []string{"OutOfDate"}, AllowedAdvisoryIDs: []string{"INTEL-SA-00837"}}
	if err := platform.CheckPolicy(res, ok); err != nil {
		t.Fatal(err)
	}
}
