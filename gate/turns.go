package gate

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// VerifyMethod says how the owner verified a turn (seed 000).
type VerifyMethod string

// Verification methods.
const (
	// VerifiedTemplates: verify succeeded with allVerified for the signed
	// templates.
	VerifiedTemplates VerifyMethod = "templates"
	// VerifiedMessage: verify succeeded for a signed owner message.
	VerifiedMessage VerifyMethod = "message"
)

// Limits on session and turn identifiers.
const (
	MaxSessionKeyBytes  = 256
	MaxTurnIDBytes      = 128
	DefaultMaxSessions  = 10000
	maxVerifyMethodSize = 16
)

type turnState struct {
	turn     string
	verified bool
	how      VerifyMethod
}

// turns is the turn-scoped, in-memory verification state of seed 000: a new
// turn resets the session to unverified; only the owner's verify for the
// current turn marks it verified.
type turns struct {
	mu       sync.Mutex
	max      int
	sessions map[string]turnState
}

func newTurns(max int) *turns {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &turns{max: max, sessions: map[string]turnState{}}
}

func checkID(kind, s string, maxBytes int) error {
	if s == "" || len(s) > maxBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be 1-%d bytes of UTF-8", ErrInvalidCall, kind, maxBytes)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s contains control characters", ErrInvalidCall, kind)
		}
	}
	return nil
}

func (t *turns) newTurn(session, turnID string) error {
	if err := checkID("session key", session, MaxSessionKeyBytes); err != nil {
		return err
	}
	if err := checkID("turn id", turnID, MaxTurnIDBytes); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.sessions[session]; !ok && len(t.sessions) >= t.max {
		return ErrTooManySessions
	}
	t.sessions[session] = turnState{turn: turnID}
	return nil
}

func (t *turns) markVerified(session, turnID string, byOwner bool, how VerifyMethod) error {
	if !byOwner {
		return ErrNotOwner
	}
	if how != VerifiedTemplates && how != VerifiedMessage {
		return fmt.Errorf("%w: unknown verify method", ErrInvalidCall)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.sessions[session]
	if !ok {
		return ErrUnknownSession
	}
	if st.turn != turnID {
		return ErrStaleTurn
	}
	st.verified, st.how = true, how
	t.sessions[session] = st
	return nil
}

// status reports whether session is verified for turnID and, when not, why.
func (t *turns) status(session, turnID string) (ok bool, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, found := t.sessions[session]
	switch {
	case !found:
		return false, "no turn has started for this session"
	case st.turn != turnID:
		return false, "the call belongs to a turn that is not the current turn"
	case !st.verified:
		return false, "this turn has not been verified by the owner"
	}
	return true, string(st.how)
}

func (t *turns) end(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, session)
}
