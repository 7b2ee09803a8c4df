package main

// Issue 19's attacks against the real binary: a model's exec, running as
// the orchestrator's uid, (1) reads the run capability out of the
// orchestrator's memory and drives the run from its own process, and (2)
// renames the control socket and serves a relay in its place that rewrites
// requests and answers. The attester refuses the first (process binding);
// the orchestrator, checking answers as the plugin does (signedClient,
// wire/answer), refuses every answer of the second.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/answer"
)

// helperEnv selects the helper mode of a re-executed test binary: "steal"
// (one request with a capability from the environment) or "splice" (a
// relay that forwards connections byte for byte).
const helperEnv = "CLAWEA_ATTACK_HELPER"

// runHelper is another process of an attack; it reports on stdout.
func runHelper(mode string) int {
	switch mode {
	case "steal":
		// The capability, read out of the orchestrator's memory, used from
		// this process.
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", os.Getenv("CLAWEA_SOCKET"))
		}}}
		path := "/tool-calls"
		if p := os.Getenv("CLAWEA_PATH"); p != "" {
			path = p
		}
		req, _ := http.NewRequest("POST", "http://attester/v1/runs/"+os.Getenv("CLAWEA_RUN")+path, strings.NewReader(os.Getenv("CLAWEA_BODY")))
		req.Header.Set("Content-Type", "application/json")
		var extra map[string]string
		_ = json.Unmarshal([]byte(os.Getenv("CLAWEA_HEADERS")), &extra)
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		req.Header.Set("Authorization", "Bearer "+os.Getenv("CLAWEA_CAP"))
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, b)
		return 0
	case "steal-framed":
		return stealFramed()
	case "splice":
		ln, err := net.Listen("unix", os.Getenv("CLAWEA_LISTEN"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", os.Getenv("CLAWEA_SOCKET"))
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}
	return 2
}

// helper starts this test binary as another process in mode.
func helper(t *testing.T, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	return cmd
}

// signedClient is an orchestrator that acts on an answer only after
// checking it exactly as the plugin does (attester-api section 8): signed
// by the pinned attester, for the exact bytes sent, with the exact body
// and status received, for this process, in the run's sequence.
type signedClient struct {
	hc    *http.Client
	pub   ed25519.PublicKey
	pid   int64
	start int64
	seqs  map[string]int64
}

func newSignedClient(t *testing.T, a *attester, socket string) *signedClient {
	t.Helper()
	pub, _ := a.identityKeys(t)
	return &signedClient{hc: unixHTTP(socket), pub: pub, pid: int64(os.Getpid()), start: selfStartTime(t), seqs: map[string]int64{}}
}

// selfStartTime is this process's start time (/proc/self/stat field 22).
func selfStartTime(t *testing.T) int64 {
	b := testfile.Read(t, "/proc/self/stat")
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	v, err := strconv.ParseInt(f[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}, Timeout: 30 * time.Second}
}

