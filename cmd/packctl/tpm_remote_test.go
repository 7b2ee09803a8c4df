package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/tpmquote"
)

// startTPMAttester builds and starts the real attester binary on the swtpm
// at addr (attester.tpm.address) and returns its public URL.
func startTPMAttester(t *testing.T, addr string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "attester")
	if out, err := exec.Command("go", "build", "-o", bin, "../attester").CombinedOutput(); err != nil {
		t.Fatalf("go build attester: %v\n%s", err, out)
	}
	cfg, _ := json.Marshal(map[string]any{
		"attester": map[string]any{
			"listen": "127.0.0.1:0", "metricsListen": "127.0.0.1:0",
			"controlSocket": filepath.Join(dir, "ctl", "attester.sock"),
			"platform":      "tpm", "tpm": map[string]any{"address": addr},
			"trustedTemplates":    map[string]string{"identity.txt": "sha256:" + strings.Repeat("ab", 32)},
			"allowUnlockedMemory": true, "modelProvider": "anthropic", "model": "claude-test",
		},
	})
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var logs bytes.Buffer
	var logsMu sync.Mutex
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			logsMu.Lock()
			logs.Write(append(sc.Bytes(), '\n'))
			logsMu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "attester listening" {
				a, _ := m["addr"].(string)
				listening <- a
			}
		}
	}()
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case a := <-listening:
		return "http://" + a
	case <-exited:
	case <-time.After(30 * time.Second):
	}
	logsMu.Lock()
	defer logsMu.Unlock()
	t.Fatalf("attester did not start: %s", logs.String())
	return ""
}

