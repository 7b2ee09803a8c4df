package gateway

import (
	"container/list"
	"sync"
)

// history is what the gateway forwarded in one session (3.4): the canon
// hashes of the messages of its last completed request (system text and
// internal-context messages left out) and what it learned of that
// request's answer. Hash only.
type history struct {
	msgs   [][32]byte
	answer *answerFacts
}

// sessionKey names a session: the run's agent and OpenClaw session key.
type sessionKey struct{ agent, session string }

// sessions remembers the last maxSessions sessions' histories, least
// recently used first out. A session is used by one call at a time: busy
// refuses a second concurrent call of the same session, whose history the
// first call is about to change.
type sessions struct {
	mu    sync.Mutex
	max   int
	byKey map[sessionKey]*list.Element
	lru   *list.List // of *sessionEntry, most recent at the front
}

type sessionEntry struct {
	key  sessionKey
	hist *history
	busy bool
}

func newSessions(max int) *sessions {
	return &sessions{max: max, byKey: map[sessionKey]*list.Element{}, lru: list.New()}
}

// acquire returns the session's history (nil when the gateway has none)
// and marks the session busy; ok is false when another call holds it.
func (s *sessions) acquire(k sessionKey) (h *history, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, found := s.byKey[k]
	if !found {
		if s.lru.Len() >= s.max {
			// Forget the least recently used session nobody holds.
			for e := s.lru.Back(); e != nil; e = e.Prev() {
				if old := e.Value.(*sessionEntry); !old.busy {
					delete(s.byKey, old.key)
					s.lru.Remove(e)
					break
				}
			}
			if s.lru.Len() >= s.max {
				return nil, false
			}
		}
		el = s.lru.PushFront(&sessionEntry{key: k})
		s.byKey[k] = el
	}
	e := el.Value.(*sessionEntry)
	if e.busy {
		return nil, false
	}
	e.busy = true
	s.lru.MoveToFront(el)
	return e.hist, true
}

// release ends the call that holds the session; a non-nil next replaces
// its history (a completed call).
func (s *sessions) release(k sessionKey, next *history) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, found := s.byKey[k]
	if !found {
		return
	}
	e := el.Value.(*sessionEntry)
	e.busy = false
	if next != nil {
		e.hist = next
	}
}
