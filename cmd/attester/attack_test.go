package main

// These tests start the real attester binary and try the attacks of issue
// 13 against it, over TCP and over the control socket, as a process without
// the run's credential would. Each asserts the documented status and that
// nothing changed (the orchestrator's state is read back afterwards).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/bintest"
	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

var attesterBin string

func TestMain(m *testing.M) {
	// This binary re-executed as another process of an attack
	// (relay_test.go): run it and exit, without building anything.
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	bintest.Main(m, "attester", ".", &attesterBin)
}

// runRoute is one request on a run's routes.
type runRoute struct {
	method, path string
	body         any
}

// runRoutes are requests on each route of the run at base: a new turn with
// turn as its body, ownerTurn's verify and tool call, the audit log, the
// prompt, an attestation with attestation as its body, and the close.
func runRoutes(base, ownerTurn string, turn, attestation any) []runRoute {
	return []runRoute{
		{"POST", base + "/turns", turn},
		{"POST", base + "/verify", map[string]any{"turn_id": ownerTurn}},
		{"POST", base + "/tool-calls", map[string]any{"turn_id": ownerTurn, "tool": "exec"}},
		{"GET", base + "/audit", nil},
		{"GET", base + "/prompt", nil},
		{"POST", base + "/attestation", attestation},
		{"DELETE", base, nil},
	}
}

// packFixture is a pack built from the shared conformance data, not yet
// sealed (it is sealed to each attester's key).
type packFixture struct {
	pack    *promptpack.Pack
	rb      *promptpack.Rebuilt
	trusted map[string]string
}

func newPack(t *testing.T) *packFixture {
	t.Helper()
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	return &packFixture{pack: p.Pack, rb: p.Rebuilt, trusted: p.Trusted}
}

// attester is a running attester process.
type attester struct {
	cmd      *exec.Cmd
	public   string // http://host:port
	socket   string
	control  *http.Client
	tcp      *http.Client
	logs     *bintest.Buffer
	exited   chan struct{}
	exitCode int
}

// writeConfig writes an attester config; extra members override the
// attester section.
func writeConfig(t *testing.T, dir string, pf *packFixture, extra map[string]any) string {
	t.Helper()
	att := map[string]any{
		"listen": "127.0.0.1:0", "metricsListen": "127.0.0.1:0",
		"controlSocket": filepath.Join(dir, "ctl", "attester.sock"), "platform": "simulated",
		"trustedTemplates": pf.trusted, "allowUnlockedMemory": true,
		"modelProvider": "anthropic", "model": "claude-test",
		"owners": []string{"telegram:owner-1"},
	}
	for k, v := range extra {
		att[k] = v
	}
	cfg := map[string]any{
		"attester": att,
		"agents":   map[string]any{"defaults": map[string]any{"sig": map[string]any{"enforceVerification": true}}},
		"tools":    map[string]any{"deny": []string{"browser"}},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustStartAttester starts the attester on config and fails the test when
// it exits instead of listening.
func mustStartAttester(t *testing.T, config string) *attester {
	t.Helper()
	a, code := startAttester(t, config)
	if a == nil {
		t.Fatalf("attester exited with %d", code)
	}
	return a
}

// startWithPack starts the attester on a fresh pack (newPack) with the
// configuration writeConfig makes of it and extra, in a temporary folder.
func startWithPack(t *testing.T, extra map[string]any) (*attester, *packFixture) {
	t.Helper()
	pf := newPack(t)
	return mustStartAttester(t, writeConfig(t, t.TempDir(), pf, extra)), pf
}

// needRoot skips the test, saying why, unless it runs as root.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(why)
	}
}

// stateConfig makes a fresh pack (newPack) and writes the configuration
// writeConfig makes of it in a temporary folder, with its state folder
// there. It returns the pack, the configuration's path and the state
// folder.
func stateConfig(t *testing.T) (pf *packFixture, cfg, state string) {
	t.Helper()
	pf = newPack(t)
	dir := t.TempDir()
	state = filepath.Join(dir, "state")
	return pf, writeConfig(t, dir, pf, map[string]any{"stateDir": state}), state
}

