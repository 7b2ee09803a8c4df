package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawea/attester/schema/b64u"
	signed "github.com/clawea/attester/wire/answer"
)

// The answer's trailers (section 2.1).
const (
	trailerReceipt = "Clawea-Gateway-Receipt"
	trailerError   = "Clawea-Gateway-Error"
)

// relayBuf is the size of one read from the upstream: an open stream holds
// one, taken from relayBufs.
const relayBuf = 16 << 10

var relayBufs = sync.Pool{New: func() any { return new([relayBuf]byte) }}

// relay is the state of one answer being relayed.
type relay struct {
	status int
	mode   string // "sse", "json" or "" (a non-2xx status: not parsed)
	sse    *sseParser
	ans    *answer
	whole  []byte
	h      hash.Hash
	n      int64
	fail   string
}

// forward sends the checked request upstream and relays the answer.
func (c *call) forward(w http.ResponseWriter, r *http.Request) {
	u := c.up.u
	ctx, cancel := context.WithTimeout(r.Context(), u.TotalTimeout)
	defer cancel()
	req, ub, err := c.up.request(ctx, c.body, c.q.stream)
	if err != nil {
		c.refuse(w, refuse(reasonUpstreamUnreach, "cannot build the upstream request"))
		return
	}
	// The request holds the body until it is sent, and no read of it
	// outlasts the call (the caller may reuse the buffer: Serve); the
	// call needs only its hash from now on.
	defer ub.letGo()
	c.body = nil
	c.rs.events[c.lc.eventHash] = true
	c.rs.calls++
	resp, err := c.up.client.Do(req)
	ub.sent()
	c.step(stepUpstream)
	if err == nil && c.f.Forwarded != nil {
		// What the run computes for the answer's end from the request
		// alone (control: the signed answer's request hash) runs while
		// the answer is relayed, not while the upstream reads the request
		// (on a 2-core machine, beside a local model server) or the rules
		// run.
		c.f.Forwarded()
	}
	if ub.written() {
		// The upstream has all of the body: the caller may reuse it
		// while the answer is relayed.
		ub.letGo()
		c.releaseBody()
	}
	if err != nil {
		reason := reasonUpstreamUnreach
		if ne, ok := errors.AsType[net.Error](err); (ok && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
			reason = reasonUpstreamTimeout
		}
		c.g.log.Warn("gateway upstream failed", "run_id", c.f.Want.RunID, "provider", c.provider, "reason", reason)
		c.refuse(w, refuse(reason, "the upstream did not answer"))
		return
	}
	defer resp.Body.Close()
	rl := &relay{status: resp.StatusCode, h: sha256.New()}
	if err := rl.setMode(c, resp.Header.Get("Content-Type")); err != nil {
		c.refuse(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", resp.Header.Get("Content-Type"))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Trailer", trailerReceipt+", "+signed.HeaderStatement+", "+signed.HeaderSignature+", "+trailerError)
	w.WriteHeader(resp.StatusCode)
	var idle atomic.Bool
	t := time.AfterFunc(u.IdleTimeout, func() { idle.Store(true); cancel() })
	defer t.Stop()
	rl.pump(w, resp.Body, u, t)
	c.step(stepRelay)
	if rl.fail == reasonUpstreamCut && (idle.Load() || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		rl.fail = reasonUpstreamTimeout
	}
	c.finish(w, rl)
}

// setMode picks how a 2xx answer is parsed from its content type; another
// content type is refused before the status is relayed.
func (rl *relay) setMode(c *call, ct string) error {
	if rl.status < 200 || rl.status > 299 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(ct)
	rl.ans = newAnswer(c.up.u.API, c.up.u.MaxEventBytes)
	switch mt {
	case "text/event-stream":
		rl.mode = "sse"
		rl.sse = &sseParser{maxEvent: c.up.u.MaxEventBytes, onEvent: rl.ans.event}
	case "application/json":
		rl.mode = "json"
	default:
		return refuse(reasonUpstreamMalformed, "the upstream's answer is neither JSON nor an event stream")
	}
	return nil
}

// pump copies the answer chunk by chunk: each chunk is parsed, then
// written and flushed; a chunk the parser refuses is not relayed.
func (rl *relay) pump(w http.ResponseWriter, body io.Reader, u Upstream, t *time.Timer) {
	rc := http.NewResponseController(w)
	bp := relayBufs.Get().(*[relayBuf]byte)
	defer relayBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := body.Read(buf)
		t.Reset(u.IdleTimeout)
		if n > 0 {
			rl.n += int64(n)
			if rl.n > u.MaxResponseBytes {
				rl.fail = reasonResponseTooLarge
				return
			}
			if perr := rl.feed(buf[:n]); perr != nil {
				rl.fail = failReason(perr)
				return
			}
			rl.h.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				rl.fail = reasonUpstreamCut
				return
			}
			_ = rc.Flush()
		}
		if err == io.EOF {
			rl.fail = rl.end()
			return
		}
		if err != nil {
			rl.fail = reasonUpstreamCut
			return
		}
	}
}

func (rl *relay) feed(b []byte) error {
	switch rl.mode {
	case "sse":
		return rl.sse.feed(b)
	case "json":
		rl.whole = append(rl.whole, b...)
	}
	return nil
}

// end checks the answer's end: an event stream must have reached its
// end event, a JSON body must parse.
func (rl *relay) end() string {
	var err error
	switch rl.mode {
	case "sse":
		if err = rl.sse.end(); err == nil && !rl.ans.done {
			err = errAnswerCut
		}
	case "json":
		err = rl.ans.whole(rl.whole)
		rl.whole = nil
	}
	if err != nil {
		return failReason(err)
	}
	return ""
}

