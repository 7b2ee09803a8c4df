package gateway

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/clawea/attester/schema/b64u"
)

// call is one model call as its steps fill it in.
type call struct {
	g        *Gateway
	f        *Facts
	provider string
	up       *upstreamClient
	// rs is the run's state, held by this call (acquireRun); log is the
	// run's audit log, known also when another call holds the run.
	rs      *runState
	log     *auditLog
	sk      sessionKey
	hist    *history
	held    bool
	counted bool
	// bodyDone: the caller was told the body is no longer read
	// (Facts.BodyDone).
	bodyDone bool
	body     []byte
	// bodyHash is H(body), computed once, on a goroutine of its own
	// begun with the call: the rules do not wait for it, and a call that
	// needs it first (a refusal before that goroutine began) computes it
	// itself.
	bodyHash func() [32]byte
	q        *request
	// parsed gives the parsed request's values back to pohjson's pool
	// when the call ends: nothing of the call refers to them after the
	// rules.
	parsed func()
	lc     *llmCall
	suffix string
	// systemHash is H(S), the system text forwarded (the text itself is
	// dropped once the rules have read it).
	systemHash [32]byte
	user       bool
	used       []int
	start      time.Time
	rec        auditRecord
}

// Serve answers one model call of the run f describes: provider and api
// from the request path, body the request body (already read within the
// upstream's MaxRequestBytes). It writes the whole answer: a refusal, or the relayed answer
// with its trailers (sections 2 and 3). body is Serve's while it runs: the caller
// gives a buffer no other goroutine changes meanwhile, since the parsed request's
// strings are body's own bytes while the rules read them (parseRequest). No read of
// body outlasts Serve (its hash, the upstream request: release), and nothing the
// gateway keeps refers to it, so the caller may reuse the buffer once Serve returns.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, provider, api string, body []byte, f *Facts) {
	c := &call{g: g, f: f, provider: provider, body: body, start: g.now()}
	c.bodyHash = sync.OnceValue(func() [32]byte { return sha256.Sum256(body) })
	c.rec = auditRecord{RunID: f.Want.RunID, TurnID: f.TurnID}
	if g.clients[provider] != nil {
		// A configured name only: the path's provider of a refused call
		// is the harness's text, which the audit record and the log do
		// not hold (section 9).
		c.rec.Provider = provider
	}
	defer c.release()
	go c.bodyHash()
	err := c.check(r, api)
	c.step(stepRules)
	c.releaseParse()
	if err != nil {
		c.refuse(w, err)
		return
	}
	c.forward(w, r)
}

// releaseParse gives the parsed request's memory back: once the rules
// have run, nothing reads it.
func (c *call) releaseParse() {
	if c.parsed != nil {
		c.parsed()
		c.parsed = nil
	}
}

// releaseBody tells the caller that no read of the body will happen any
// more (Facts.BodyDone), once: the body's hash is waited for; the caller
// makes sure the upstream request no longer reads it.
func (c *call) releaseBody() {
	if c.bodyDone {
		return
	}
	c.bodyDone = true
	c.bodyHash()
	if c.f.BodyDone != nil {
		c.f.BodyDone()
	}
}

// check applies the gateway's steps before anything is forwarded, in the
// order of the spec; the first failure is the answer.
func (c *call) check(r *http.Request, api string) error {
	g, f := c.g, c.f
	rs, err := g.acquireRun(f.Want.RunID)
	if rs != nil {
		c.log = rs.audit
	}
	if err != nil {
		return err
	}
	c.rs = rs
	if c.up = g.clients[c.provider]; c.up == nil || c.up.u.API != api {
		return refuse(reasonUpstreamUnknown, "the provider is not a configured upstream for this api")
	}
	if c.rs.calls >= g.cfg.MaxCallsPerRun {
		return refuse(reasonLimit, fmt.Sprintf("the run has reached its limit of %d model calls", g.cfg.MaxCallsPerRun))
	}
	if err := c.checkTurn(r.Header.Get(headerTurn)); err != nil {
		return err
	}
	if c.lc, err = parseLLMCall(r.Header.Get(headerLLMCall), f.Want.RunID, f.Want); err != nil {
		return err
	}
	c.step(stepAuthorize)
	if c.q, err = parseRequest(api, c.body, &c.parsed); err != nil {
		return err
	}
	c.step(stepParse)
	for _, step := range []func() error{c.checkModel, c.checkSystem, c.checkTools, c.checkHistory, c.checkEvent} {
		if err := step(); err != nil {
			return err
		}
	}
	if f.Receipt == nil || f.Record == nil || f.Sign == nil {
		return &refusal{Status: http.StatusServiceUnavailable, Reason: reasonUnavailable, Msg: "the gateway cannot receipt calls"}
	}
	if c.up.open.Add(1) > int64(c.up.u.MaxConcurrent) {
		c.up.open.Add(-1)
		return refuse(reasonLimit, "the upstream's concurrent calls are at their limit")
	}
	c.counted = true
	return nil
}

