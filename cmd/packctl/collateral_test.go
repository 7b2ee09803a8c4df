package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/verify/collateral"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/simroots"
)

// kdsFake serves the simulated SEV-SNP machine's KDS documents on loopback
// and counts requests; failing makes every answer a 503.
type kdsFake struct {
	mu       sync.Mutex
	docs     map[string][]byte
	requests int
	failing  bool
}

func (k *kdsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests++
	if k.failing {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	b, ok := k.docs[r.URL.RequestURI()]
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(b)
}

func (k *kdsFake) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.requests
}

func scriptEvidence(t *testing.T, path string) *evidence.Evidence {
	t.Helper()
	b := bytes.TrimSpace(testfile.Read(t, path))
	key, err := evidencedoc.SignerKey(b)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := evidencedoc.Parse(b, key)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Items[0].Evidence
}

// TestCollateralFetchThenVerify runs packctl collateral fetch against a
// loopback KDS, then packctl verify with the strict default (revocation
// required) on the fetched directory.
func TestCollateralFetchThenVerify(t *testing.T) {
	in := scriptFiles(t)
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ev := scriptEvidence(t, in("sev/evidence.jws"))
	leaf, err := x509.ParseCertificate(ev.CertChain[0])
	if err != nil {
		t.Fatal(err)
	}
	items, err := collateral.Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	k := &kdsFake{docs: map[string][]byte{}}
	var crlURL string
	for _, it := range items {
		switch it.Kind {
		case "sev-snp-vcek":
			k.docs[it.URL] = ev.CertChain[0]
		case "sev-snp-cert-chain":
			k.docs[it.URL] = simroots.SEVSNPCertChainPEM()
		case "sev-snp-crl":
			crlURL = it.URL
			k.docs[it.URL] = testfixture.SimSEVCRL(t, at.Add(-time.Hour), at.Add(48*time.Hour))
		}
	}
	srv := httptest.NewServer(k)
	defer srv.Close()
	coll := filepath.Join(t.TempDir(), "collateral")
	run1 := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(args, nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	fetch := []string{"collateral", "fetch", "--evidence", in("sev/evidence.jws"), "--collateral", coll,
		"--kds-url", srv.URL, "--at", "2026-06-01T12:00:00Z", "--backoff", "1ms"}
	verifyArgs := []string{"verify", "--attestation", in("sev/attestation.json"), "--evidence", in("sev/evidence.jws"),
		"--policy", in("strict.json"), "--allow-simulated", "--collateral", coll, "--at", "2026-06-01T12:00:00Z"}

	// Simulated evidence is never sent to AMD's own service: refused, and
	// nothing is asked of anyone.
	code, _, se := run1("collateral", "fetch", "--evidence", in("sev/evidence.jws"), "--collateral", coll, "--at", "2026-06-01T12:00:00Z")
	if code != exitUsage || !strings.Contains(se, "is simulated") || k.count() != 0 {
		t.Fatalf("simulated evidence at the vendor: exit %d\n%s", code, se)
	}

	// --offline on an empty directory names every missing document.
	code, out, _ := run1("collateral", "fetch", "--offline", "--evidence", in("sev/evidence.jws"), "--collateral", coll, "--at", "2026-06-01T12:00:00Z")
	if code != exitCannot || strings.Count(out, "missing") != 3 || !strings.Contains(out, "INCOMPLETE") || k.count() != 0 {
		t.Fatalf("offline check of an empty dir: exit %d\n%s", code, out)
	}
	// Without collateral the strict verifier cannot check revocation.
	if code, _, _ := run1(verifyArgs...); code != exitCannot {
		t.Fatalf("verify without collateral: exit %d", code)
	}

	code, out, errOut := run1(fetch...)
	if code != exitOK || !strings.Contains(out, "COMPLETE: 3 documents") || k.count() != 3 {
		t.Fatalf("fetch: exit %d requests %d\n%s\n%s", code, k.count(), out, errOut)
	}
	if !strings.Contains(errOut, "packctl: collateral fetch: [1/3]") {
		t.Fatalf("no progress line on stderr: %q", errOut)
	}
	if code, out, _ := run1("collateral", "check", "--evidence", in("sev/evidence.jws"), "--collateral", coll, "--at", "2026-06-01T12:00:00Z", "--json"); code != exitOK {
		t.Fatalf("check after fetch: exit %d\n%s", code, out)
	} else {
		var j collateralJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil || !j.Complete || len(j.Documents) != 3 {
			t.Fatalf("check json %q: %v", out, err)
		}
	}
	if code, out, errOut := run1(verifyArgs...); code != exitOK {
		t.Fatalf("verify with fetched collateral: exit %d\n%s\n%s", code, out, errOut)
	}

	// Cached: a second fetch makes no request.
	if code, _, _ := run1(fetch...); code != exitOK || k.count() != 3 {
		t.Fatalf("cached fetch: exit %d, %d requests", code, k.count())
	}

	// Three days later the CRL is stale: check says so, and a persistently
	// failing KDS makes fetch exit 3 after the bounded attempts.
	later := "2026-06-04T12:00:00Z"
	code, out, _ = run1("collateral", "check", "--evidence", in("sev/evidence.jws"), "--collateral", coll, "--at", later)
	if code != exitCannot || !strings.Contains(out, "stale") {
		t.Fatalf("check with a stale crl: exit %d\n%s", code, out)
	}
	k.mu.Lock()
	k.failing = true
	k.mu.Unlock()
	before := k.count()
	laterFetch := append(append([]string(nil), fetch...), "--attempts", "3")
	laterFetch[len(fetch)-3] = later // --at value
	code, _, errOut = run1(laterFetch...)
	if code != exitCannot || k.count()-before != 3 || !strings.Contains(errOut, "status 503") {
		t.Fatalf("persistent failure: exit %d, %d requests\n%s", code, k.count()-before, errOut)
	}

	// The KDS revokes the VCEK: fetch succeeds, verify refuses (exit 2).
	k.mu.Lock()
	k.failing = false
	k.docs[crlURL] = testfixture.SimSEVCRL(t, at.Add(time.Hour), at.Add(96*time.Hour), leaf.SerialNumber)
	k.mu.Unlock()
	if code, out, errOut := run1(laterFetch...); code != exitOK {
		t.Fatalf("fetch of the revoking crl: exit %d\n%s\n%s", code, out, errOut)
	}
	verifyLater := append([]string(nil), verifyArgs...)
	verifyLater[len(verifyLater)-1] = later
	code, _, errOut = run1(verifyLater...)
	if code != exitRejected || !strings.Contains(errOut, "revoked") {
		t.Fatalf("revoked vcek: exit %d\n%s", code, errOut)
	}
}

func TestCollateralUsage(t *testing.T) {
	for _, args := range [][]string{
		{"collateral"},
		{"collateral", "pull"},
		{"collateral", "fetch", "--collateral", "x"},
		{"collateral", "fetch", "--evidence", "x"},
		{"collateral", "fetch", "--evidence", "x", "--collateral", "y", "--attempts", "0"},
		{"collateral", "check", "--evidence", "x", "--collateral", "y", "--kds-url", "http://127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want usage", args, code)
		}
	}
	// Not an evidence document: rejected input.
	bad := filepath.Join(t.TempDir(), "bad.jws")
	if err := os.WriteFile(bad, []byte("not.a.jws"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"collateral", "check", "--evidence", bad, "--collateral", t.TempDir()}, nil, &stdout, &stderr); code != exitRejected {
		t.Fatalf("bad evidence: exit %d", code)
	}
}

