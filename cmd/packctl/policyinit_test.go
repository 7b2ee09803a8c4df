package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/controltest"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/evidence"
)

// simAttester starts an in-process simulated attester and returns its
// public API URL, DID and launch measurement.
func simAttester(t *testing.T) (url, did string, meas []byte) {
	return startAttester(t, detect.Simulated, detect.Options{})
}

// startAttester starts an in-process attester on the platform.
func startAttester(t *testing.T, platform string, opts detect.Options) (url, did string, meas []byte) {
	t.Helper()
	return startAttesterWith(t, platform, opts, nil)
}

// startAttesterWith is startAttester with GPUs beside the platform.
func startAttesterWith(t *testing.T, platform string, opts detect.Options, gpus []enclave.Quoter) (url, did string, meas []byte) {
	t.Helper()
	d := controltest.Deps(t, attesterConfig(platform), platform, opts, slog.New(slog.DiscardHandler))
	d.GPUs = gpus
	return serveAttester(t, d)
}

// attesterConfig is the configuration of a test attester on platform.
func attesterConfig(platform string) []byte {
	return []byte(`{"attester":{"controlSocket":"/tmp/unused/control.sock","platform":"` + platform + `","trustedTemplates":{"x.txt":"sha256:` +
		strings.Repeat("0", 64) + `"},"modelProvider":"p","model":"m","allowUnlockedMemory":true}}`)
}

