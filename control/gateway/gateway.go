// Package gateway is the attester's model gateway (docs/spec/model-gateway.md):
// per run, on the control socket, it checks every model request of the
// harness against what the attester holds for the run, forwards it to a
// configured upstream, relays the answer as it arrives while parsing it,
// and receipts the call.
package gateway

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
)

// GCPercent is the garbage collector target the attester runs with (its
// --gc-percent default). The gateway's parse of each request is most of
// the attester's allocation while its live heap stays small, so at Go's
// default of 100 the collector runs every few calls, and its mark assists
// held streamed chunks back by milliseconds (make bench-gateway, which
// runs with this target as the binary does).
const GCPercent = 400

// Upstream is one configured provider endpoint
// (attester.gateway.upstreams.<provider>, section 7).
type Upstream struct {
	API              string
	BaseURL          string
	Local            bool
	UnixSocket       string
	APIKey           string
	AttestedAs       string
	AnthropicVersion string
	ConnectTimeout   time.Duration
	HeaderTimeout    time.Duration
	IdleTimeout      time.Duration
	TotalTimeout     time.Duration
	MaxRequestBytes  int64
	MaxResponseBytes int64
	MaxEventBytes    int
	MaxConcurrent    int
}

// Config is attester.gateway, its defaults applied.
type Config struct {
	Upstreams          map[string]Upstream
	MaxSessions        int
	MaxHistoryMessages int
	MaxSuffixBytes     int
	MaxCallsPerRun     int
}

// check refuses an upstream the gateway must not dial: a base URL that is
// not https (unless local), carries user info, a query or a fragment, or a
// unix socket without local. Errors name the key, never a value. New
// applies it, and is how the configuration's decoder applies it.
func (c *Config) check() error {
	names := make([]string, 0, len(c.Upstreams))
	for n := range c.Upstreams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u := c.Upstreams[n]
		key := n
		p, err := url.Parse(u.BaseURL)
		switch {
		case err != nil || p.Host == "" || p.User != nil || p.RawQuery != "" || p.Fragment != "" || p.Opaque != "":
			return fmt.Errorf("%s.baseUrl: must be an absolute http(s) URL without user info, query or fragment", key)
		case p.Scheme != "https" && !(p.Scheme == "http" && u.Local):
			return fmt.Errorf("%s.baseUrl: must be https (http only with local: true)", key)
		case u.UnixSocket != "" && (!u.Local || p.Scheme != "http"):
			return fmt.Errorf("%s.unixSocket: requires local: true and an http:// baseUrl", key)
		case u.UnixSocket != "" && (!filepath.IsAbs(u.UnixSocket) || filepath.Clean(u.UnixSocket) != u.UnixSocket):
			return fmt.Errorf("%s.unixSocket: must be a clean absolute path", key)
		case u.API != apiOpenAIChat && u.API != apiAnthropicMessages:
			return fmt.Errorf("%s.api: must be %s or %s", key, apiOpenAIChat, apiAnthropicMessages)
		}
	}
	return nil
}

// Facts is what the gateway needs of the run a call belongs to, read by
// the control plane when it authorized the request.
type Facts struct {
	// Want holds the run id, the attested prompt and report hashes and the
	// attested model identity.
	Want       poh.PromptCommitments
	AgentID    string
	SessionKey string
	// TurnID and TurnContent are the current turn and the hash its message
	// was registered with; Decisions the gate's decisions in it, in order.
	TurnID      string
	TurnContent [32]byte
	Decisions   []Decision
	// ToolSchemasHash is the report's tool_schemas_hash_b64u, decoded.
	ToolSchemasHash [32]byte
	// WithPrompt calls f with the attested prompt, valid only during f.
	WithPrompt func(f func(p []byte) error) error
	// Sign signs a 2xx answer (attester-api section 8): the statement and
	// signature for status and the SHA-256 of the body relayed.
	Sign func(status int, responseHash [32]byte) (statement, signature []byte, err error)
	// Forwarded, when set, is called once when the request was
	// forwarded and the upstream's answer has begun (its status is in),
	// on the call's goroutine: it must not block. Work for the answer's
	// end that needs only the request (control: the signed answer's
	// request hash) can run then, while the answer is relayed. Sign must
	// not rely on it having been called.
	Forwarded func()
	// Receipt signs the call's gateway_receipt (SignReceipt); Record
	// appends the envelope to the run's gateway record, which verifies it.
	// The gateway records the receipt while the call's audit record is
	// written and synced: both end before the trailers.
	Receipt func(c *Call) (envelopeJSON []byte, err error)
	Record  func(envelopeJSON []byte) error
	// BodyDone, when set, is called once per call, on the call's
	// goroutine, when no read of the request body will happen any more
	// (the caller may then reuse its buffer): as soon as the forwarded
	// body has been written upstream and hashed, so that an answer that
	// streams for minutes does not hold it, or else when the call ends.
	BodyDone func()
}

