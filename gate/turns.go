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

// Limits on identifiers and on the verification state.
const (
	MaxSessionKeyBytes = 256
	maxTurnIDBytes     = 128
	maxRunIDBytes      = 128
	// defaultMaxRuns bounds the runs whose verification state is kept at
	// once when Options.MaxRuns is 0. The state of a run is a few words and
	// lives from OpenRun to EndRun, so this is a bound on concurrently open
	// runs, never on how many runs were opened over time.
	defaultMaxRuns = 4096
)

// runTurn is the verification state of one run: its current turn and
// whether the owner verified it. It is replaced as a whole by NewTurn.
type runTurn struct {
	turn     string
	owner    bool // the turn's message came from a configured owner
	verified bool
	how      VerifyMethod
}

// turns is the turn-scoped, in-memory verification state of seed 000, one
// entry per open run: a new turn resets the run to unverified; only verify
// in an owner turn, for the current turn, marks it verified.
type turns struct {
	mu   sync.Mutex
	max  int
	runs map[string]*runTurn
}

func newTurns(max int) *turns {
	if max <= 0 {
		max = defaultMaxRuns
	}
	return &turns{max: max, runs: map[string]*runTurn{}}
}

func checkID(kind, s string, maxBytes int) error {
	if s == "" || len(s) > maxBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s must be 1-%d bytes of UTF-8", errInvalidCall, kind, maxBytes)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s contains control characters", errInvalidCall, kind)
		}
	}
	return nil
}

// CheckSessionKey reports whether s is a session key Decide accepts. Entry
// points that take a session key once (a run's creation) call it so that
// nothing is accepted at the door and refused on every later call.
func CheckSessionKey(s string) error { return checkID("session key", s, MaxSessionKeyBytes) }

// checkTurnID reports whether s is a turn id the gate accepts.
func checkTurnID(s string) error { return checkID("turn id", s, maxTurnIDBytes) }

// checkRunID reports whether s is a run id the gate accepts.
func checkRunID(s string) error { return checkID("run id", s, maxRunIDBytes) }

// CheckAgentID reports whether s ("" means defaultAgentID) is an agent id
// Decide accepts, and returns it. Ids are taken as they are, never trimmed
// or case-folded: " main ", "MAIN" or a Kelvin sign are refused, not
// mapped onto a configured agent.
func CheckAgentID(s string) (string, error) {
	a := s
	if a == "" {
		a = defaultAgentID
	}
	if !validAgentID(a) {
		return "", fmt.Errorf("%w: invalid agent id", errInvalidCall)
	}
	return a, nil
}

func (t *turns) openRun(run string) error {
	if err := checkRunID(run); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.runs[run]; ok {
		return errRunExists
	}
	if len(t.runs) >= t.max {
		return errTooManyRuns
	}
	t.runs[run] = &runTurn{}
	return nil
}

func (t *turns) newTurn(run, turnID string, owner bool) error {
	if err := checkTurnID(turnID); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.runs[run]
	if !ok {
		return errUnknownRun
	}
	*st = runTurn{turn: turnID, owner: owner}
	return nil
}

func (t *turns) markVerified(run, turnID string, how VerifyMethod) error {
	if how != VerifiedTemplates && how != VerifiedMessage {
		return fmt.Errorf("%w: unknown verify method", errInvalidCall)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.runs[run]
	switch {
	case !ok:
		return errUnknownRun
	case st.turn == "" || st.turn != turnID:
		return errStaleTurn
	case !st.owner:
		return errNotOwner
	}
	st.verified, st.how = true, how
	return nil
}

// status reports whether run is verified for turnID and, when not, why.
func (t *turns) status(run, turnID string) (ok bool, why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, found := t.runs[run]
	switch {
	case !found:
		return false, "the run is not open"
	case st.turn == "":
		return false, "no turn has started for this session"
	case st.turn != turnID:
		return false, "the call belongs to a turn that is not the current turn"
	case !st.verified:
		return false, "this turn has not been verified by the owner"
	}
	return true, string(st.how)
}

func (t *turns) end(run string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, run)
}

// OpenRun creates the verification state of a run (no turn yet: gated
// tools are blocked). It fails with errRunExists for an open run and with
// errTooManyRuns when Options.MaxRuns runs are open.
func (g *Gate) OpenRun(run string) error { return g.turns.openRun(run) }

// EndRun forgets a run's verification state. Call it when the run closes:
// the state lives exactly as long as the run.
func (g *Gate) EndRun(run string) { g.turns.end(run) }

// NewTurn starts turnID in run: the run becomes unverified (seed 000
// resetVerification). owner says whether the turn's message came from an
// owner identity of the configuration; only an owner turn can be verified.
// Call it when a user message starts a turn.
func (g *Gate) NewTurn(run, turnID string, owner bool) error {
	return g.turns.newTurn(run, turnID, owner)
}

// MarkVerified records that verify succeeded for the run's current turn
// (all templates verified, or a signed owner message verified). It fails
// with errUnknownRun for a run that is not open, errStaleTurn if turnID is
// not the current turn, and errNotOwner if the current turn is not an owner
// turn; the state is unchanged on error.
func (g *Gate) MarkVerified(run, turnID string, how VerifyMethod) error {
	return g.turns.markVerified(run, turnID, how)
}