// startAttester starts the binary and waits until it listens. It returns
// nil and the exit code when the process exits before listening.
func startAttester(t *testing.T, config string) (*attester, int) {
	t.Helper()
	cmd := exec.Command(attesterBin, "--config", config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	a := &attester{cmd: cmd, logs: &bintest.Buffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			a.logs.Write(append(bytes.Clone(line), '\n'))
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && m["msg"] == "attester listening" {
				listening <- m
			}
		}
	}()
	go func() {
		cmd.Wait()
		a.exitCode = cmd.ProcessState.ExitCode()
		close(a.exited)
	}()
	select {
	case m := <-listening:
		a.public = "http://" + m["addr"].(string)
		a.socket = m["control_socket"].(string)
	case <-a.exited:
		return nil, a.exitCode
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attester did not start: %s", a.logs.String())
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-a.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	a.control = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", a.socket)
	}}, Timeout: 30 * time.Second}
	a.tcp = &http.Client{Timeout: 30 * time.Second}
	return a, 0
}

type reply struct {
	code int
	body map[string]any
	raw  []byte
	hdr  http.Header
}

// req sends a request. overTCP selects the public listener; capability,
// when set, is sent as the bearer token; body is JSON (sent verbatim when
// it is a string or []byte).
func (a *attester) req(t *testing.T, overTCP bool, method, path, capability string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	base, c := "http://attester", a.control
	if overTCP {
		base, c = a.public, a.tcp
	}
	r, _ := http.NewRequest(method, base+path, rd)
	if rd != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if capability != "" {
		r.Header.Set("Authorization", "Bearer "+capability)
	}
	resp, err := c.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if resp.StatusCode != http.StatusNoContent && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/jsonl") {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Errorf("%s %s: %d: not a JSON body: %q", method, path, resp.StatusCode, raw)
		}
	}
	return reply{code: resp.StatusCode, body: m, raw: raw, hdr: resp.Header}
}

// runHandle is a run as its orchestrator holds it.
type runHandle struct {
	id, capability string
	committed      poh.EventChainEntry
	ctHash         string
}

func (a *attester) createRun(t *testing.T, pf *packFixture, sessionKey string) runHandle {
	t.Helper()
	r := a.tryCreateRun(t, pf, sessionKey)
	if r.code != 201 {
		t.Fatalf("create run: %d %v", r.code, r.body)
	}
	var resp struct {
		RunID           string              `json:"run_id"`
		Capability      string              `json:"capability"`
		PromptCommitted poh.EventChainEntry `json:"prompt_committed"`
		CTHash          string              `json:"prompt_pack_ciphertext_hash_b64u"`
	}
	json.Unmarshal(r.raw, &resp)
	return runHandle{id: resp.RunID, capability: resp.Capability, committed: resp.PromptCommitted, ctHash: resp.CTHash}
}

// identityKeys are the attester's public keys as GET /v1/identity gives
// them: its identity key (the key of its DID), which signs the control
// answers, and its pack key, which packs are sealed to.
func (a *attester) identityKeys(t *testing.T) (ed25519.PublicKey, *envelope.PublicKey) {
	t.Helper()
	id := a.req(t, true, "GET", "/v1/identity", "", nil)
	did, err := didkey.Parse(id.body["did"].(string))
	if err != nil {
		t.Fatal(err)
	}
	pack, err := envelope.ParsePublicKey(id.body["pack_public_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return did, pack
}

func (a *attester) createBody(t *testing.T, pf *packFixture, sessionKey string) []byte {
	t.Helper()
	_, pub := a.identityKeys(t)
	enc, man, err := promptpack.SealPack(pf.pack, pub)
	if err != nil {
		t.Fatal(err)
	}
	mj, _ := man.MarshalJSON()
	b, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mj),
		"report_hash_b64u": pf.rb.ReportHashB64u(), "agent_id": "main", "session_key": sessionKey})
	return b
}

func (a *attester) tryCreateRun(t *testing.T, pf *packFixture, sessionKey string) reply {
	t.Helper()
	return a.req(t, false, "POST", "/v1/runs", "", a.createBody(t, pf, sessionKey))
}

var content = b64u.SHA256([]byte("a user message"))

func turnBody(channel, sender, msg string) map[string]any {
	return map[string]any{"channel": channel, "sender_id": sender, "message_id": msg, "content_sha256_b64u": content}
}