// do sends one request of run (empty for run creation) and returns the
// status and body only when a 2xx answer verifies; a non-2xx answer is
// returned unchecked (a client never acts on it as a success).
func (c *signedClient) do(method, path, capability, run string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequest(method, "http://attester"+path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if capability != "" {
		req.Header.Set("Authorization", "Bearer "+capability)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, got, nil
	}
	st, err := answer.Verify(c.pub, resp.Header.Get(answer.HeaderStatement), resp.Header.Get(answer.HeaderSignature))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	want := c.seqs[run] + 1
	if err := st.Check(answer.Expect{RunID: run, Seq: want, Status: resp.StatusCode, RequestHash: answer.RequestHash(method, path, body),
		ResponseHash: sha256.Sum256(got), PID: c.pid, StartTime: c.start}); err != nil {
		return resp.StatusCode, nil, err
	}
	c.seqs[st.RunID] = st.Seq
	return resp.StatusCode, got, nil
}

// signedRun is a run created and driven through a signedClient.
type signedRun struct {
	id, capability string
}

func (c *signedClient) createRun(t *testing.T, a *attester, pf *packFixture) signedRun {
	t.Helper()
	code, body, err := c.do("POST", "/v1/runs", "", "", a.createBody(t, pf, "agent:main:main"))
	if err != nil || code != 201 {
		t.Fatalf("create run: %d %s %v", code, body, err)
	}
	var r struct{ RunID, Capability string }
	r.RunID, r.Capability = field(t, body, "run_id"), field(t, body, "capability")
	if c.seqs[r.RunID] != 1 {
		t.Fatalf("the signed answer names another run than %s", r.RunID)
	}
	return signedRun{id: r.RunID, capability: r.Capability}
}

// openTurn opens sender's telegram turn (message msg) in rn and returns
// the turn's id.
func (c *signedClient) openTurn(t *testing.T, rn signedRun, sender, msg string) string {
	t.Helper()
	_, body, err := c.do("POST", "/v1/runs/"+rn.id+"/turns", rn.capability, rn.id, turnRequest(sender, msg))
	if err != nil {
		t.Fatal(err)
	}
	return field(t, body, "turn_id")
}

// turnRequest is the body of sender's telegram turn (message msg).
func turnRequest(sender, msg string) []byte {
	b, _ := json.Marshal(turnBody("telegram", sender, msg))
	return b
}

func field(t *testing.T, body []byte, k string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	s, _ := m[k].(string)
	return s
}

func toolCall(turn, tool string) []byte {
	b, _ := json.Marshal(map[string]any{"turn_id": turn, "tool": tool, "params": map[string]any{"command": "id"}})
	return b
}

// relay is the attacker's proxy at the socket's path, forwarding to the
// renamed socket, with a rewrite of requests and answers.
type relay struct {
	mu      sync.Mutex
	request func(path string, body []byte) []byte
	answer  func(path string, resp *http.Response, body []byte) []byte
}

func (rl *relay) serve(t *testing.T, listen, upstream string) *http.Server {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: "attester"}
	rp := &httputil.ReverseProxy{Transport: unixHTTP(upstream).Transport}
	rp.Rewrite = func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		r := pr.Out
		rl.mu.Lock()
		f := rl.request
		rl.mu.Unlock()
		if f != nil && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			b = f(r.URL.Path, b)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		}
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		rl.mu.Lock()
		f := rl.answer
		rl.mu.Unlock()
		if f == nil {
			return nil
		}
		b, _ := io.ReadAll(resp.Body)
		b = f(resp.Request.URL.Path, resp, b)
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ln, err := net.Listen("unix", listen)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func (rl *relay) set(req func(string, []byte) []byte, ans func(string, *http.Response, []byte) []byte) {
	rl.mu.Lock()
	rl.request, rl.answer = req, ans
	rl.mu.Unlock()
}

