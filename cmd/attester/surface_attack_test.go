package main

// Attacks on the attester's request surface (docs/spec/attester-api.md
// sections 2 to 5) through the real binary, for the threat-model sentences
// docs/spec/threat-tests.md lists without another test: a body over each
// endpoint's documented limit, an Origin header or a path not in clean form
// on a run route, a pack the attester must not open, and the rebuild
// worker's mode started by hand. Each asserts the documented status, that
// nothing changed, and that no secret reached the log or the answer.

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
)

// rawExchange sends one raw HTTP/1.1 request on a new connection to
// network/addr and returns the status code and the whole answer (the
// attester closes the connection of a refused request, or the request says
// Connection: close).
func rawExchange(t *testing.T, network, addr, request string) (int, string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatalf("send: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", strings.SplitN(request, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var hdr strings.Builder
	resp.Header.Write(&hdr)
	return resp.StatusCode, hdr.String() + "\r\n" + string(b)
}

// noSecrets fails the test when the attester's log, or any of answers,
// holds one of secrets.
func noSecrets(t *testing.T, a *attester, answers []string, secrets ...string) {
	t.Helper()
	logs := a.logs.String()
	for _, s := range secrets {
		if s == "" {
			t.Fatal("an empty secret")
		}
		if strings.Contains(logs, s) {
			t.Errorf("the attester's log holds a secret (%d bytes, starting %.12q)", len(s), s)
		}
		for _, ans := range answers {
			if strings.Contains(ans, s) {
				t.Errorf("an answer holds a secret (%.12q...): %.200s", s, ans)
			}
		}
	}
}

// TestBodyLimitsAttack (attester-api.md sections 2 step 5 and 3): on each
// control endpoint that reads a body, a body one byte over the documented
// limit is 413, whether the length is declared (refused before any body
// byte is sent) or the body is streamed chunked; a body of exactly the
// limit is read (and refused as malformed JSON, 400, not 413). None of it
// changes the run.
func TestBodyLimitsAttack(t *testing.T) {
	const maxPack = 64 << 10
	a, pf := startWithPack(t, map[string]any{"maxPackBytes": maxPack, "maxRuns": 1})
	rn := a.createRun(t, pf, "limits")
	base := "/v1/runs/" + rn.id
	tr := a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("cli", "u", "m1"))
	if tr.code != 201 {
		t.Fatalf("turn: %d %v", tr.code, tr.body)
	}
	audit0 := a.auditCount(t, rn)
	for _, ep := range []struct {
		path  string
		limit int
		auth  bool
	}{
		// ⌊maxPackBytes × 4 / 3⌋ + 4 + 64 KiB (the uploadBudgetBytes row of
		// section 7; section 3 leaves out the 4 bytes of base64 padding).
		{"/v1/runs", maxPack*4/3 + 4 + 64<<10, false},
		{base + "/turns", 64 << 10, true},
		{base + "/verify", 64 << 10, true},
		{base + "/tool-calls", 1 << 20, true},
		{base + "/attestation", 8 << 20, true},
	} {
		head := "POST " + ep.path + " HTTP/1.1\r\nHost: attester\r\nContent-Type: application/json\r\nConnection: close\r\n"
		if ep.auth {
			head += "Authorization: Bearer " + rn.capability + "\r\n"
		}
		// Declared over the limit: 413 with no body byte sent.
		if code, ans := rawExchange(t, "unix", a.socket, head+fmt.Sprintf("Content-Length: %d\r\n\r\n", ep.limit+1)); code != 413 {
			t.Errorf("%s: declared %d bytes: got %d %.200s, want 413", ep.path, ep.limit+1, code, ans)
		}
		// Streamed over the limit: 413.
		over := `{"x":"` + strings.Repeat("a", ep.limit+1-len(`{"x":""}`)) + `"}`
		chunked := fmt.Sprintf("%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", head, len(over), over)
		if code, ans := rawExchange(t, "unix", a.socket, chunked); code != 413 {
			t.Errorf("%s: %d bytes chunked: got %d %.200s, want 413", ep.path, len(over), code, ans)
		}
		// Exactly the limit: read, then refused as a malformed request.
		at := over[:len(over)-2-1] + `"}`
		if code, ans := rawExchange(t, "unix", a.socket, head+fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(at), at)); code != 400 {
			t.Errorf("%s: %d bytes (the limit): got %d %.200s, want 400", ep.path, len(at), code, ans)
		}
	}
	// Nothing changed: the same audit, the turn still current, the one run
	// slot still taken (maxRuns 1) and nothing else opened.
	if n := a.auditCount(t, rn); n != audit0 {
		t.Fatalf("refused bodies changed the audit: %d -> %d", audit0, n)
	}
	want(t, "tool call in the turn after the refusals", a.req(t, false, "POST", base+"/tool-calls", rn.capability,
		map[string]any{"turn_id": tr.body["turn_id"], "tool": "read"}), 200)
	want(t, "a second run (maxRuns 1)", a.tryCreateRun(t, pf, "second"), 503)
	noSecrets(t, a, nil, rn.capability)
}