// TestCollateralTDXOutOfDate: packctl collateral fetch against a loopback
// PCS serving TEST ONLY TCB info (signed under the simulation root) that
// rates the simulated platform OutOfDate with an advisory; packctl verify
// refuses it by default (exit 4, naming the value and the policy member) and
// accepts it with a policy listing both, and the EAR records the status.
func TestCollateralTDXOutOfDate(t *testing.T) {
	const sa = "INTEL-SA-00837"
	in := scriptFiles(t)
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	ev := scriptEvidence(t, in("tdx/evidence.jws"))
	items, err := collateral.Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := qe.PCSCollateral(fakeqe.PCSOptions{Issued: at.Add(-24 * time.Hour), TCBLevels: []fakeqe.TCBLevel{
		{Status: "UpToDate", AboveQuote: true}, {Status: "OutOfDate", AdvisoryIDs: []string{sa}}}})
	if err != nil {
		t.Fatal(err)
	}
	pcs := &headerFake{docs: map[string]fakeAnswer{}}
	for _, it := range items {
		switch it.Kind {
		case "tdx-tcb-info":
			pcs.docs[it.URL] = fakeAnswer{pc.TCBInfo, fakeqe.Header(it.ChainHeader, pc.TCBInfoIssuerChain)}
		case "tdx-qe-identity":
			pcs.docs[it.URL] = fakeAnswer{pc.QEIdentity, fakeqe.Header(it.ChainHeader, pc.QEIdentityIssuerChain)}
		case "tdx-pck-crl":
			pcs.docs[it.URL] = fakeAnswer{pc.PCKCRL, fakeqe.Header(it.ChainHeader, pc.PCKCRLIssuerChain)}
		case "tdx-root-ca-crl":
			pcs.docs[it.URL] = fakeAnswer{pc.RootCRL, nil}
		}
	}
	srv := httptest.NewServer(pcs)
	defer srv.Close()
	coll := filepath.Join(t.TempDir(), "collateral")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"collateral", "fetch", "--evidence", in("tdx/evidence.jws"), "--collateral", coll,
		"--pcs-url", srv.URL, "--intel-certs-url", srv.URL, "--at", "2026-06-01T12:00:00Z"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("fetch: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	pol := testfile.Read(t, in("policy.json"))
	var base map[string]any
	if err := json.Unmarshal(pol, &base); err != nil {
		t.Fatal(err)
	}
	writePolicy := func(name, extra string) string {
		p := fmt.Sprintf(`{"policy_version":"clawea.dev/verify-policy/v1","allow_simulated":true,"measurements_b64u":%s%s}`,
			string(testjson.Marshal(t, base["measurements_b64u"])), extra)
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	verifyArgs := func(policy string, extra ...string) []string {
		return append([]string{"verify", "--attestation", in("tdx/attestation.json"), "--evidence", in("tdx/evidence.jws"),
			"--policy", policy, "--collateral", coll, "--at", "2026-06-01T12:00:00Z"}, extra...)
	}
	stdout.Reset()
	stderr.Reset()
	code := run(verifyArgs(writePolicy("strict.json", "")), nil, &stdout, &stderr)
	if code != exitPolicy || !strings.Contains(stderr.String(), `"OutOfDate"`) || !strings.Contains(stderr.String(), "tdx_tcb_statuses") {
		t.Fatalf("default policy: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	allowing := writePolicy("allowing.json", `,"tdx_tcb_statuses":["OutOfDate"],"tdx_allowed_advisory_ids":["`+sa+`"]`)
	earOut := filepath.Join(t.TempDir(), "ear.jwt")
	stdout.Reset()
	stderr.Reset()
	code = run(verifyArgs(allowing, "--json", "--ear-key", in("ear-key.pem"), "--ear-out", earOut), nil, &stdout, &stderr)
	if code != exitOK || !strings.Contains(stdout.String(), `"tcb_status": "OutOfDate"`) || !strings.Contains(stdout.String(), `"revocation": "checked"`) {
		t.Fatalf("allowing policy: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	keyPEM := testfile.Read(t, in("ear-key.pem"))
	signer, err := earresult.ParseSigningKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tok := testfile.Read(t, earOut)
	var ar ear.AttestationResult
	if err := ar.Verify(bytes.TrimSpace(tok), jwa.EdDSA, signer.Public()); err != nil {
		t.Fatal(err)
	}
	ap := ar.Submods[earresult.SubmodName]
	annot := *ap.VeraisonAnnotatedEvidence
	ts, _ := annot["tcb_statuses"].([]interface{})
	if *ap.Status != ear.TrustTierWarning || ap.TrustVector.Hardware != ear.UnsafeHardwareClaim || len(ts) != 1 ||
		ts[0].(map[string]interface{})["tcb_status"] != "OutOfDate" {
		t.Fatalf("ear status %v hardware %v tcb %v", *ap.Status, ap.TrustVector.Hardware, ts)
	}
}

type fakeAnswer struct {
	body   []byte
	header map[string][]string
}

// headerFake serves fixed answers with headers, as the PCS does.
type headerFake struct{ docs map[string]fakeAnswer }

func (h *headerFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, ok := h.docs[r.URL.RequestURI()]
	if !ok {
		http.NotFound(w, r)
		return
	}
	for k, v := range a.header {
		w.Header()[k] = v
	}
	_, _ = w.Write(a.body)
}