// TestRelayAgainstTheBinary: the socket renamed and a relay in its place.
// In this process (as if the relay shared the orchestrator's pid, the worst
// case), every rewrite is caught by the answer's signature: a deny flipped
// to an allow, a sender rewritten to the owner, a replayed answer. As its
// own process (what a model's exec is), the relay cannot even reach the
// orchestrator's run (process binding), and a run it opens is answered for
// its own pid, which the orchestrator refuses.
func TestRelayAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	real := a.socket + ".real"
	direct := newSignedClient(t, a, a.socket)
	rn := direct.createRun(t, a, pf)
	base := "/v1/runs/" + rn.id
	// A non-owner turn: exec is denied until an owner verifies.
	turn := direct.openTurn(t, rn, "mallory", "m1")
	if code, body, err := direct.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn, "exec")); err != nil || code != 200 || !strings.Contains(string(body), `"allow":false`) {
		t.Fatalf("exec in a non-owner turn: %d %s %v", code, body, err)
	}

	// The attack: rename the socket, serve the relay at its path.
	if err := os.Rename(a.socket, real); err != nil {
		t.Fatal(err)
	}
	rl := &relay{}
	inproc := rl.serve(t, a.socket, real)
	victim := newSignedClient(t, a, a.socket) // the orchestrator dials the usual path
	seqs := direct.seqs
	direct = newSignedClient(t, a, real) // the test's own way past the relay
	victim.seqs, direct.seqs = seqs, seqs

	// 1. A deny flipped into an allow.
	rl.set(nil, func(path string, _ *http.Response, b []byte) []byte {
		return bytes.Replace(b, []byte(`"allow":false`), []byte(`"allow":true`), 1)
	})
	if _, _, err := victim.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn, "exec")); answer.Code(err) != "ANSWER_RESPONSE_MISMATCH" {
		t.Fatalf("flipped deny: %v, want ANSWER_RESPONSE_MISMATCH", err)
	}

	// 2. The sender rewritten to the owner: the attester answers an owner
	// turn, signed for the request it read, not the one sent.
	victim.seqs[rn.id]++ // the flipped answer used a number: follow the attester
	rl.set(func(path string, b []byte) []byte {
		return bytes.Replace(b, []byte(`"sender_id":"mallory"`), []byte(`"sender_id":"owner-1"`), 1)
	}, nil)
	_, _, err := victim.do("POST", base+"/turns", rn.capability, rn.id, turnRequest("mallory", "m2"))
	if answer.Code(err) != "ANSWER_REQUEST_MISMATCH" {
		t.Fatalf("rewritten sender: %v, want ANSWER_REQUEST_MISMATCH", err)
	}
	victim.seqs[rn.id]++

	// 3. Replay: the same call twice, the second answered with the first's
	// signed answer.
	var first struct {
		hdr  http.Header
		body []byte
	}
	rl.set(nil, func(path string, resp *http.Response, b []byte) []byte {
		if first.body == nil {
			first.hdr, first.body = resp.Header.Clone(), b
			return b
		}
		for _, h := range []string{answer.HeaderStatement, answer.HeaderSignature} {
			resp.Header.Set(h, first.hdr.Get(h))
		}
		return first.body
	})
	turn2 := direct.openTurn(t, rn, "mallory", "m3")
	if _, _, err := victim.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn2, "read")); err != nil {
		t.Fatalf("first call through the relay: %v", err)
	}
	if _, _, err := victim.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn2, "read")); answer.Code(err) != "ANSWER_SEQUENCE" {
		t.Fatalf("replayed answer: %v, want ANSWER_SEQUENCE", err)
	}
	seqs[rn.id]++ // the attester's answer to the second call was withheld
	rl.set(nil, nil)

	// 4. The relay as its own process, forwarding bytes unchanged.
	inproc.Close()
	victim.hc.CloseIdleConnections()
	os.Remove(a.socket)
	sp := helper(t, "splice", "CLAWEA_LISTEN="+a.socket, "CLAWEA_SOCKET="+real)
	out, _ := sp.StdoutPipe()
	if err := sp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Process.Kill(); sp.Wait() })
	if l, _ := bufio.NewReader(out).ReadString('\n'); l != "listening\n" {
		t.Fatalf("relay process: %q", l)
	}
	// The orchestrator's run, reached through the relay: the attester sees
	// the relay's process, not the run's.
	code, body, err := victim.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn2, "read"))
	if err != nil || code != 403 || field(t, body, "reason") != "PROCESS_BINDING" {
		t.Fatalf("the run through a relay process: %d %s %v, want 403 PROCESS_BINDING", code, body, err)
	}
	// A run opened through the relay is bound to, and answered for, the
	// relay's process: the orchestrator refuses it.
	code, _, err = victim.do("POST", "/v1/runs", "", "", a.createBody(t, pf, "s"))
	if answer.Code(err) != "ANSWER_PEER_MISMATCH" || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", sp.Process.Pid)) {
		t.Fatalf("a run created through a relay process: %d %v, want ANSWER_PEER_MISMATCH naming pid %d", code, err, sp.Process.Pid)
	}
}

// TestStolenCapabilityAgainstTheBinary: the run's capability, used by
// another process (this test binary re-executed), is refused with 403
// PROCESS_BINDING and changes nothing; the orchestrator still drives the
// run.
func TestStolenCapabilityAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	c := newSignedClient(t, a, a.socket)
	rn := c.createRun(t, a, pf)
	base := "/v1/runs/" + rn.id
	turn := c.openTurn(t, rn, "owner-1", "m1")
	audit0 := a.auditCount(t, runHandle{id: rn.id, capability: rn.capability})

	cmd := helper(t, "steal", "CLAWEA_SOCKET="+a.socket, "CLAWEA_RUN="+rn.id, "CLAWEA_CAP="+rn.capability, "CLAWEA_BODY="+string(toolCall(turn, "exec")))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v %s", err, out)
	}
	status, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if status != "403" || field(t, []byte(rest), "reason") != "PROCESS_BINDING" || !strings.Contains(field(t, []byte(rest), "error"), "process binding") {
		t.Fatalf("the capability from another process: %s, want 403 PROCESS_BINDING", out)
	}
	if n := a.auditCount(t, runHandle{id: rn.id, capability: rn.capability}); n != audit0 {
		t.Fatalf("the refused request changed the audit: %d -> %d", audit0, n)
	}
	// The orchestrator's next answer is the next in sequence: the refusal
	// used no number.
	if code, _, err := c.do("POST", base+"/tool-calls", rn.capability, rn.id, toolCall(turn, "read")); err != nil || code != 200 {
		t.Fatalf("the orchestrator after the attempt: %d %v", code, err)
	}
}