// TestOriginAndUncleanPathsAttack (attester-api.md section 2): a request
// with the run's capability but an Origin header (a browser) is 403; a
// path not in clean form is 403 on every listener, never redirected to the
// clean path; neither changes the run.
func TestOriginAndUncleanPathsAttack(t *testing.T) {
	a, pf := startWithPack(t, nil)
	rn := a.createRun(t, pf, "origin")
	base := "/v1/runs/" + rn.id
	audit0 := a.auditCount(t, rn)
	tcp := strings.TrimPrefix(a.public, "http://")
	auth := "Authorization: Bearer " + rn.capability + "\r\n"
	turn := `{"channel":"telegram","sender_id":"owner-1","message_id":"o1","content_sha256_b64u":"` + content + `"}`
	post := func(path, extra, body string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: attester\r\nConnection: close\r\nContent-Type: application/json\r\n" + extra +
			fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	var answers []string
	check := func(what, network, addr, request string) {
		t.Helper()
		code, ans := rawExchange(t, network, addr, request)
		answers = append(answers, ans)
		if code != 403 || strings.Contains(strings.ToLower(ans), "\nlocation:") {
			t.Errorf("%s: got %d %.300s, want 403 without a redirect", what, code, ans)
		}
	}
	for _, origin := range []string{"http://127.0.0.1", "null", "https://evil.example"} {
		check("Origin "+origin+" on a turn", "unix", a.socket, post(base+"/turns", auth+"Origin: "+origin+"\r\n", turn))
		check("Origin "+origin+" on run creation", "unix", a.socket, post("/v1/runs", "Origin: "+origin+"\r\n", string(a.createBody(t, pf, "o"))))
	}
	for _, p := range []string{
		"/" + base + "/turns", "/v1//runs/" + rn.id + "/turns", "/./" + base[1:] + "/turns", "/x/.." + base + "/turns",
		base + "/./turns", base + "/../" + rn.id + "/turns", base + "//turns", "//v1/runs",
	} {
		check("unclean path "+p+" on the socket", "unix", a.socket, post(p, auth, turn))
		check("unclean path "+p+" over TCP", "tcp", tcp, post(p, auth, turn))
	}
	for _, p := range []string{"//healthz", "/./v1/identity", "/v1//identity", "/x/../readyz"} {
		check("unclean public path "+p, "tcp", tcp, "GET "+p+" HTTP/1.1\r\nHost: attester\r\nConnection: close\r\n\r\n")
	}
	if n := a.auditCount(t, rn); n != audit0 {
		t.Fatalf("refused requests changed the audit: %d -> %d", audit0, n)
	}
	// No turn was opened: the message id o1 is still unused.
	want(t, "the orchestrator's turn o1", a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("telegram", "owner-1", "o1")), 201)
	noSecrets(t, a, answers, rn.capability, rn.capability[len("clawea-cap-v1."):])
}