func (c *call) checkTurn(h string) error {
	rest, ok := strings.CutPrefix(h, "turn_")
	if b, err := b64u.Decode(rest); !ok || err != nil || len(b) != 16 || b64u.Encode(b) != rest {
		return refuse(reasonRequestMalformed, headerTurn+" is not a turn id")
	}
	if h != c.f.TurnID {
		return refuse(reasonTurnStale, "the turn is not the run's current turn")
	}
	if c.rs.turn.id != h {
		c.rs.turn = turnState{id: h, used: map[int]bool{}}
	}
	return nil
}

func (c *call) checkModel() error {
	as := c.up.u.AttestedAs
	if as == "" {
		as = c.provider
	}
	if c.q.model != c.f.Want.Model || as != c.f.Want.Provider {
		return refuse(reasonModelNotAllowed, "the provider and model are not the attested model identity")
	}
	// Only now: the audit record holds no request text (section 9), and a
	// refused model member is the harness's text.
	c.rec.Model = c.q.model
	return nil
}

func (c *call) checkSystem() error {
	err := c.f.WithPrompt(func(p []byte) error {
		x, err := suffixOf(c.q, p, c.g.cfg.MaxSuffixBytes)
		// The suffix is kept until the receipt; it is cloned, so that it
		// does not hold the request's one copy (parseRequest).
		c.suffix = strings.Clone(x)
		return err
	})
	if err != nil {
		return err
	}
	sh := sha(c.suffix)
	c.rec.SuffixHash, c.rec.SuffixBytes = b64u.Encode(sh[:]), len(c.suffix)
	return nil
}

func (c *call) checkTools() error {
	if c.q.toolsHash != c.f.ToolSchemasHash {
		return refuse(reasonToolsMismatch, "the tool definitions are not the committed tool schemas")
	}
	c.rec.ToolDescHash = b64u.Encode(c.q.descHash[:])
	return nil
}

func (c *call) checkHistory() error {
	n := 0
	for i, m := range c.q.msgs {
		if m.kind != kindInternal {
			n++
			continue
		}
		if i != len(c.q.msgs)-1 || len(m.text) > c.g.cfg.MaxSuffixBytes {
			return refuse(reasonHistoryChanged, "an internal-context message that is not the last message, or over the suffix bound")
		}
		c.rec.InternalHashes = append(c.rec.InternalHashes, b64u.Encode(m.canon[:]))
	}
	if n > c.g.cfg.MaxHistoryMessages {
		return refuse(reasonHistoryTooLong, fmt.Sprintf("the session is over its limit of %d messages", c.g.cfg.MaxHistoryMessages))
	}
	c.sk = sessionKey{agent: c.f.AgentID, session: c.f.SessionKey}
	h, ok := c.g.sessions.acquire(c.sk)
	if !ok {
		return refuse(reasonLimit, "another model call of the session is in progress")
	}
	c.held, c.hist = true, h
	var err error
	c.user, c.used, err = checkMessages(c.q, c.hist, &c.rs.turn, c.f.TurnContent, c.f.Decisions, c.g.cfg.MaxSuffixBytes)
	// Only the hashes are kept while the answer streams: the bound on
	// memory per open stream does not hold the messages' text.
	for i := range c.q.msgs {
		c.q.msgs[i].text, c.q.msgs[i].results, c.q.msgs[i].calls = "", nil, nil
	}
	return err
}

func (c *call) checkEvent() error {
	c.systemHash = sha(c.q.system)
	c.q.system = ""
	if err := c.lc.matches(c.systemHash, c.suffix); err != nil {
		return err
	}
	if c.rs.events[c.lc.eventHash] {
		return refuse(reasonLLMCallReused, "the llm_call event was bound to an earlier call")
	}
	c.rec.EventHash = c.lc.eventHash
	return nil
}

// release ends the call's hold on its run, session and upstream slot,
// and lets the body go (the upstream request let go of it in forward; the
// body's hash begun with the call is waited for), so that no read of the
// body outlasts the call.
func (c *call) release() {
	c.releaseBody()
	if c.held {
		c.g.sessions.release(c.sk, nil)
	}
	if c.counted {
		c.up.open.Add(-1)
	}
	if c.rs != nil {
		c.g.releaseRun(c.rs)
	}
	c.releaseParse()
}

// refuse answers a refused call: an audit record (when the run is known:
// this call holds it, or another call does), then the JSON refusal.
// Nothing was forwarded.
func (c *call) refuse(w http.ResponseWriter, err error) {
	rf, ok := errors.AsType[*refusal](err)
	if !ok {
		c.g.log.Error("gateway call failed", "run_id", c.f.Want.RunID, "err", err)
		rf = &refusal{Status: http.StatusInternalServerError, Reason: reasonAuditFailed, Msg: "internal error"}
	}
	c.g.log.Warn("gateway call refused", "run_id", c.f.Want.RunID, "provider", c.rec.Provider, "reason", rf.Reason, "status", rf.Status)
	if c.log != nil {
		h := c.bodyHash()
		c.rec.RequestHash = b64u.Encode(h[:])
		c.rec.Outcome, c.rec.Reason, c.rec.Status = "refused", rf.Reason, rf.Status
		if aerr := c.log.append(&c.rec, c.g.now()); aerr != nil {
			c.g.log.Error("gateway audit record failed", "run_id", c.f.Want.RunID, "err", aerr)
		}
	}
	b, _ := json.Marshal(struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}{rf.Msg, rf.Reason})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(rf.Status)
	_, _ = w.Write(append(b, '\n'))
}
