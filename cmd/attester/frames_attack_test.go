package main

// Attacks on the framed control transport (attester-api section 9) against
// the real binary: a capability stolen from the orchestrator used on a
// framed connection of another process, a stream id replayed while its
// request is in flight and an answer replayed to another request, frames
// over the bound and cut short, the upgrade asked of the public TCP
// listener, and garbage after the upgrade. Each is refused, and none
// records anything in the run's audit.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/wire/answer"
	"github.com/clawea/attester/wire/ctlframe"
)

// stealFramed is the "steal-framed" helper process: one tool call on a
// framed connection of its own, with a capability read out of the
// orchestrator; it prints the answer's status and body.
func stealFramed() int {
	fc, err := dialFramed(os.Getenv("CLAWEA_SOCKET"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer fc.close()
	a, err := fc.do("POST", "/v1/runs/"+os.Getenv("CLAWEA_RUN")+"/tool-calls", os.Getenv("CLAWEA_CAP"), []byte(os.Getenv("CLAWEA_BODY")))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("%d %s\n", a.Status, a.Body)
	return 0
}

// framedRun is a run the orchestrator created and drives over fc.
type framedRun struct {
	fc   *framedConn
	rn   runHandle
	turn string
}

// newFramedRun creates a run and its first turn over a framed connection.
func newFramedRun(t *testing.T, a *attester, pf *packFixture) *framedRun {
	t.Helper()
	fc, err := dialFramed(a.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.close)
	ans, err := fc.do("POST", "/v1/runs", "", a.createBody(t, pf, "agent:main:main"))
	if err != nil || ans.Status != 201 {
		t.Fatalf("create run over frames: %v %+v", err, ans)
	}
	r := &framedRun{fc: fc, rn: runHandle{id: field(t, ans.Body, "run_id"), capability: field(t, ans.Body, "capability")}}
	tb, _ := json.Marshal(turnBody("cli", "u", "m1"))
	ans, err = fc.do("POST", "/v1/runs/"+r.rn.id+"/turns", r.rn.capability, tb)
	if err != nil || ans.Status != 201 {
		t.Fatalf("turn over frames: %v %+v", err, ans)
	}
	r.turn = field(t, ans.Body, "turn_id")
	return r
}

// toolCall makes one tool call of the run and requires it answered 200.
func (r *framedRun) toolCall(t *testing.T, tool string) *ctlframe.Frame {
	t.Helper()
	ans, err := r.fc.do("POST", "/v1/runs/"+r.rn.id+"/tool-calls", r.rn.capability, toolCall(r.turn, tool))
	if err != nil || ans.Status != 200 {
		t.Fatalf("tool call over frames: %v %+v", err, ans)
	}
	return ans
}

// rawToolCall is the bytes of a read tool call of the run on stream.
func (r *framedRun) rawToolCall(stream uint32) []byte {
	q := requestFrame("POST", "/v1/runs/"+r.rn.id+"/tool-calls", r.rn.capability, toolCall(r.turn, "read"))
	q.Stream = stream
	b, _ := q.Append(nil)
	return b
}

// rawFramed is an upgraded connection the test writes bytes to by hand.
func rawFramed(t *testing.T, socket string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, "GET /v1/frames HTTP/1.1\r\nHost: attester\r\nConnection: Upgrade\r\nUpgrade: "+ctlframe.Token+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", err, resp)
	}
	return c, br
}

// lastWord reads what the attester sends before it closes c: nothing, or
// one stream 0 answer; it fails the test if c stays open.
func lastWord(t *testing.T, c net.Conn, br *bufio.Reader) *ctlframe.Frame {
	t.Helper()
	rest, err := expectClosed(c, br, 5*time.Second)
	if err != nil {
		t.Fatalf("the connection is still open: %v", err)
	}
	if len(rest) == 0 {
		return nil
	}
	a, _, err := ctlframe.Read(bytes.NewReader(rest))
	if err != nil || a.Stream != 0 || a.Method != "" {
		t.Fatalf("the last word is not a stream 0 answer: %v %q", err, rest)
	}
	return a
}

// TestFramedStolenCapabilityAgainstTheBinary: process binding holds per
// request on a framed connection: the run's capability, used on a framed
// connection by another process, is refused (403 PROCESS_BINDING) and
// changes nothing; the orchestrator's own framed connection goes on.
func TestFramedStolenCapabilityAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	r := newFramedRun(t, a, pf)
	r.toolCall(t, "read")
	audit0 := a.auditCount(t, r.rn)
	cmd := helper(t, "steal-framed", "CLAWEA_SOCKET="+a.socket, "CLAWEA_RUN="+r.rn.id, "CLAWEA_CAP="+r.rn.capability, "CLAWEA_BODY="+string(toolCall(r.turn, "exec")))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v %s", err, out)
	}
	status, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if status != "403" || field(t, []byte(rest), "reason") != "PROCESS_BINDING" {
		t.Fatalf("the capability from another process, framed: %s, want 403 PROCESS_BINDING", out)
	}
	if n := a.auditCount(t, r.rn); n != audit0 {
		t.Fatalf("the refused request changed the audit: %d -> %d", audit0, n)
	}
	r.toolCall(t, "read")
}