// TestForeignPackAttack (attester-api.md section 5 `POST /v1/runs`,
// promptpack-envelope-v1.md sections 8.3 and 11): a pack sealed to another
// key, a pack with one ciphertext byte changed (the manifest describing the
// changed file), a manifest that does not describe the file, a pack
// relabelled to another report hash and a report hash that is not the
// pack's are each 422 and keep nothing: the single run slot (maxRuns 1) is
// still free afterwards. Neither the log nor any answer holds prompt text.
func TestForeignPackAttack(t *testing.T) {
	a, pf := startWithPack(t, map[string]any{"maxRuns": 1})
	_, pub := a.identityKeys(t)
	other, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	body := func(enc []byte, man *envelope.Manifest, reportHash string) []byte {
		mj, err := man.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mj),
			"report_hash_b64u": reportHash, "agent_id": "main", "session_key": "foreign"})
		return b
	}
	report := pf.rb.ReportHashB64u()
	seal := func(keys ...*envelope.PublicKey) ([]byte, *envelope.Manifest) {
		enc, man, err := promptpack.SealPack(pf.pack, keys...)
		if err != nil {
			t.Fatal(err)
		}
		return enc, man
	}

	foreignEnc, foreignMan := seal(other.Public())
	flipped, flippedMan := seal(pub)
	flipped[len(flipped)-20] ^= 0x01 // inside the body's ciphertext
	flippedMan.CiphertextHash = sha256.Sum256(flipped)
	stale, staleMan := seal(pub)
	staleMan.CiphertextHash[0] ^= 0x01
	good, goodMan := seal(pub)
	otherReport := b64u.SHA256([]byte("another report"))
	relabelled := *goodMan
	relabelled.ReportHash = sha256.Sum256([]byte("another report"))

	var answers []string
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"a pack sealed to another key", body(foreignEnc, foreignMan, report)},
		{"a changed ciphertext byte", body(flipped, flippedMan, report)},
		{"a manifest that does not describe the file", body(stale, staleMan, report)},
		{"the manifest relabelled to another report", body(good, &relabelled, otherReport)},
		{"another report hash", body(good, goodMan, otherReport)},
	} {
		r := a.req(t, false, "POST", "/v1/runs", "", tc.body)
		answers = append(answers, string(r.raw))
		if r.code != 422 || r.body["run_id"] != nil || r.body["capability"] != nil {
			t.Errorf("%s: got %d %s, want 422 and no run", tc.name, r.code, r.raw)
		}
	}
	// Nothing was kept: the one slot is free for the honest pack.
	rn := a.createRun(t, pf, "after")
	prompt := string(pf.rb.Prompt)
	noSecrets(t, a, answers, prompt[:40], prompt[len(prompt)/2:len(prompt)/2+40], prompt[len(prompt)-40:], rn.capability)
}

// TestWorkerModeAttack (sealed-memory.md section 2.7 item 1): the attester
// started by hand in its internal rebuild-worker mode does nothing and
// exits with 2 (one line on stderr saying the mode is internal) unless its environment is exactly the service's and
// descriptor 3 is a SOCK_SEQPACKET socket.
func TestWorkerModeAttack(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fd3")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		name  string
		env   []string
		extra []*os.File
	}{
		{"no environment, no descriptor 3", nil, nil},
		{"another worker version", []string{"CLAWEA_ATTESTER_WORKER=rebuild-v2"}, nil},
		{"the right environment, no descriptor 3", []string{"CLAWEA_ATTESTER_WORKER=rebuild-v1"}, nil},
		{"the right environment, descriptor 3 a file", []string{"CLAWEA_ATTESTER_WORKER=rebuild-v1"}, []*os.File{f}},
	} {
		cmd := exec.Command(attesterBin, "__rebuild")
		cmd.Env = tc.env
		cmd.ExtraFiles = tc.extra
		cmd.Stdin = strings.NewReader("\x00\x00\x00\x02{}")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%s: %v, want exit 2", tc.name, err)
		}
		// One diagnostic line, nothing of a worker's answer.
		if strings.Count(string(out), "\n") > 1 || !strings.Contains(string(out), "internal") {
			t.Errorf("%s: the worker mode wrote %q", tc.name, out)
		}
	}
}

