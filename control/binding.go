package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/answer"
)

// Process is one process as the attester sees it: its pid in the
// attester's pid namespace and its start time (clock ticks after boot), so
// that a later process given the same pid is another Process.
type Process struct {
	PID       int
	StartTime uint64
}

// reasonProcessBinding is the reason of a 403 for a request from a process
// other than the one its run is bound to, or from a process the attester
// cannot identify.
const reasonProcessBinding = "PROCESS_BINDING"

var (
	// errProcessUnknown refuses a peer whose pid the attester cannot see
	// (another pid namespace: SO_PEERCRED reports 0) or whose start time
	// it cannot read.
	errProcessUnknown = &Error{kind: kindForbidden, Reason: reasonProcessBinding,
		Msg: "process binding: the attester cannot identify the calling process (pid or start time unreadable); the orchestrator must run in the attester's pid namespace"}
	errOtherProcess = &Error{kind: kindForbidden, Reason: reasonProcessBinding,
		Msg: "process binding: the run is bound to the process that created it, and this request comes from another process"}
)

// callerNotAllowed refuses a control connection whose peer's uid is not in
// attester.controlUids, or whose credentials could not be read.
const callerNotAllowed = "this caller may not use the control API"

// AdmitCaller checks the peer of the control connection ctx belongs to
// (the peer ConnContext recorded; attester-api section 2, steps 1 and 2): its
// uid MUST be in attester.controlUids (else a 403) and its process MUST be
// identifiable (else 403 PROCESS_BINDING). The refusal's detail, for the
// log only, names the peer's uid and pid.
func (c *Config) AdmitCaller(ctx context.Context) error {
	p, ok := peerFrom(ctx)
	if !ok {
		return &Error{kind: kindForbidden, Msg: callerNotAllowed, Err: errors.New("the peer's credentials are unknown")}
	}
	if !c.uidAllowed(p.UID) {
		return &Error{kind: kindForbidden, Msg: callerNotAllowed, Err: fmt.Errorf("peer uid %d is not in attester.controlUids", p.UID)}
	}
	if _, err := processOf(p); err != nil {
		return &Error{kind: kindForbidden, Reason: reasonProcessBinding, Msg: errProcessUnknown.Msg, Err: fmt.Errorf("peer uid %d pid %d", p.UID, p.PID)}
	}
	return nil
}

// uidAllowed reports whether a peer of uid may use the control API
// (attester.controlUids).
func (c *Config) uidAllowed(uid int) bool {
	_, ok := c.uidAllow[uid]
	return ok
}

// processFrom is the Process of the control connection ctx belongs to
// (the peer ConnContext recorded), or a 403 PROCESS_BINDING refusal when the
// attester cannot identify it.
func processFrom(ctx context.Context) (Process, error) {
	p, ok := peerFrom(ctx)
	if !ok {
		return Process{}, errProcessUnknown
	}
	return processOf(p)
}

// processOf is the Process of a control connection's peer, or
// errProcessUnknown.
func processOf(p peerCred) (Process, error) {
	if p.PID <= 0 || p.PID > pohjson.MaxSafeInteger || !p.StartTimeKnown || p.StartTime > pohjson.MaxSafeInteger {
		return Process{}, errProcessUnknown
	}
	return Process{PID: p.PID, StartTime: p.StartTime}, nil
}

// signedAnswer is a signed control answer: the statement's canonical
// bytes and the signature over answer.Message(statement).
type signedAnswer struct {
	Statement []byte
	Signature []byte
}

// SignAnswer signs the answer to one request of rn from caller (the
// process rn is bound to): status, the request's hash
// (answer.RequestHash) and the SHA-256 of the exact response body, under
// the run's next sequence number (1 is the answer that created the run).
// Every call uses a number, so no two answers of a run share one.
func (s *Service) SignAnswer(rn *Run, caller Process, status int, requestHash, responseHash [32]byte) (*signedAnswer, error) {
	st := answer.Statement{
		AnswerVersion: answer.Version, AttesterDID: s.id.DID,
		PeerPID: int64(caller.PID), PeerStartTime: int64(caller.StartTime),
		RequestHashB64u: b64u.Encode(requestHash[:]), ResponseHashB64u: b64u.Encode(responseHash[:]),
		RunID: rn.id, Seq: rn.seq.Add(1), Status: int64(status),
	}
	b, err := st.Marshal()
	if err != nil {
		return nil, fmt.Errorf("control: answer statement: %w", err)
	}
	sig, err := s.answers.sign(b)
	if err != nil {
		return nil, fmt.Errorf("control: signing an answer: %w", err)
	}
	return &signedAnswer{Statement: b, Signature: sig}, nil
}