// openTurn opens a turn of rn for the message (channel, sender, msg) and
// returns its id; anything but 201 fails the test.
func (a *attester) openTurn(t *testing.T, rn runHandle, channel, sender, msg string) string {
	t.Helper()
	r := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody(channel, sender, msg))
	if r.code != 201 {
		t.Fatalf("turn: %d %v", r.code, r.body)
	}
	return r.body["turn_id"].(string)
}

// auditCount reads the run's audit count with its capability.
func (a *attester) auditCount(t *testing.T, rn runHandle) int {
	t.Helper()
	r := a.req(t, false, "GET", "/v1/runs/"+rn.id+"/audit", rn.capability, nil)
	if r.code != 200 {
		t.Fatalf("audit: %d %v", r.code, r.body)
	}
	n, _ := strconv.Atoi(r.hdr.Get("X-Clawea-Audit-Count"))
	if got := bytes.Count(r.raw, []byte("\n")); got != n {
		t.Fatalf("audit body has %d records, header says %d", got, n)
	}
	return n
}

// execAllowed asks the gate (as the orchestrator) whether exec is allowed
// in turn: the probe of whether the turn is verified.
func (a *attester) execAllowed(t *testing.T, rn runHandle, turn string) bool {
	t.Helper()
	r := a.req(t, false, "POST", "/v1/runs/"+rn.id+"/tool-calls", rn.capability, map[string]any{"turn_id": turn, "tool": "exec", "params": map[string]any{"command": "id"}})
	if r.code != 200 {
		t.Fatalf("exec probe: %d %v", r.code, r.body)
	}
	return r.body["allow"] == true
}

func want(t *testing.T, what string, r reply, code int) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: got %d %v, want %d", what, r.code, r.body, code)
	}
}

