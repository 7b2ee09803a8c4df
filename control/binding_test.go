package control

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/answer"
)

// testProc is the process the tests' runs are created by.
var testProc = Process{PID: 4242, StartTime: 123456}

// from is the context of a control request from p (as ConnContext records
// it for a peer of this uid).
func from(p Process) context.Context {
	return withPeer(context.Background(), peerCred{PID: p.PID, UID: os.Geteuid(), StartTime: p.StartTime, StartTimeKnown: true})
}

func TestProcessOf(t *testing.T) {
	if got, err := processOf(peerCred{PID: 42, StartTime: 7, StartTimeKnown: true}); err != nil || got != (Process{42, 7}) {
		t.Fatalf("processOf: %v %v", got, err)
	}
	for name, p := range map[string]peerCred{
		"none":                       {},
		"pid 0 (another namespace)":  {PID: 0, StartTime: 7, StartTimeKnown: true},
		"start time unreadable":      {PID: 42},
		"start time beyond 2^53 - 1": {PID: 42, StartTime: 1 << 53, StartTimeKnown: true},
	} {
		if _, err := processOf(p); !errors.Is(err, errProcessUnknown) {
			t.Errorf("%s: %v, want errProcessUnknown", name, err)
		}
	}
}

// TestAdmitCallerUnknownProcess: a peer of an allowed uid whose pid or
// start time the attester cannot read is refused before anything else
// (403 PROCESS_BINDING); the same peer with both known is admitted.
func TestAdmitCallerUnknownProcess(t *testing.T) {
	c := &Config{uidAllow: map[int]struct{}{os.Geteuid(): {}}}
	peerOf := func(pid int, known bool) context.Context {
		return withPeer(context.Background(), peerCred{PID: pid, UID: os.Geteuid(), StartTime: 1, StartTimeKnown: known})
	}
	for name, ctx := range map[string]context.Context{"pid 0": peerOf(0, true), "no start time": peerOf(42, false)} {
		err := c.AdmitCaller(ctx)
		if ce, ok := errors.AsType[*Error](err); !ok || ce.Status() != 403 || ce.Reason != reasonProcessBinding {
			t.Errorf("%s: %v, want 403 %s", name, err, reasonProcessBinding)
		}
	}
	if err := c.AdmitCaller(peerOf(42, true)); err != nil {
		t.Errorf("a known process: %v", err)
	}
}

// TestRunBoundToItsProcess: the capability works only from the process
// that created the run (same pid and start time); a run cannot be created
// for an unknown process; answers are signed in sequence from 1.
func TestRunBoundToItsProcess(t *testing.T) {
	p, s, enc, mj := newSealedPack(t)
	req := func() *createRunRequest {
		return &createRunRequest{PackB64u: b64u.Encode(enc), Manifest: mj, ReportHashB64u: p.Rebuilt.ReportHashB64u(), AgentID: "main", SessionKey: "k"}
	}
	if _, _, _, err := s.CreateRun(context.Background(), decoded(req())); !errors.Is(err, errProcessUnknown) || s.runs.open() != 0 {
		t.Fatalf("run for an unknown process: %v, %d open", err, s.runs.open())
	}
	resp, rn, caller, err := s.CreateRun(from(testProc), decoded(req()))
	if err != nil || caller != testProc {
		t.Fatalf("create: %v, caller %v", err, caller)
	}
	bearer := "Bearer " + resp.Capability
	if got, caller, err := s.Authorize(from(testProc), resp.RunID, bearer); err != nil || got != rn || caller != testProc {
		t.Fatalf("the creating process: %v", err)
	}
	for name, other := range map[string]Process{
		"another pid":                      {PID: testProc.PID + 1, StartTime: testProc.StartTime},
		"the same pid, another start time": {PID: testProc.PID, StartTime: testProc.StartTime + 1},
	} {
		_, _, err := s.Authorize(from(other), resp.RunID, bearer)
		if ce, ok := errors.AsType[*Error](err); !ok || ce.kind != kindForbidden || ce.Reason != reasonProcessBinding {
			t.Errorf("%s: %v, want 403 %s", name, err, reasonProcessBinding)
		}
	}
	// Another process with a wrong capability learns nothing more.
	other, _, _ := newCapability()
	if _, _, err := s.Authorize(from(Process{PID: 1, StartTime: 1}), resp.RunID, "Bearer "+other); !errors.Is(err, errNotThisRun) {
		t.Fatalf("wrong capability from another process: %v", err)
	}

	reqH, respH := answer.RequestHash("POST", "/v1/runs", []byte("{}")), sha256.Sum256([]byte("body"))
	for want := int64(1); want <= 3; want++ {
		sa, err := s.SignAnswer(rn, testProc, 201, reqH, respH)
		if err != nil {
			t.Fatal(err)
		}
		st, err := answer.Verify(s.id.Public, b64u.Encode(sa.Statement), b64u.Encode(sa.Signature))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(answer.Expect{RunID: rn.id, Seq: want, Status: 201, RequestHash: reqH, ResponseHash: respH, PID: int64(testProc.PID), StartTime: int64(testProc.StartTime)}); err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
	}
}

// BenchmarkSignAnswer measures what signing adds to each control answer
// (attester-api section 8): one statement and one Ed25519 signature by the
// identity key. BenchmarkVerifyAnswer is a client's check of it.
func BenchmarkSignAnswer(b *testing.B) {
	rn, s := benchRun(b)
	reqH, respH := answer.RequestHash("POST", "/v1/runs/"+rn.id+"/tool-calls", []byte(`{"turn_id":"t","tool":"read"}`)), sha256.Sum256([]byte(`{"allow":true}`))
	for b.Loop() {
		if _, err := s.SignAnswer(rn, testProc, 200, reqH, respH); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyAnswer(b *testing.B) {
	rn, s := benchRun(b)
	reqH, respH := answer.RequestHash("POST", "/v1/runs/"+rn.id+"/tool-calls", []byte(`{"turn_id":"t","tool":"read"}`)), sha256.Sum256([]byte(`{"allow":true}`))
	sa, err := s.SignAnswer(rn, testProc, 200, reqH, respH)
	if err != nil {
		b.Fatal(err)
	}
	st, sig := b64u.Encode(sa.Statement), b64u.Encode(sa.Signature)
	want := answer.Expect{RunID: rn.id, Seq: 1, Status: 200, RequestHash: reqH, ResponseHash: respH, PID: int64(testProc.PID), StartTime: int64(testProc.StartTime)}
	for b.Loop() {
		a, err := answer.Verify(s.id.Public, st, sig)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Check(want); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRun is a run of the min pack created by testProc.
func benchRun(b *testing.B) (*Run, *Service) {
	p, s, enc, mj := newSealedPack(b)
	req := &createRunRequest{PackB64u: b64u.Encode(enc), Manifest: mj, ReportHashB64u: p.Rebuilt.ReportHashB64u(), AgentID: "main", SessionKey: "s"}
	_, rn, _, err := s.CreateRun(from(testProc), decoded(req))
	if err != nil {
		b.Fatal(err)
	}
	return rn, s
}