// TestFramedReplayAgainstTheBinary: a stream id sent again while its
// request is in flight ends the connection (stream 0, 400), and an answer
// replayed to a later identical request fails the client's sequence check
// (section 8.3 step 9): the framed answer is the HTTP one's signed
// statement.
func TestFramedReplayAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	r := newFramedRun(t, a, pf)
	pid, start := int64(os.Getpid()), selfStartTime(t)
	pub, _ := a.identityKeys(t)
	path := "/v1/runs/" + r.rn.id + "/tool-calls"
	first := r.toolCall(t, "read")
	st1, err := answer.Verify(pub, first.Fields[fieldStatement], first.Fields[fieldSignature])
	if err != nil {
		t.Fatal(err)
	}
	second := r.toolCall(t, "read")
	st2, err := answer.Verify(pub, second.Fields[fieldStatement], second.Fields[fieldSignature])
	if err != nil || st2.Seq != st1.Seq+1 {
		t.Fatalf("second answer: %v %+v", err, st2)
	}
	// The first answer, replayed by a relay as the answer to the second
	// (the same request bytes, the same body), is refused.
	want := answer.Expect{RunID: r.rn.id, Seq: st1.Seq + 1, Status: 200, RequestHash: answer.RequestHash("POST", path, toolCall(r.turn, "read")),
		ResponseHash: sha256.Sum256(first.Body), PID: pid, StartTime: start}
	if err := st1.Check(want); answer.Code(err) != "ANSWER_SEQUENCE" {
		t.Fatalf("a replayed answer: %v, want ANSWER_SEQUENCE", err)
	}

	// The same stream id twice in one write: the second arrives while the
	// first is in flight (its decision waits for the audit's fsync). Tried
	// a few times, since a first request answered before the second is
	// read makes the second a legitimate reuse.
	audit0 := a.auditCount(t, r.rn)
	one := r.rawToolCall(7)
	refused, sent := false, 0
	for try := 0; try < 5 && !refused; try++ {
		c, br := rawFramed(t, a.socket)
		c.Write(append(append([]byte(nil), one...), one...))
		sent += 2
		last := lastWordAfterAnswers(t, c, br)
		if last != nil {
			if last.Status != 400 || !strings.Contains(string(last.Body), "in flight") {
				t.Fatalf("a duplicate stream id: %d %s", last.Status, last.Body)
			}
			refused = true
		}
	}
	if !refused {
		t.Fatal("a stream id sent twice was never refused while in flight")
	}
	// The first of the pair may have been decided (its answer lost with
	// the connection: the client gives up the run); the duplicate never is.
	if n := a.auditCount(t, r.rn); n >= audit0+sent {
		t.Fatalf("%d audit records after %d requests, of which at least one duplicate was refused", n-audit0, sent)
	}
}

// lastWordAfterAnswers reads answers until the attester closes c and
// returns its stream 0 answer, if any.
func lastWordAfterAnswers(t *testing.T, c net.Conn, br *bufio.Reader) *ctlframe.Frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for n := 0; ; n++ {
		a, _, err := ctlframe.Read(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			t.Fatalf("reading answers: %v", err)
		}
		if a.Stream == 0 {
			return a
		}
		if n == 1 {
			// Both answered: the first had ended before the second came.
			c.Close()
			return nil
		}
	}
}

// TestFramedBadFramesAgainstTheBinary: a frame over the bound, one cut
// short, and bytes that are no frame, each after a valid upgrade, end the
// connection without dispatching anything; the attester serves on.
func TestFramedBadFramesAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	r := newFramedRun(t, a, pf)
	audit0 := a.auditCount(t, r.rn)
	valid := r.rawToolCall(1)
	over := binary.BigEndian.AppendUint32(nil, ctlframe.MaxLen+1)
	over = append(over, valid[4:]...)
	garbage := []byte("GET /v1/gate/policy HTTP/1.1\r\nHost: attester\r\n\r\n")
	for _, tc := range []struct {
		name   string
		send   []byte
		closeW bool // half-close after sending: the frame never completes
	}{
		{"over the bound", over, false},
		{"zero length", []byte{0, 0, 0, 0}, false},
		{"truncated", valid[:len(valid)-5], true},
		{"garbage (HTTP after the upgrade)", garbage, false},
	} {
		c, br := rawFramed(t, a.socket)
		c.Write(tc.send)
		if tc.closeW {
			c.(*net.UnixConn).CloseWrite()
		}
		// The attester names the framing error on stream 0 and closes.
		if last := lastWord(t, c, br); last == nil || last.Status != 400 || !strings.Contains(string(last.Body), "framing error") {
			t.Fatalf("%s: last word %+v", tc.name, last)
		}
		if n := a.auditCount(t, r.rn); n != audit0 {
			t.Fatalf("%s: dispatched (%d audit records, was %d)", tc.name, n, audit0)
		}
	}
	r.toolCall(t, "read")
}

// TestFramedUpgradeOnTCPAgainstTheBinary: the public listener refuses the
// upgrade like every control route (403), before reading a body, and what
// follows is never read as frames.
func TestFramedUpgradeOnTCPAgainstTheBinary(t *testing.T) {
	a, pf := startWithPack(t, nil)
	r := newFramedRun(t, a, pf)
	audit0 := a.auditCount(t, r.rn)
	frame := r.rawToolCall(1)
	c, err := net.Dial("tcp", strings.TrimPrefix(a.public, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "GET /v1/frames HTTP/1.1\r\nHost: attester\r\nConnection: Upgrade\r\nUpgrade: " + ctlframe.Token + "\r\n\r\n"
	c.Write(append([]byte(head), frame...))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get("Upgrade") != "" {
		t.Fatalf("a framed upgrade on TCP: %v %v", err, resp)
	}
	if n := a.auditCount(t, r.rn); n != audit0 {
		t.Fatalf("a frame sent on TCP was dispatched: %d -> %d", audit0, n)
	}
}