// TestAttacksAgainstTheBinary: issue 13's attacks, each refused with its
// documented status and without changing anything; the orchestrator with
// its credential still can.
func TestAttacksAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, map[string]any{"maxTurnsPerRun": 8, "maxRuns": 3})
	if st, err := os.Stat(filepath.Dir(a.socket)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v", st.Mode(), err)
	}
	victim := a.createRun(t, pf, "agent:main:main")
	other := a.createRun(t, pf, "agent:main:main") // same session key: no shared state
	base := "/v1/runs/" + victim.id

	// The orchestrator opens an owner turn and verifies it.
	r := a.req(t, false, "POST", base+"/turns", victim.capability, turnBody("telegram", "owner-1", "m1"))
	if r.code != 201 || r.body["owner"] != true {
		t.Fatalf("owner turn: %d %v", r.code, r.body)
	}
	ownerTurn := r.body["turn_id"].(string)
	want(t, "owner verify", a.req(t, false, "POST", base+"/verify", victim.capability, map[string]any{"turn_id": ownerTurn, "message_id": "m1", "content_sha256_b64u": content}), 200)
	if !a.execAllowed(t, victim, ownerTurn) {
		t.Fatal("exec not allowed in the verified owner turn")
	}
	audit0 := a.auditCount(t, victim)

	// 1. Over TCP, nothing of the control API is reachable, with or without
	// the capability.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/runs", string(a.createBody(t, pf, "s"))},
		{"POST", base + "/turns", turnBody("telegram", "owner-1", "tcp-1")},
		{"POST", base + "/verify", map[string]any{"turn_id": ownerTurn}},
		{"POST", base + "/tool-calls", map[string]any{"turn_id": ownerTurn, "tool": "exec"}},
		{"GET", base + "/audit", nil},
		{"GET", base + "/prompt", nil},
		{"POST", base + "/attestation", map[string]any{"bundle": map[string]any{}, "agent_did": "did:key:z"}},
		{"DELETE", base, nil},
		{"GET", "/v1/audit", nil},
	} {
		want(t, "TCP "+c.method+" "+c.path, a.req(t, true, c.method, c.path, victim.capability, c.body), 403)
		want(t, "TCP "+c.method+" "+c.path+" without capability", a.req(t, true, c.method, c.path, "", c.body), 403)
	}
	// Metrics are not on the public listener.
	want(t, "TCP /metrics", a.req(t, true, "GET", "/metrics", "", nil), 404)

	// 2. On the socket without a capability, with a malformed one, with
	// another run's, with an unknown one: 401 / 403 before the body is read.
	forged := "clawea-cap-v1." + b64u.Encode(make([]byte, 32))
	for _, c := range runRoutes(base, ownerTurn, turnBody("telegram", "owner-1", "x-1"), map[string]any{"bundle": map[string]any{}, "agent_did": "did:key:z"}) {
		want(t, "no capability "+c.path, a.req(t, false, c.method, c.path, "", c.body), 401)
		want(t, "malformed capability "+c.path, a.req(t, false, c.method, c.path, "clawea-cap-v1.nope", c.body), 401)
		want(t, "another run's capability "+c.path, a.req(t, false, c.method, c.path, other.capability, c.body), 403)
		want(t, "unknown capability "+c.path, a.req(t, false, c.method, c.path, forged, c.body), 403)
	}
	// The prompt is never served to a caller without the capability.
	if r := a.req(t, false, "GET", base+"/prompt", other.capability, nil); bytes.Contains(r.raw, pf.rb.Prompt[:32]) {
		t.Fatal("prompt served to another run's capability")
	}

	// 3. Forged owner claims: the flag is not part of the API, and a
	// non-owner sender's turn cannot be verified.
	want(t, "sender_is_owner in a turn", a.req(t, false, "POST", base+"/turns", victim.capability,
		`{"channel":"telegram","sender_id":"mallory","message_id":"f1","content_sha256_b64u":"`+content+`","sender_is_owner":true}`), 400)
	want(t, "case-variant duplicate keys", a.req(t, false, "POST", base+"/turns", victim.capability,
		`{"channel":"telegram","sender_id":"mallory","SENDER_ID":"owner-1","message_id":"f2","content_sha256_b64u":"`+content+`"}`), 400)
	want(t, "exact duplicate keys", a.req(t, false, "POST", base+"/turns", victim.capability,
		`{"channel":"telegram","sender_id":"mallory","sender_id":"owner-1","message_id":"f3","content_sha256_b64u":"`+content+`"}`), 400)
	want(t, "case-variant member", a.req(t, false, "POST", base+"/turns", victim.capability,
		`{"Channel":"telegram","sender_id":"owner-1","message_id":"f4","content_sha256_b64u":"`+content+`"}`), 400)
	want(t, "sender_is_owner in verify", a.req(t, false, "POST", base+"/verify", victim.capability,
		map[string]any{"turn_id": ownerTurn, "sender_is_owner": true}), 400)
	want(t, "trailing data", a.req(t, false, "POST", base+"/verify", victim.capability, `{"turn_id":"`+ownerTurn+`"} {}`), 400)
	want(t, "invalid UTF-8", a.req(t, false, "POST", base+"/turns", victim.capability, "{\"channel\":\"\xff\"}"), 400)
	want(t, "deep nesting", a.req(t, false, "POST", base+"/tool-calls", victim.capability,
		`{"turn_id":"`+ownerTurn+`","tool":"read","params":`+strings.Repeat(`{"a":`, 100)+`1`+strings.Repeat(`}`, 100)+`}`), 400)
	want(t, "oversize body", a.req(t, false, "POST", base+"/turns", victim.capability, `{"channel":"`+strings.Repeat("x", 70<<10)+`"}`), 413)
	want(t, "wrong Content-Type", func() reply {
		rq, _ := http.NewRequest("POST", "http://attester"+base+"/turns", strings.NewReader(`{}`))
		rq.Header.Set("Authorization", "Bearer "+victim.capability)
		rq.Header.Set("Content-Type", "text/plain")
		resp, err := a.control.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reply{code: resp.StatusCode}
	}(), 415)
	// A message_id reused (here, with an owner identity) is refused.
	want(t, "message_id reuse", a.req(t, false, "POST", base+"/turns", victim.capability, turnBody("telegram", "owner-1", "m1")), 409)
	// Malformed challenge.
	want(t, "challenge %%%", a.req(t, true, "GET", "/v1/identity?challenge=%%%", "", nil), 400)

	// Nothing changed: no audit record, the verified owner turn is still
	// current and still verified.
	if n := a.auditCount(t, victim); n != audit0 {
		t.Fatalf("refused requests changed the audit log: %d -> %d", audit0, n)
	}
	if !a.execAllowed(t, victim, ownerTurn) {
		t.Fatal("a refused request replaced or unverified the current turn")
	}

	// 4. An owner message signed in an earlier turn does not verify a later
	// non-owner turn; the old turn is stale for every call.
	r = a.req(t, false, "POST", base+"/turns", victim.capability, turnBody("telegram", "mallory", "m2"))
	if r.code != 201 || r.body["owner"] != false || r.body["signature_id"] != nil {
		t.Fatalf("non-owner turn: %d %v", r.code, r.body)
	}
	userTurn := r.body["turn_id"].(string)
	want(t, "verify a non-owner turn", a.req(t, false, "POST", base+"/verify", victim.capability, map[string]any{"turn_id": userTurn}), 403)
	want(t, "verify a non-owner turn with an earlier owner message", a.req(t, false, "POST", base+"/verify", victim.capability,
		map[string]any{"turn_id": userTurn, "message_id": "m1", "content_sha256_b64u": content}), 403)
	want(t, "verify the stale owner turn", a.req(t, false, "POST", base+"/verify", victim.capability, map[string]any{"turn_id": ownerTurn}), 409)
	want(t, "tool call in the stale turn", a.req(t, false, "POST", base+"/tool-calls", victim.capability,
		map[string]any{"turn_id": ownerTurn, "tool": "read"}), 409)
	if a.execAllowed(t, victim, userTurn) {
		t.Fatal("exec allowed in a non-owner turn")
	}

	// 5. Runs do not share gate state, even with the same session key.
	r = a.req(t, false, "POST", "/v1/runs/"+other.id+"/turns", other.capability, turnBody("telegram", "owner-1", "m1"))
	if r.code != 201 {
		t.Fatalf("other run's turn: %d %v", r.code, r.body)
	}
	otherTurn := r.body["turn_id"].(string)
	want(t, "verify other", a.req(t, false, "POST", "/v1/runs/"+other.id+"/verify", other.capability, map[string]any{"turn_id": otherTurn}), 200)
	if a.execAllowed(t, victim, userTurn) {
		t.Fatal("another run's verification leaked into this run")
	}

	// 6. A bundle whose chain does not start with the run's prompt_committed
	// event (one llm_call, a random agent key) is refused.
	_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agentDID := didkey.Format(agentKey.Public().(ed25519.PublicKey))
	hd := poh.EventHeader{EventID: "evt_1", RunID: victim.id, EventType: "llm_call", Timestamp: poh.FormatTime(time.Now()), PayloadHashB64u: b64u.SHA256([]byte("x"))}
	lone, err := hd.EntryValue()
	if err != nil {
		t.Fatal(err)
	}
	bad, err := poh.Sign(poh.TypeProofBundle, pohjson.NewObject(
		pohjson.M("bundle_version", pohjson.NewString("1")), pohjson.M("bundle_id", pohjson.NewString("b1")),
		pohjson.M("agent_did", pohjson.NewString(agentDID)), pohjson.M("event_chain", pohjson.NewArray(lone)),
	), agentKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r = a.req(t, false, "POST", base+"/attestation", victim.capability, map[string]any{"bundle": json.RawMessage(bad), "agent_did": agentDID})
	if r.code != 422 || r.body["reason"] != "PROMPT_COMMITMENT_MISMATCH" {
		t.Fatalf("bundle without prompt_committed: %d %v", r.code, r.body)
	}

	// 7. The orchestrator, with its credential, gets a real attestation
	// for the bundle that logs each of its allowed calls.
	good := bundleWith(t, pf, victim, agentKey, paramsCalls(a.allowedCalls(t, victim)))
	r = a.req(t, false, "POST", base+"/attestation", victim.capability, map[string]any{"bundle": json.RawMessage(good), "agent_did": agentDID})
	if r.code != 200 || r.body["attestation_id"] == nil {
		t.Fatalf("orchestrator attestation: %d %v", r.code, r.body)
	}

	// 8. Exhaustion ends in a documented refusal: the run's turn limit (8).
	for i := 0; ; i++ {
		r := a.req(t, false, "POST", base+"/turns", victim.capability, turnBody("cli", "u", fmt.Sprint("bulk-", i)))
		if r.code == 429 {
			if i > 8 {
				t.Fatalf("turn limit reached after %d turns", i)
			}
			break
		}
		if r.code != 201 || i > 8 {
			t.Fatalf("turn %d: %d %v", i, r.code, r.body)
		}
	}
	// maxRuns (3): the third run opens, the fourth is 503; closing frees a
	// slot, so create/close cycles never fill a table.
	third := a.createRun(t, pf, "s3")
	want(t, "fourth run", a.tryCreateRun(t, pf, "s4"), 503)
	want(t, "close third", a.req(t, false, "DELETE", "/v1/runs/"+third.id, third.capability, nil), 204)
	for i := range 5 {
		rn := a.createRun(t, pf, fmt.Sprint("cycle-", i))
		want(t, "cycle turn", a.req(t, false, "POST", "/v1/runs/"+rn.id+"/turns", rn.capability, turnBody("cli", "u", "1")), 201)
		want(t, "cycle close", a.req(t, false, "DELETE", "/v1/runs/"+rn.id, rn.capability, nil), 204)
	}

	// 9. Closing a run: its capability then gets 410 everywhere, the other
	// run is untouched.
	want(t, "close", a.req(t, false, "DELETE", base, victim.capability, nil), 204)
	for _, c := range runRoutes(base, ownerTurn, turnBody("telegram", "owner-1", "late"), map[string]any{"bundle": json.RawMessage(good), "agent_did": agentDID}) {
		want(t, "closed run "+c.method+" "+c.path, a.req(t, false, c.method, c.path, victim.capability, c.body), 410)
	}
	if !a.execAllowed(t, other, otherTurn) {
		t.Fatal("closing a run changed another run")
	}

	// 10. Nothing secret reached the log.
	logs := a.logs.String()
	for _, secret := range []string{victim.capability, other.capability, victim.capability[len("clawea-cap-v1."):], string(pf.rb.Prompt[len(pf.rb.Prompt)/2 : len(pf.rb.Prompt)/2+40]), `"command":"id"`} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q", secret)
		}
	}
}