// Gateway serves the model endpoint of every run.
type Gateway struct {
	cfg      Config
	dir      string
	log      *slog.Logger
	now      func() time.Time
	clients  map[string]*upstreamClient
	sessions *sessions
	mu       sync.Mutex
	runs     map[string]*runState
	// mark, when set (make bench-gateway's breakdown), is told as each
	// step of a call ends, on the call's goroutine.
	mark func(f *Facts, s step)
}

// step names a step of a call for Gateway.mark, in the order they end.
type step uint8

const (
	stepAuthorize step = iota // the run, upstream, turn and llm_call header
	stepParse                 // the body parsed, its messages' canon hashes
	stepRules                 // the rules
	stepUpstream              // the request sent, the answer's headers in
	stepRelay                 // the answer read, parsed, hashed and relayed
	stepFacts                 // the answer's tool calls and text hashed
	stepReceipt               // the receipt signed
	stepAudit                 // the audit record written and fsynced
	stepRecord                // the receipt in the run's record (beside the audit record)
	stepSigned                // the answer's signature
	stepEnd                   // the trailers set, the session updated
	numSteps
)

// step tells g.mark that s ended.
func (c *call) step(s step) {
	if c.g.mark != nil {
		c.g.mark(c.f, s)
	}
}

// runState is the gateway's state of one open run.
type runState struct {
	busy   bool
	calls  int
	events map[string]bool
	turn   turnState
	audit  *auditLog
}

// New makes the gateway for cfg; audit logs go to dir. It refuses an
// upstream the gateway must not dial (see check), and dials nothing and
// writes nothing itself: a configuration is checked by making its gateway.
func New(cfg Config, dir string, log *slog.Logger) (*Gateway, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, dir: dir, log: log, now: time.Now, clients: map[string]*upstreamClient{},
		sessions: newSessions(cfg.MaxSessions), runs: map[string]*runState{}}
	for name, u := range cfg.Upstreams {
		g.clients[name] = newUpstreamClient(name, u)
	}
	return g, nil
}

// CloseRun forgets the run's gateway state and closes its audit log. The
// session histories stay: a later run of the session continues them.
func (g *Gateway) CloseRun(runID string) {
	g.mu.Lock()
	rs := g.runs[runID]
	delete(g.runs, runID)
	g.mu.Unlock()
	if rs != nil {
		_ = rs.audit.close()
	}
}

// errRunClosed: the run was closed while its call opened or wrote its log.
var errRunClosed = errors.New("gateway: the run was closed")

// acquireRun returns the run's state, marked busy (a run's calls are one
// at a time), its audit log open. The run's first call opens the log
// outside the gateway's lock, so that other runs' calls do not wait for
// the file system. A call refused because another call holds the run
// gets the run's state too (not marked: it must not release it), so that
// its refusal is audited (section 2.2).
func (g *Gateway) acquireRun(runID string) (*runState, error) {
	g.mu.Lock()
	rs := g.runs[runID]
	if rs == nil {
		rs = &runState{events: map[string]bool{}, audit: newAuditLog(g.dir, runID)}
		g.runs[runID] = rs
	}
	busy := rs.busy
	rs.busy = true
	g.mu.Unlock()
	if busy {
		return rs, refuse(reasonLimit, "another model call of the run is in progress")
	}
	if err := rs.audit.open(); err != nil {
		g.releaseRun(rs)
		return nil, err
	}
	return rs, nil
}

func (g *Gateway) releaseRun(rs *runState) {
	g.mu.Lock()
	rs.busy = false
	g.mu.Unlock()
}

// receiptID is a new receipt id.
func receiptID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "rcpt_" + b64u.Encode(b[:]), nil
}