// serveAttester serves the attester of d in-process and returns its public
// API URL, DID and launch measurement.
func serveAttester(t *testing.T, d control.Deps) (url, did string, meas []byte) {
	t.Helper()
	p, id := d.Platform, d.Identity
	srv, err := control.New(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	api := httptest.NewServer(identityHandler(srv))
	t.Cleanup(api.Close)
	m, ok := detect.Capability[interface {
		LaunchMeasurement(context.Context) ([]byte, error)
	}](p)
	if !ok {
		t.Fatal("no measurement")
	}
	meas, err = m.LaunchMeasurement(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return api.URL, id.DID, meas
}

func runCmd(args ...string) (int, string, string) {
	var so, se bytes.Buffer
	code := run(args, nil, &so, &se)
	return code, so.String(), se.String()
}

func TestPolicyInit(t *testing.T) {
	url, did, meas := simAttester(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "policy.json")

	// A simulated attester needs the explicit flag; nothing is written.
	code, _, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-unchecked-revocation")
	if code != exitPolicy || !strings.Contains(se, "--allow-simulated") {
		t.Fatalf("simulated without the flag: exit %d\n%s", code, se)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("policy written although refused")
	}

	// Simulated evidence has no revocation list: without
	// --allow-unchecked-revocation policy init cannot check it, and says
	// which flag accepts that.
	code, _, se = runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated")
	if code != exitCannot || !strings.Contains(se, "--allow-unchecked-revocation") {
		t.Fatalf("simulated without the revocation flag: exit %d\n%s", code, se)
	}

	// From the URL, flags after nothing positional, pinning measurement and DID.
	code, so, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--allow-unchecked-revocation", "--pin", "measurement,did")
	if code != exitOK {
		t.Fatalf("policy init: exit %d\n%s", code, se)
	}
	if !strings.Contains(se, "TRUST ON FIRST USE") || !strings.Contains(so, "fresh challenge: true") || !strings.Contains(so, "pinned trusted_attester_dids: "+did) {
		t.Fatalf("summary:\n%s\n%s", so, se)
	}
	raw, pol := readPolicyFile(t, out)
	if len(pol.Measurements) != 1 || !bytes.Equal(pol.Measurements[0], meas) || !slices.Equal(pol.TrustedAttesterDIDs, []string{did}) ||
		!pol.AllowSimulated || pol.AllowAnyMeasurement || len(pol.TrustedTPMAKs) != 0 {
		t.Fatalf("policy %s", raw)
	}

	// Never overwritten without --force.
	code, _, se = runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--allow-unchecked-revocation")
	if code != exitUsage || !strings.Contains(se, "exists (use --force to overwrite)") {
		t.Fatalf("overwrite: exit %d %s", code, se)
	}
	after := testfile.Read(t, out)
	if !bytes.Equal(after, raw) {
		t.Fatal("policy changed without --force")
	}
	if code, _, se = runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--allow-unchecked-revocation", "--force"); code != exitOK {
		t.Fatalf("--force: exit %d %s", code, se)
	}

	// A saved identity FILE, with and without the challenge it was fetched with.
	challenge := b64u.Encode([]byte("saved-challenge"))
	r, err := httpGet(url + "/v1/identity?challenge=" + challenge)
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "identity.json")
	if err := os.WriteFile(idFile, r, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "p2.json")
	code, so, se = runCmd("policy", "init", "--from-attester", idFile, "--challenge", challenge, "-o", out2, "--allow-simulated", "--allow-unchecked-revocation", "--json")
	var sum policyInitJSON
	if code != exitOK || json.Unmarshal([]byte(so), &sum) != nil || !sum.Fresh || sum.Trust != "trust-on-first-use" || sum.AttesterDID != did || !sum.Simulated {
		t.Fatalf("from FILE: exit %d\n%s\n%s", code, so, se)
	}
	code, so, se = runCmd("policy", "init", "--from-attester", idFile, "-o", filepath.Join(dir, "p3.json"), "--allow-simulated", "--allow-unchecked-revocation", "--json")
	if code != exitOK || json.Unmarshal([]byte(so), &sum) != nil || sum.Fresh || !strings.Contains(se, "no --challenge") {
		t.Fatalf("from FILE without challenge: exit %d\n%s\n%s", code, so, se)
	}
	if code, _, se = runCmd("policy", "init", "--from-attester", idFile, "--challenge", b64u.Encode([]byte("other")), "-o", filepath.Join(dir, "p4.json"), "--allow-simulated", "--allow-unchecked-revocation"); code != exitRejected {
		t.Fatalf("stale challenge: exit %d %s", code, se)
	}

	// --pin tcb pins the TCB seen as the minimum.
	out6 := filepath.Join(dir, "p6.json")
	if code, so, se = runCmd("policy", "init", "--from-attester", url, "--pin", "tcb,measurement", "-o", out6, "--allow-simulated", "--allow-unchecked-revocation"); code != exitOK {
		t.Fatalf("--pin tcb: exit %d %s", code, se)
	}
	raw6 := testfile.Read(t, out6)
	p6, err := verify.ParsePolicy(bytes.TrimSuffix(raw6, []byte("\n")))
	if err != nil || (p6.MinSEVSNPTCB == 0 && p6.MinTDXTeeTCBSVN == [16]byte{}) || !strings.Contains(so, "pinned min_") {
		t.Fatalf("--pin tcb: %v\n%s\n%s", err, raw6, so)
	}

	// The written policy is what seal --attester and verify use.
	harness := filepath.Join("..", "..", "..", "shared", "conformance", "openclaw-sig")
	if _, err := os.Stat(harness); err == nil {
		pack := filepath.Join(dir, "pack.json")
		if code, _, se := runCmd("build", "--params", filepath.Join(harness, "vectors", "min.params.json"), "--harness", harness, "-o", pack); code != 0 {
			t.Fatalf("build: %s", se)
		}
		if code, _, se := runCmd("seal", "--attester", url, "--policy", out, "-o", filepath.Join(dir, "p.enc"), "--manifest", filepath.Join(dir, "m.json"), pack); code != exitOK {
			t.Fatalf("seal with the TOFU policy: exit %d %s", code, se)
		}
	}

	// A tampered identity: refused, nothing written.
	var doc map[string]any
	json.Unmarshal(r, &doc)
	doc["pack_public_key"] = "clawea-promptpack-v1-pub:" + b64u.Encode(bytes.Repeat([]byte{9}, 32))
	swapped, _ := json.Marshal(doc)
	bad := filepath.Join(dir, "bad-identity.json")
	os.WriteFile(bad, swapped, 0o644)
	if code, _, se = runCmd("policy", "init", "--from-attester", bad, "--challenge", challenge, "-o", filepath.Join(dir, "p5.json"), "--allow-simulated", "--allow-unchecked-revocation"); code != exitRejected {
		t.Fatalf("swapped pack key: exit %d %s", code, se)
	}
	if _, err := os.Stat(filepath.Join(dir, "p5.json")); err == nil {
		t.Fatal("policy written for a tampered identity")
	}

	// Usage errors name what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from-attester", idFile}, "missing required flag -o"},
		{[]string{"-o", filepath.Join(dir, "x.json")}, "missing required flag --from-attester"},
		{[]string{"--from-attester", idFile, "-o", filepath.Join(dir, "x.json"), "--pin", "measurement,colour"}, `unknown value "colour"`},
		{[]string{"--from-attester", idFile, "-o", filepath.Join(dir, "x.json"), "--pin", "templates"}, "missing required flag --trusted"},
		{[]string{"--from-attester", idFile, "-o", filepath.Join(dir, "x.json"), "--pin", "ak", "--allow-simulated", "--allow-unchecked-revocation"}, "no TPM quote"},
		{[]string{"--from-attester", out, "-o", filepath.Join(dir, "x.json")}, "is a verify policy, not an attester identity"},
	} {
		code, _, se := runCmd(append([]string{"policy", "init"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(se, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, se, tc.want)
		}
	}

	// inspect shows the identity, unverified, with the measurement seen.
	code, so, se = runCmd("inspect", idFile)
	if code != exitOK || !strings.Contains(so, "kind: identity\n") || !strings.Contains(so, "verified: false\n") ||
		!strings.Contains(so, "key_attestation.evidence[0].measurement_b64u: "+b64u.Encode(meas)+"\n") ||
		!strings.Contains(so, "key_attestation.challenge_b64u: "+challenge+"\n") || !strings.Contains(so, "key_attestation.simulated: true\n") {
		t.Fatalf("inspect identity: exit %d\n%s%s", code, so, se)
	}
}

func httpGet(u string) ([]byte, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// TestPolicyInitTPM learns and pins the AK Name of a TPM attester (swtpm):
// a TPM key attestation verifies only with a trusted AK, so policy init
// pins it even when not asked to.
func TestPolicyInitTPM(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	url, did, meas := startAttester(t, evidence.PlatformTPM, detect.Options{TPM: tpm.Options{Address: in.Addr}})
	out := filepath.Join(t.TempDir(), "policy.json")
	code, so, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--json")
	if code != exitOK {
		t.Fatalf("policy init: exit %d\n%s", code, se)
	}
	var sum policyInitJSON
	if err := json.Unmarshal([]byte(so), &sum); err != nil || sum.AttesterDID != did || !sum.Fresh {
		t.Fatalf("summary %s (%v)", so, err)
	}
	raw, pol := readPolicyFile(t, out)
	if len(pol.TrustedTPMAKs) != 1 || len(pol.Measurements) != 1 || !bytes.Equal(pol.Measurements[0], meas) || !strings.Contains(se, "AK Name is pinned") {
		t.Fatalf("policy %s\n%s", raw, se)
	}
	// inspect shows the same AK Name and the PCR digest, unverified.
	idFile := savedIdentity(t, url)
	code, so, se = runCmd("inspect", idFile)
	if code != exitOK || !strings.Contains(so, fmt.Sprintf("key_attestation.evidence[0].tpm.ak_name_hex: %x\n", pol.TrustedTPMAKs[0])) ||
		!strings.Contains(so, "key_attestation.evidence[0].tpm.pcr_digest_b64u: "+b64u.Encode(meas)+"\n") {
		t.Fatalf("inspect TPM identity: exit %d\n%s%s", code, so, se)
	}
	// A policy that pins another AK refuses the attester and names the AK
	// seen and the policy member (the class stays rejected).
	seen := bytes.Clone(pol.TrustedTPMAKs[0])
	other := bytes.Clone(seen)
	other[5] ^= 1
	pol.TrustedTPMAKs = [][]byte{other}
	enc, _ := pol.Encode()
	otherPol := filepath.Join(t.TempDir(), "other.json")
	os.WriteFile(otherPol, enc, 0o644)
	code, _, se = runCmd("seal", "--attester", idFile, "--challenge", b64u.Encode([]byte("c")), "--policy", otherPol, "-o", filepath.Join(t.TempDir(), "x"), "--manifest", filepath.Join(t.TempDir(), "y"), "nopack.json")
	if code != exitRejected || !strings.Contains(se, fmt.Sprintf("ak name %x", seen)) || !strings.Contains(se, "trusted_tpm_ak_names_hex") {
		t.Fatalf("other AK: exit %d %s", code, se)
	}
}

// TestPolicyInitGPU: from an attester with a GPU, policy init pins the
// CPU's and the GPU's measurements and require_gpu, and the policy accepts
// the attester's key attestation.
func TestPolicyInitGPU(t *testing.T) {
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	url, _, meas := startAttesterWith(t, detect.Simulated, detect.Options{}, []enclave.Quoter{g})
	out := filepath.Join(t.TempDir(), "policy.json")
	code, so, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--allow-unchecked-revocation")
	if code != exitOK || !strings.Contains(so, "require_gpu: true (evidence[1] nvidia-gpu)") {
		t.Fatalf("policy init: exit %d\n%s\n%s", code, so, se)
	}
	raw, pol := readPolicyFile(t, out)
	if !pol.RequireGPU || !pol.AllowUncheckedGPURevocation || !strings.Contains(se, "allow_unchecked_gpu_revocation") || len(pol.Measurements) != 2 || !bytes.Equal(pol.Measurements[0], meas) || len(pol.Measurements[1]) != 48 {
		t.Fatalf("policy %s", raw)
	}
}

// readPolicyFile reads and parses a policy file policy init wrote.
func readPolicyFile(t *testing.T, path string) ([]byte, *verify.Policy) {
	t.Helper()
	raw := testfile.Read(t, path)
	pol, err := verify.ParsePolicy(bytes.TrimSuffix(raw, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	return raw, pol
}

// TestPolicyInitBootChain: --pin boot pins the boot chain a TPM attester's
// event log replays to (PCRs 0-9 extended from go-eventlog's cos-121 boot
// log); the policy admits the attester, and the attester without its log
// is refused.
func TestPolicyInitBootChain(t *testing.T) {
	in, _, logFile := swtpmtest.StartWithBootLog(t)
	pcrs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	url, _, _ := startAttester(t, evidence.PlatformTPM, detect.Options{TPM: tpm.Options{Address: in.Addr, PCRs: pcrs, EventLogPath: logFile}})
	out := filepath.Join(t.TempDir(), "policy.json")
	code, so, se := runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated", "--pin", "measurement,boot")
	if code != exitOK {
		t.Fatalf("policy init: exit %d\n%s%s", code, so, se)
	}
	raw, pol := readPolicyFile(t, out)
	// Every boot application of this GRUB boot is pinned (three), though
	// with the measurement pinned only the last is checked.
	if len(pol.BootFirmware) != 1 || len(pol.BootKernel) != 3 || pol.BootCommandLine != nil || !strings.Contains(so, "pinned boot_kernel_hex: ") {
		t.Fatalf("policy %s\n%s", raw, so)
	}
	// inspect shows the log the evidence carries, replayed, unverified.
	idFile := savedIdentity(t, url)
	code, so, se = runCmd("inspect", idFile)
	if code != exitOK || !strings.Contains(so, fmt.Sprintf("key_attestation.evidence[0].event_log.boot_kernel_hex[0]: %x\n", pol.BootKernel[0])) ||
		!strings.Contains(so, fmt.Sprintf("key_attestation.evidence[0].event_log.boot_kernel_last_hex: %x\n", pol.BootKernel[2])) ||
		!strings.Contains(so, "key_attestation.evidence[0].event_log.verified: false\n") {
		t.Fatalf("inspect: exit %d\n%s%s", code, so, se)
	}
	// --pin boot on an attester without an event log cannot pin anything.
	in2 := swtpmtest.StartForTest(t)
	url2, _, _ := startAttester(t, evidence.PlatformTPM, detect.Options{TPM: tpm.Options{Address: in2.Addr}})
	code, _, se = runCmd("policy", "init", "--from-attester", url2, "-o", filepath.Join(t.TempDir(), "p.json"), "--allow-simulated", "--pin", "boot")
	if code != exitCannot || !strings.Contains(se, "carries no event log") {
		t.Fatalf("no log: exit %d %s", code, se)
	}
}

// TestInspectGCEAKCert: an attester on a vTPM with a certified AK (a swtpm
// provisioned like GCE's) carries the AK certificate, and inspect shows it.
func TestInspectGCEAKCert(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test EK/AK CA Root"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	ca := testcert.Create(t, caTmpl, caTmpl, caKey.Public(), caKey)
	err = in.ProvisionGCEAK(func(pub crypto.PublicKey) ([]byte, error) {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test vTPM AK"}, NotBefore: ca.NotBefore, NotAfter: ca.NotAfter}
		return testcert.Create(t, tmpl, ca, pub, caKey).Raw, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	url, _, _ := startAttester(t, evidence.PlatformTPM, detect.Options{TPM: tpm.Options{Address: in.Addr, GCEAK: true}})
	idFile := savedIdentity(t, url)
	code, so, se := runCmd("inspect", idFile)
	if code != exitOK || !strings.Contains(so, "key_attestation.evidence[0].tpm.ak_certificate.subject: CN=test vTPM AK\n") {
		t.Fatalf("inspect: exit %d\n%s%s", code, so, se)
	}
	// A certificate from a CA that is not Google's trusts nothing: policy
	// init pins the AK Name, as for any TPM.
	out := filepath.Join(t.TempDir(), "policy.json")
	if code, so, se = runCmd("policy", "init", "--from-attester", url, "-o", out, "--allow-simulated"); code != exitOK {
		t.Fatalf("policy init: exit %d\n%s%s", code, so, se)
	}
	raw, pol := readPolicyFile(t, out)
	if pol.TrustGCEAKCerts || len(pol.TrustedTPMAKs) != 1 {
		t.Fatalf("policy %s", raw)
	}
}

// savedIdentity fetches the attester's identity with a challenge and saves
// it to a file for inspect.
func savedIdentity(t *testing.T, url string) string {
	t.Helper()
	idRaw, err := httpGet(url + "/v1/identity?challenge=" + b64u.Encode([]byte("c")))
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "identity.json")
	if err := os.WriteFile(idFile, idRaw, 0o644); err != nil {
		t.Fatal(err)
	}
	return idFile
}