// TestSocketAgainstTheBinary: a uid outside controlUids is refused before
// the body is read; a second attester on the same socket refuses to start
// (exit 3) and leaves the first one serving.
func TestSocketAgainstTheBinary(t *testing.T) {
	// Tests run as one uid; list only another one.
	a, pf := startWithPack(t, map[string]any{"controlUids": []int{os.Geteuid() + 1000}})
	want(t, "uid not allowed: create", a.tryCreateRun(t, pf, "s"), 403)
	want(t, "uid not allowed: policy", a.req(t, false, "GET", "/v1/gate/policy", "", nil), 403)

	dir2 := t.TempDir()
	second := writeConfig(t, dir2, pf, map[string]any{"controlSocket": a.socket})
	b, code := startAttester(t, second)
	if b != nil || code != 3 {
		t.Fatalf("second attester on the same socket: started=%v exit %d", b != nil, code)
	}
	if _, err := os.Stat(a.socket); err != nil {
		t.Fatalf("the first attester's socket is gone: %v", err)
	}
	c, err := net.Dial("unix", a.socket)
	if err != nil {
		t.Fatalf("the first attester no longer accepts: %v", err)
	}
	c.Close()
}

// TestBoundsAgainstTheBinary: slow senders are cut off, and pack uploads
// beyond the memory budget get 503 instead of growing the process.
func TestBoundsAgainstTheBinary(t *testing.T) {
	const maxPack = 1 << 20
	budget := 4 * (maxPack*4/3 + 4 + 64<<10) // exactly one upload
	a, pf := startWithPack(t, map[string]any{"maxPackBytes": maxPack, "uploadBudgetBytes": budget})
	body := a.createBody(t, pf, "s")

	// A slow upload holds the whole budget: a second upload is refused at
	// once with 503.
	slow, err := net.Dial("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /v1/runs HTTP/1.1\r\nHost: attester\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	want(t, "upload beyond the budget", a.req(t, false, "POST", "/v1/runs", "", body), 503)
	if time.Since(start) > 5*time.Second {
		t.Fatal("the refusal waited for the slow upload")
	}

	// Slow senders are dropped: headers within 5 s, bodies within 10 s.
	var wg sync.WaitGroup
	for _, tc := range []struct {
		name, send string
		within     time.Duration
	}{
		{"slow headers", "POST /v1/runs HTTP/1.1\r\nHost: attester\r\n", 8 * time.Second},
		{"slow body", "POST /v1/runs HTTP/1.1\r\nHost: attester\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", 14 * time.Second},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", a.socket)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			start := time.Now()
			io.WriteString(c, tc.send)
			c.SetReadDeadline(time.Now().Add(tc.within + 5*time.Second))
			io.Copy(io.Discard, c) // returns when the server closes the connection
			if d := time.Since(start); d > tc.within {
				t.Errorf("%s: held for %v", tc.name, d)
			}
		}()
	}
	wg.Wait()
	// The budget is back once the slow upload is gone.
	slow.Close()
	time.Sleep(100 * time.Millisecond)
	if r := a.tryCreateRun(t, pf, "after"); r.code != 201 {
		t.Fatalf("upload after the slow one ended: %d %v", r.code, r.body)
	}
}