// TestRunProbeAndTPMRoutesAttack (attester-api.md sections 2 step 3 and
// 5): a caller holding one run's capability cannot tell an unknown run id
// from another caller's run (the same 403, byte for byte), and on a
// platform other than tpm the public TPM routes are 404 before any body is
// read (a declared 16 MiB body is answered at once).
func TestRunProbeAndTPMRoutesAttack(t *testing.T) {
	a, pf := startWithPack(t, nil)
	mine := a.createRun(t, pf, "mine")
	theirs := a.createRun(t, pf, "theirs")
	unknown := "run_" + b64u.Encode(make([]byte, 16))
	for _, route := range []struct{ method, suffix string }{{"GET", "/audit"}, {"GET", "/prompt"}, {"DELETE", ""}} {
		r1 := a.req(t, false, route.method, "/v1/runs/"+theirs.id+route.suffix, mine.capability, nil)
		r2 := a.req(t, false, route.method, "/v1/runs/"+unknown+route.suffix, mine.capability, nil)
		if r1.code != 403 || r2.code != 403 || string(r1.raw) != string(r2.raw) {
			t.Errorf("%s %s: another run %d %s, unknown run %d %s: want the same 403", route.method, route.suffix, r1.code, r1.raw, r2.code, r2.raw)
		}
	}
	want(t, "their run after the probes", a.req(t, false, "POST", "/v1/runs/"+theirs.id+"/turns", theirs.capability, turnBody("cli", "u", "1")), 201)

	tcp := strings.TrimPrefix(a.public, "http://")
	start := time.Now()
	code, ans := rawExchange(t, "tcp", tcp, "POST /v1/tpm/activate HTTP/1.1\r\nHost: attester\r\nContent-Type: application/json\r\nContent-Length: 16777216\r\n\r\n")
	if code != 404 || time.Since(start) > 2*time.Second {
		t.Errorf("activate on a simulated platform: %d after %v: %.200s, want 404 at once", code, time.Since(start), ans)
	}
	if code, ans := rawExchange(t, "tcp", tcp, "GET /v1/tpm/ek HTTP/1.1\r\nHost: attester\r\nConnection: close\r\n\r\n"); code != 404 {
		t.Errorf("ek on a simulated platform: %d %.200s, want 404", code, ans)
	}
}

// TestPerRunLimitsAttack (attester-api.md section 6): an orchestrator's
// run cannot be made to hold more owner messages or tool-call decisions
// than configured: beyond them, 429, and the refusal records nothing.
func TestPerRunLimitsAttack(t *testing.T) {
	a, pf := startWithPack(t, map[string]any{"maxOwnerMessagesPerRun": 2, "maxToolCallsPerRun": 3})
	rn := a.createRun(t, pf, "limits")
	base := "/v1/runs/" + rn.id
	for i := range 2 {
		want(t, "owner turn", a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("telegram", "owner-1", fmt.Sprint("o", i))), 201)
	}
	want(t, "a third owner message", a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("telegram", "owner-1", "o2")), 429)
	tr := a.req(t, false, "POST", base+"/turns", rn.capability, turnBody("cli", "u", "n1"))
	if tr.code != 201 {
		t.Fatalf("a non-owner turn after the owner limit: %d %v", tr.code, tr.body)
	}
	call := map[string]any{"turn_id": tr.body["turn_id"], "tool": "read"}
	for range 3 {
		want(t, "tool call", a.req(t, false, "POST", base+"/tool-calls", rn.capability, call), 200)
	}
	audit := a.auditCount(t, rn)
	want(t, "a fourth tool call", a.req(t, false, "POST", base+"/tool-calls", rn.capability, call), 429)
	if n := a.auditCount(t, rn); n != audit {
		t.Fatalf("the refused call was recorded: %d -> %d", audit, n)
	}
}