// relay sits between packctl and the attester, records the requests it
// forwards and can change answers, as a network attacker could.
type relay struct {
	mu       sync.Mutex
	seen     []string
	answers  [][]byte // bodies of the attester's 200 answers to POST /v1/tpm/activate
	replay   []byte   // when set, answered to POST /v1/tpm/activate instead of forwarding
	otherAK  []byte   // when set, replaces ak_public_b64u in GET /v1/tpm/ek
	busy     int      // POSTs answered 429 (Retry-After: 1) before forwarding
	upstream string
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rl.mu.Lock()
	rl.seen = append(rl.seen, r.Method+" "+r.URL.Path)
	replay, otherAK, busy := rl.replay, rl.otherAK, rl.busy > 0 && r.Method == http.MethodPost
	if busy {
		rl.busy--
	}
	rl.mu.Unlock()
	if busy {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":"too many credential activations; retry later"}`))
		return
	}
	if replay != nil && r.Method == http.MethodPost {
		w.Header().Set("Content-Type", "application/json")
		w.Write(replay)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequest(r.Method, rl.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if otherAK != nil && r.URL.Path == "/v1/tpm/ek" && resp.StatusCode == 200 {
		var m map[string]any
		json.Unmarshal(out, &m)
		m["ak_public_b64u"] = b64u.Encode(otherAK)
		out, _ = json.Marshal(m)
	}
	if r.Method == http.MethodPost && resp.StatusCode == 200 {
		rl.mu.Lock()
		rl.answers = append(rl.answers, out)
		rl.mu.Unlock()
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// set changes the relay's behaviour under its lock.
func (rl *relay) set(f func(*relay)) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	f(rl)
}

func (rl *relay) take() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	s := rl.seen
	rl.seen = nil
	return s
}

// TestTPMActivateRemote: a verifier runs "packctl tpm activate --attester"
// against the real attester binary on a manufactured swtpm, through a
// relay playing the network. Then a key attestation (a TPM quote) of that
// attester verifies through the record alone (RequireTPMEKCertifiedAK, no
// pinned AK).
func TestTPMActivateRemote(t *testing.T) {
	a := newTPMActivation(t)
	in, root, other, rootsPEM, interPEM, otherPEM, rec := a.in, a.root, a.other, a.rootsPEM, a.interPEM, a.otherPEM, a.rec
	base := startTPMAttester(t, in.Addr)
	rl := &relay{upstream: base}
	front := httptest.NewServer(rl)
	t.Cleanup(front.Close)

	activate := func(roots string, extra ...string) (int, string, string) {
		return runCmd(append([]string{"tpm", "activate", "--attester", front.URL, "--ek-roots", roots, "--intermediate", interPEM, "--by", "auditor", "-o", rec}, extra...)...)
	}
	noRecord := func(what string) {
		t.Helper()
		if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: a record was written", what)
		}
	}

	// A wrong root: refused after GET /v1/tpm/ek, before any challenge is
	// made or sent.
	code, _, stderr := activate(otherPEM)
	if code != exitRejected || !strings.Contains(stderr, "does not chain") {
		t.Fatalf("wrong root: exit %d: %s", code, stderr)
	}
	if seen := rl.take(); len(seen) != 1 || seen[0] != "GET /v1/tpm/ek" {
		t.Fatalf("wrong root: requests %v", seen)
	}
	noRecord("wrong root")

	// The AK replaced in transit by a software key with AK attributes:
	// the attester refuses the credential for it (422), nothing written.
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := k.PublicKey.Bytes()
	otherAK := (&tpmquote.Public{Type: tpmquote.AlgECC, Attributes: tpmquote.AKRequiredAttributes | tpmquote.AttrUserWithAuth | tpmquote.AttrNoDA, X: kb[1:33], Y: kb[33:]}).Marshal()
	rl.set(func(rl *relay) { rl.otherAK = otherAK })
	code, _, stderr = activate(rootsPEM)
	if code != exitRejected || !strings.Contains(stderr, "another attestation key") {
		t.Fatalf("other ak: exit %d: %s", code, stderr)
	}
	if seen := rl.take(); len(seen) != 2 || seen[1] != "POST /v1/tpm/activate" {
		t.Fatalf("other ak: requests %v", seen)
	}
	noRecord("other ak")
	rl.set(func(rl *relay) { rl.otherAK = nil })

	// Usage: one mode, an http(s) URL.
	for _, args := range [][]string{
		{"--attester", "ftp://x", "--ek-roots", rootsPEM, "--by", "a", "-o", rec},
		{"--attester", front.URL, "--address", in.Addr, "--ek-roots", rootsPEM, "--by", "a", "-o", rec},
		{"--attester", front.URL, "--ek-roots", rootsPEM, "-o", rec},
	} {
		if code, _, _ := runCmd(append([]string{"tpm", "activate"}, args...)...); code != exitUsage {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	if seen := rl.take(); len(seen) != 0 {
		t.Fatalf("usage errors: requests %v", seen)
	}

	// The genuine exchange, once rate limited (429, Retry-After: 1): packctl
	// waits and sends the same challenge again.
	rl.set(func(rl *relay) { rl.busy = 1 })
	code, stdout, stderr := activate(rootsPEM, "--json")
	if code != exitOK || !strings.Contains(stderr, "retrying in 1s") {
		t.Fatalf("activate: exit %d: %s", code, stderr)
	}
	if seen := rl.take(); len(seen) != 3 || seen[1] != seen[2] {
		t.Fatalf("activate: requests %v", seen)
	}
	sum, raw, cert, err := a.record(t, stdout)
	if err != nil || cert.ActivatedBy != "auditor" || sum.TPMModel != "swtpm" {
		t.Fatalf("record: %v %+v", err, sum)
	}
	if code, _, stderr := runCmd("tpm", "check", "--ek-roots", rootsPEM, rec); code != exitOK {
		t.Fatalf("check: exit %d: %s", code, stderr)
	}
	// Never overwritten, refused before the network.
	if code, _, _ := activate(rootsPEM); code != exitCannot {
		t.Fatalf("overwrite: exit %d", code)
	}
	if seen := rl.take(); len(seen) != 0 {
		t.Fatalf("overwrite: requests %v", seen)
	}

	// The attester's earlier answer replayed to a new activation: the
	// secret is another, the check fails, nothing written.
	rl.mu.Lock()
	if len(rl.answers) != 1 {
		t.Fatalf("%d answers relayed", len(rl.answers))
	}
	rl.replay = rl.answers[0]
	rl.mu.Unlock()
	rec2 := rec + ".2"
	code, _, stderr = runCmd("tpm", "activate", "--attester", front.URL, "--ek-roots", rootsPEM, "--intermediate", interPEM, "--by", "auditor", "-o", rec2)
	if code != exitRejected || !strings.Contains(stderr, "does not match") {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(rec2); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("replay: a record was written")
	}

	// A quote of that attester, answering a fresh challenge, verifies
	// through the record alone: no pinned AK, EK certification required.
	challenge := make([]byte, 32)
	rand.Read(challenge)
	resp, err := http.Get(base + "/v1/identity?challenge=" + url.QueryEscape(b64u.Encode(challenge)))
	if err != nil {
		t.Fatal(err)
	}
	var id identityDoc
	err = json.NewDecoder(resp.Body).Decode(&id)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("identity: %d %v", resp.StatusCode, err)
	}
	policy := func(roots []byte, certs ...[]byte) *verify.Policy {
		t.Helper()
		var cs []string
		for _, c := range certs {
			cs = append(cs, fmt.Sprintf("%q", b64u.Encode(c)))
		}
		p, err := verify.ParsePolicy(fmt.Appendf(nil, `{"policy_version":%q,"allow_simulated":true,"allow_any_measurement":true,`+
			`"tpm_ek_roots_b64u":[%q],"tpm_ak_certifications_b64u":[%s],"require_tpm_ek_certified_ak":true}`,
			verify.PolicyVersion, b64u.Encode(roots), strings.Join(cs, ",")))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	opts := verify.Options{Now: time.Now, AllowSimulated: true}
	res, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, policy(root, raw), opts)
	if err != nil {
		t.Fatalf("key attestation through the record: %v", err)
	}
	if len(res.Platform) != 1 || res.Platform[0].TPM == nil || res.Platform[0].TPM.AKProvenance != "ek-certified" ||
		res.Platform[0].TPM.TPM == nil || res.Platform[0].TPM.TPM.Model != "swtpm" {
		t.Fatalf("platform result: %+v", res.Platform)
	}
	// Without the record, or with roots the EK does not chain to, the same
	// quote is refused.
	if _, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, policy(root), opts); err == nil {
		t.Fatal("verified without a certification record")
	}
	if _, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, policy(other, raw), opts); err == nil {
		t.Fatal("verified with a record whose EK does not chain to the roots")
	}
}