// TestSecretReferenceAgainstTheBinary: an unresolved ${VAR} is a
// configuration error naming its key, exit 1, before anything is opened.
func TestSecretReferenceAgainstTheBinary(t *testing.T) {
	pf := newPack(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, pf, map[string]any{"stateDir": "${CLAWEA_TEST_UNSET_STATE_DIR}"})
	a, code := startAttester(t, cfg)
	if a != nil || code != 1 {
		t.Fatalf("started=%v exit %d, want exit 1", a != nil, code)
	}
	if _, err := os.Stat(filepath.Join(dir, "ctl")); err == nil {
		t.Fatal("the control socket directory was created although the config is invalid")
	}
}

// TestTPMOverTCPAgainstTheBinary: attester.tpm.address runs the TPM
// platform on a swtpm (development only): the evidence is marked simulated,
// and the identity sealed to that TPM survives a restart.
func TestTPMOverTCPAgainstTheBinary(t *testing.T) {
	if _, err := exec.LookPath("swtpm"); err != nil {
		citest.SkipOrFail(t, "swtpm not on PATH")
	}
	pf := newPack(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "tpmstate")
	os.Mkdir(state, 0o700)
	var addr string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command("swtpm", "socket", "--tpm2", "--server", fmt.Sprintf("type=tcp,port=%d,bindaddr=127.0.0.1", port),
			"--flags", "not-need-init,startup-clear", "--tpmstate", "dir="+state)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for range 100 {
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				c.Close()
				addr = fmt.Sprintf("127.0.0.1:%d", port)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if addr != "" {
			break
		}
	}
	if addr == "" {
		t.Fatal("swtpm did not start")
	}
	cfg := writeConfig(t, dir, pf, map[string]any{"platform": "tpm", "tpm": map[string]any{"address": addr}, "stateDir": filepath.Join(dir, "state")})
	a, code := startAttester(t, cfg)
	if a == nil {
		t.Fatalf("attester on swtpm exited with %d", code)
	}
	ready := a.req(t, true, "GET", "/readyz", "", nil)
	id := a.req(t, true, "GET", "/v1/identity", "", nil)
	if ready.code != 200 || ready.body["platform"] != "tpm" || ready.body["simulated"] != true || id.code != 200 || id.body["simulated"] != true || id.body["identity_sealed"] != true {
		t.Fatalf("readyz %d %v; identity %d %v", ready.code, ready.body, id.code, id.body)
	}
	if !strings.Contains(a.logs.String(), "DEVELOPMENT ONLY") {
		t.Fatal("no development-only warning in the log")
	}
	did := id.body["did"]
	a.cmd.Process.Signal(os.Interrupt)
	<-a.exited
	b, code := startAttester(t, cfg)
	if b == nil {
		t.Fatalf("restart exited with %d", code)
	}
	if id := b.req(t, true, "GET", "/v1/identity", "", nil); id.body["did"] != did {
		t.Fatalf("identity changed across a restart: %v -> %v", did, id.body["did"])
	}
}

// TestDeclaredLengthRefusedAtOnce: a request that declares a body over its
// limit gets 413 without the attester waiting for the body (issue 17 item
// 6: a turns request declaring Content-Length: 70000 used to wait for the
// 10 s body deadline first). No body is sent; a server that waited would
// still be silent when the 5 s read deadline ends.
func TestDeclaredLengthRefusedAtOnce(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "s")
	c, err := net.Dial("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "POST /v1/runs/"+rn.id+"/turns HTTP/1.1\r\nHost: attester\r\nAuthorization: Bearer "+rn.capability+
		"\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413 ") {
		t.Fatalf("status line %q, %v; want 413 before any body is sent", line, err)
	}
}