func failReason(err error) string {
	switch {
	case errors.Is(err, errAnswerTooLarge):
		return reasonResponseTooLarge
	case errors.Is(err, errAnswerCut):
		return reasonUpstreamCut
	}
	return reasonUpstreamMalformed
}

// finish receipts the call, writes its audit record, updates the session
// when the answer completed, and sends the trailers: all before the last
// byte of the answer.
func (c *call) finish(w http.ResponseWriter, rl *relay) {
	var facts *answerFacts
	if rl.mode != "" && rl.fail == "" {
		var err error
		if facts, err = rl.ans.facts(); err != nil {
			rl.fail = failReason(err)
		}
	}
	var respHash [32]byte
	copy(respHash[:], rl.h.Sum(nil))
	c.step(stepFacts)
	// The answer is signed while the receipt is made and the audit record
	// written and synced: the signature depends on neither, and they are
	// the longest steps of a call. Both end before any trailer is written.
	var st, sig []byte
	var serr error
	signedDone := make(chan struct{})
	go func() {
		defer close(signedDone)
		if rl.status >= 200 && rl.status <= 299 {
			st, sig, serr = c.f.Sign(rl.status, respHash)
		}
	}()
	now := c.g.now()
	reqHash := c.bodyHash()
	c.rec.RequestHash = b64u.Encode(reqHash[:])
	env, rerr := c.receipt(rl, respHash, now)
	c.step(stepReceipt)
	h := w.Header()
	c.rec.Outcome, c.rec.Status, c.rec.ResponseHash = "forwarded", rl.status, b64u.Encode(respHash[:])
	if rl.fail != "" {
		c.rec.Outcome, c.rec.Reason = "failed", rl.fail
	}
	// The run's record verifies and chains the receipt while the audit
	// record, which names the receipt by its hash, is written and synced.
	var recorded chan error
	if rerr == nil {
		h.Set(trailerReceipt, b64u.Encode(env))
		rh := sha256.Sum256(env)
		c.rec.ReceiptHash = b64u.Encode(rh[:])
		recorded = make(chan error, 1)
		go func() { recorded <- c.f.Record(env) }()
	}
	// The log is held until the second record that may follow: a call
	// refused meanwhile (the run is busy) writes its record after both.
	l := c.rs.audit
	l.mu.Lock()
	aerr := l.appendLocked(&c.rec, now)
	c.step(stepAudit)
	if recorded != nil {
		rerr = <-recorded
		c.step(stepRecord)
		if rerr != nil && aerr == nil {
			// The audit record names a receipt the run's record refused:
			// a second record says the call failed (section 9).
			c.rec.Outcome, c.rec.Reason, c.rec.ReceiptHash = "failed", reasonAuditFailed, ""
			aerr = l.appendLocked(&c.rec, c.g.now())
		}
	}
	l.mu.Unlock()
	<-signedDone
	c.step(stepSigned)
	if aerr != nil || rerr != nil {
		c.g.log.Error("gateway receipt or audit record failed", "run_id", c.f.Want.RunID, "receipt_err", rerr, "audit_err", aerr)
		rl.fail, facts = reasonAuditFailed, nil
		h.Del(trailerReceipt)
	}
	switch {
	case serr != nil:
		c.g.log.Error("gateway answer not signed", "run_id", c.f.Want.RunID, "err", serr)
	case st != nil:
		h.Set(signed.HeaderStatement, b64u.Encode(st))
		h.Set(signed.HeaderSignature, b64u.Encode(sig))
	}
	if rl.fail != "" {
		h.Set(trailerError, rl.fail)
	} else if facts != nil {
		c.complete(facts)
	}
	c.g.log.Info("gateway call", "run_id", c.f.Want.RunID, "provider", c.provider, "status", rl.status, "outcome", c.rec.Outcome, "reason", rl.fail, "latency_ms", now.Sub(c.start).Milliseconds())
	c.step(stepEnd)
}

// receipt signs the call's receipt (section 8); the run's record takes it
// in finish.
func (c *call) receipt(rl *relay, respHash [32]byte, now time.Time) ([]byte, error) {
	id, err := receiptID()
	if err != nil {
		return nil, err
	}
	as := c.up.u.AttestedAs
	if as == "" {
		as = c.provider
	}
	o := &Call{
		RunID: c.f.Want.RunID, ReceiptID: id, Provider: as, Model: c.q.model, EventHashB64u: c.lc.eventHash,
		RequestSHA256: c.bodyHash(), ResponseSHA256: respHash, Latency: now.Sub(c.start), At: now,
		SystemTextSHA256: c.systemHash, SuffixSHA256: sha(c.suffix), SuffixUTF16Len: c.lc.suffixLen,
	}
	if rl.ans != nil {
		o.TokensInput, o.TokensOutput = rl.ans.tokensIn, rl.ans.tokensOut
	}
	return c.f.Receipt(o)
}

// complete records a completed call: the session's history becomes this
// request's messages and its answer, the turn's user message is done, and
// the decisions its tool results used are spent.
func (c *call) complete(facts *answerFacts) {
	next := &history{answer: facts, msgs: make([][32]byte, 0, len(c.q.msgs))}
	for _, m := range c.q.msgs {
		if m.kind != kindInternal {
			next.msgs = append(next.msgs, m.canon)
		}
	}
	c.g.sessions.release(c.sk, next)
	c.held = false
	if c.user {
		c.rs.turn.userDone = true
	}
	for _, d := range c.used {
		c.rs.turn.used[d] = true
	}
}
