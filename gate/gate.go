// Package gate is the attester's tool-call gate (docs/spec/gate-v1.md). For
// every tool call of an agent run, Decide runs, in this order:
//
//  1. the tool policy (tools.profile / allow / deny, per-agent overrides,
//     deny wins);
//  2. the turn-scoped verification gate of OpenClaw prompt signing: when
//     agents.defaults.sig.enforceVerification is set, gated tools are blocked
//     until the owner's verify succeeded in the current turn;
//  3. the external verifier (tools.verifier): an HMAC-signed webhook and/or a
//     Telegram approval, with failMode when a verifier cannot be consulted.
//
// Every decision is recorded, before Decide returns it, in the hash chain of
// its run (Call.Run) by the Recorder (audit.Log: durable, one chain per run;
// package gate/audit), which holds parameter hashes, never parameters. A
// decision that cannot be recorded is a deny. Secrets from the
// configuration never appear in errors, logs, String() or the policy hash.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/b64u"
)

// stage names the pipeline stage that decided.
type stage string

// Stages, in pipeline order. stageInput is a malformed call.
const (
	stageInput        stage = "input"
	stagePolicy       stage = "tool_policy"
	stageVerification stage = "verification_gate"
	stageVerifier     stage = "external_verifier"
)

// Call is one tool call to decide.
type Call struct {
	SessionKey      string // e.g. "agent:main:main"
	TurnID          string // the current turn (a UUID in OpenClaw)
	AgentID         string // "" means defaultAgentID
	Tool            string // normalized by the gate (normalizeToolName)
	Params          []byte // the tool parameters: a JSON object (nil = {})
	MessageProvider string // optional, e.g. "telegram"
	// Run names the attester's run: the audit chain the decision is
	// recorded in (a Recorder with one chain ignores it) and the
	// verification state (OpenRun, NewTurn, MarkVerified) that applies; a
	// run that is not open has no verified turn.
	Run string
}

// Decision is the gate's answer. Reason is safe to show to the agent: it
// never contains parameter values or secrets.
type Decision struct {
	Allow      bool
	Stage      stage
	Reason     string
	Tool       string // normalized tool name
	ParamsHash string // b64u SHA-256 of the JCS of the parameters
	RequestID  string // external verifier request id, when one was consulted
	AuditSeq   uint64 // seq of the audit record of this decision
}

// Recorder records decisions: it returns the record's seq once the record
// is durable, or an error when it is not recorded (the call is then
// denied). *audit.Log is the attester's durable, per-run recorder;
// *audit.Writer (one chain, no durability) serves tests.
type Recorder interface {
	Record(run string, e audit.Entry) (seq uint64, err error)
}

// Options configure a Gate. Config and Audit are required.
type Options struct {
	Config *Config
	// Audit receives every decision.
	Audit Recorder
	// HTTPClient is used for webhook verifiers; required when a webhook is
	// configured. Its redirect policy is replaced (redirects are refused).
	HTTPClient *http.Client
	// TelegramClient is used for the Bot API; nil means HTTPClient.
	TelegramClient *http.Client
	// TelegramAPIBase is the Bot API base URL; "" means
	// defaultTelegramAPIBase. Tests point it at a local fake server.
	TelegramAPIBase string
	// TelegramPollInterval is the getUpdates interval; 0 means
	// defaultTelegramPollInterval.
	TelegramPollInterval time.Duration
	// Logger receives decision and failure logs; nil discards.
	Logger *slog.Logger
	// Now is the clock for webhook timestamps; nil means time.Now.
	Now func() time.Time
	// MaxRuns bounds the runs open at once (OpenRun); 0 means
	// defaultMaxRuns.
	MaxRuns int
}

type agentPolicy struct {
	label    string // "tools" layer label for the agent, for reasons
	profile  string
	profileM *toolMatcher // nil: no profile restriction
	global   listPolicy
	agent    *listPolicy
	enforce  bool
	gated    *toolMatcher
	verifier effectiveVerifier
}

type effectiveVerifier struct {
	enabled  bool
	include  *toolMatcher
	exclude  *toolMatcher
	failMode failMode
	webhook  *webhookVerifier
	telegram *telegramApprover
}

func (v *effectiveVerifier) inScope(tool string) bool {
	switch {
	case !v.enabled:
		return false
	case v.include != nil:
		return v.include.match(tool)
	case v.exclude != nil:
		return !v.exclude.match(tool)
	}
	return true
}

// Gate decides tool calls. It is safe for concurrent use.
type Gate struct {
	cfg        *Config
	policyHash string
	defaults   *agentPolicy
	agents     map[string]*agentPolicy
	turns      *turns
	audit      Recorder
	log        *slog.Logger
	now        func() time.Time
}

// New builds a Gate from a parsed Config.
func New(opts Options) (*Gate, error) {
	if opts.Config == nil {
		return nil, fmt.Errorf("%w: nil config", errOptions)
	}
	if opts.Audit == nil {
		return nil, fmt.Errorf("%w: an audit writer is required", errOptions)
	}
	g := &Gate{
		cfg:        opts.Config,
		policyHash: opts.Config.policyHash(),
		agents:     map[string]*agentPolicy{},
		turns:      newTurns(opts.MaxRuns),
		audit:      opts.Audit,
		log:        logger(opts.Logger),
		now:        opts.Now,
	}
	if g.now == nil {
		g.now = time.Now
	}
	base := opts.TelegramAPIBase
	if base == "" {
		base = defaultTelegramAPIBase
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: telegram api base must be an http(s) url", errOptions)
	}
	interval := opts.TelegramPollInterval
	if interval <= 0 {
		interval = defaultTelegramPollInterval
	}
	tgClient := opts.TelegramClient
	if tgClient == nil {
		tgClient = opts.HTTPClient
	}
	webhooks := map[*webhookConfig]*webhookVerifier{}
	bots := map[string]*telegramBot{}
	build := func(v effectiveVerifierConfig) (effectiveVerifier, error) {
		ev := effectiveVerifier{enabled: v.Enabled, failMode: v.FailMode}
		if v.Scope.Include != nil {
			ev.include = newToolMatcher(v.Scope.Include)
		}
		if v.Scope.Exclude != nil {
			ev.exclude = newToolMatcher(v.Scope.Exclude)
		}
		if !v.Enabled {
			return ev, nil
		}
		if v.Webhook != nil {
			if opts.HTTPClient == nil {
				return ev, fmt.Errorf("%w: a webhook verifier is configured but HTTPClient is nil", errOptions)
			}
			if webhooks[v.Webhook] == nil {
				webhooks[v.Webhook] = newWebhookVerifier(v.Webhook, opts.HTTPClient, g.log)
			}
			ev.webhook = webhooks[v.Webhook]
		}
		if v.Telegram != nil && v.Telegram.Enabled {
			if tgClient == nil {
				return ev, fmt.Errorf("%w: a telegram verifier is configured but no HTTP client is set", errOptions)
			}
			key := v.Telegram.BotToken.value()
			if bots[key] == nil {
				bots[key] = newTelegramBot(base, v.Telegram.BotToken, tgClient, interval, g.log)
			}
			ev.telegram = &telegramApprover{bot: bots[key], cfg: v.Telegram}
		}
		return ev, nil
	}
	c := opts.Config
	mk := func(a *agentConfig) (*agentPolicy, error) {
		p := &agentPolicy{
			label:   "tools",
			profile: c.Tools.Profile,
			global:  newListPolicy(c.Tools.Allow, c.Tools.Deny),
			enforce: c.EnforceVerification,
			gated:   newToolMatcher(c.GatedTools),
		}
		var agentVer *verifierConfig
		if a != nil {
			if a.Tools.Profile != "" {
				p.profile = a.Tools.Profile
			}
			lp := newListPolicy(a.Tools.Allow, a.Tools.Deny)
			p.agent = &lp
			p.label = "agents.list[id=" + a.ID + "].tools"
			if a.Sig.EnforceVerification != nil && *a.Sig.EnforceVerification {
				p.enforce = true // an agent can turn enforcement on, never off
			}
			if a.Sig.GatedTools != nil {
				p.gated = newToolMatcher(a.Sig.GatedTools)
			}
			agentVer = a.Verifier
		}
		if allow := toolProfiles[p.profile]; allow != nil {
			p.profileM = newToolMatcher(allow)
		}
		ev, err := build(mergeVerifier(c.Verifier, agentVer))
		if err != nil {
			return nil, err
		}
		p.verifier = ev
		return p, nil
	}
	var err error
	if g.defaults, err = mk(nil); err != nil {
		return nil, err
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		if g.agents[a.ID], err = mk(a); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// PolicyHash returns the configuration's policy hash (Config.policyHash).
func (g *Gate) PolicyHash() string { return g.policyHash }

// Decide runs the pipeline for c and appends the decision to the audit log.
// A non-nil error always comes with a deny decision (errInvalidCall for a
// malformed call, errAudit when the decision could not be logged, the
// context's error when ctx ended while an external verifier was consulted).
func (g *Gate) Decide(ctx context.Context, c Call) (Decision, error) {
	in, perr := g.prepare(c)
	if perr != nil {
		d := Decision{Stage: stageInput, Reason: "the tool call is malformed", Tool: in.tool, ParamsHash: in.params.hash}
		return g.record(in, d, perr)
	}
	d := Decision{Tool: in.tool, ParamsHash: in.params.hash}
	p := g.policyFor(in.agent)

	// a. tool policy
	if why := p.checkPolicy(in.tool); why != "" {
		d.Stage, d.Reason = stagePolicy, fmt.Sprintf("tool %q is not allowed by the tool policy (%s)", in.tool, why)
		return g.record(in, d, nil)
	}
	d.Allow, d.Stage, d.Reason = true, stagePolicy, "allowed by the tool policy"

	// b. verification gate
	gated := p.enforce && in.tool != verifyToolName && p.gated.match(in.tool)
	if gated {
		ok, why := g.turns.status(c.Run, in.turn)
		if !ok {
			d.Allow, d.Stage = false, stageVerification
			d.Reason = fmt.Sprintf("tool %q is blocked by the verification gate: %s. Call the verify tool first "+
				"(with no arguments to verify the signed prompt templates, or with message set to the signature id "+
				"of a signed owner message), then retry this call in the same turn", in.tool, why)
			return g.record(in, d, nil)
		}
		d.Stage, d.Reason = stageVerification, "the owner verified this turn ("+why+")"
	}

	// c. external verifier
	if p.verifier.inScope(in.tool) {
		return g.external(ctx, in, p, d, gated)
	}
	return g.record(in, d, nil)
}

func (p *agentPolicy) checkPolicy(tool string) string {
	if why := p.global.check(tool, "tools"); why != "" {
		return why
	}
	if p.agent != nil {
		if why := p.agent.check(tool, p.label); why != "" {
			return why
		}
	}
	if p.profileM != nil && tool != verifyToolName && !p.profileM.match(tool) {
		return "not in tool profile " + p.profile
	}
	return ""
}

func (g *Gate) policyFor(agent string) *agentPolicy {
	if p := g.agents[agent]; p != nil {
		return p
	}
	return g.defaults
}

func (g *Gate) external(ctx context.Context, in callInput, p *agentPolicy, d Decision, gated bool) (Decision, error) {
	d.Stage = stageVerifier
	d.RequestID = newRequestID()
	red, err := redactParams(in.tool, in.params)
	if err != nil {
		d.Allow, d.Reason = false, "the tool call parameters could not be prepared for the external verifier"
		return g.record(in, d, err)
	}
	req := verifierRequest{
		RequestID: d.RequestID, Timestamp: g.now(), Tool: in.tool, Params: red,
		AgentID: in.agent, SessionKey: in.session, MessageProvider: in.provider,
	}
	type backend struct {
		name string
		run  func(context.Context, verifierRequest) verdict
	}
	var backends []backend
	if w := p.verifier.webhook; w != nil {
		backends = append(backends, backend{"webhook", w.verify})
	}
	if t := p.verifier.telegram; t != nil {
		backends = append(backends, backend{"telegram", t.verify})
	}
	failOpen := false
	for _, b := range backends {
		v := b.run(ctx, req)
		if ctx.Err() != nil {
			d.Allow, d.Reason = false, "the tool call was cancelled while the external verifier was consulted"
			return g.record(in, d, ctx.Err())
		}
		if v.unavailable {
			g.log.Warn("gate: external verifier unavailable", "verifier", b.name, "request_id", d.RequestID, "fail_mode", string(p.verifier.failMode), "error", errString(v.err))
			if p.verifier.failMode != failAllow {
				d.Allow, d.Reason = false, "the external verifier ("+b.name+") could not be consulted and failMode is deny"
				return g.record(in, d, nil)
			}
			failOpen = true
			continue
		}
		if !v.allow {
			d.Allow = false
			d.Reason = "denied by the external verifier (" + b.name + ")"
			if v.reason != "" {
				d.Reason += ": " + v.reason
			}
			return g.record(in, d, nil)
		}
	}
	// A verifier may take minutes (a Telegram approval up to an hour): a
	// gated call is allowed only if its turn is still the run's current,
	// verified turn when the answer is given, not only when it was asked.
	if gated {
		if ok, why := g.turns.status(in.run, in.turn); !ok {
			d.Allow, d.Stage = false, stageVerification
			d.Reason = fmt.Sprintf("tool %q is blocked by the verification gate: %s (it changed while the external verifier was consulted)", in.tool, why)
			return g.record(in, d, nil)
		}
	}
	d.Allow = true
	if failOpen {
		d.Reason = "allowed: an external verifier could not be consulted and failMode is allow"
	} else {
		d.Reason = "approved by the external verifier"
	}
	return g.record(in, d, nil)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// record appends d to the audit log and logs it. If the append fails the
// call is denied.
func (g *Gate) record(in callInput, d Decision, cause error) (Decision, error) {
	dec := audit.Deny
	if d.Allow {
		dec = audit.Allow
	}
	seq, err := g.audit.Record(in.run, audit.Entry{
		Session: in.session, Turn: in.turn, Agent: in.agent, Tool: in.tool,
		ParamsHash: d.ParamsHash, Stage: string(d.Stage), Decision: dec, Reason: d.Reason,
	})
	if err != nil {
		g.log.Error("gate: audit append failed; call denied", "tool", in.tool, "error", err.Error())
		d.Allow = false
		d.Reason = "the decision could not be recorded in the audit log"
		return d, errors.Join(fmt.Errorf("%w: %w", errAudit, err), cause)
	}
	d.AuditSeq = seq
	// Debug, not Info: the durable audit log is the record of every
	// decision; a log line per decision would double the I/O of the hot
	// path (issue 13's load test).
	if ctx := context.Background(); g.log.Enabled(ctx, slog.LevelDebug) {
		// LogAttrs: no boxing of the values into interfaces.
		g.log.LogAttrs(ctx, slog.LevelDebug, "gate: decision", slog.Uint64("seq", seq),
			slog.String("agent", in.agent), slog.String("session", in.session), slog.String("turn", in.turn),
			slog.String("tool", in.tool), slog.String("stage", string(d.Stage)), slog.String("decision", dec),
			slog.String("params_hash_b64u", d.ParamsHash), slog.String("request_id", d.RequestID))
	}
	return d, cause
}

// callInput is a validated, normalized Call.
type callInput struct {
	session, turn, agent, tool, provider, run string
	params                                    params
}

const maxProviderBytes = 64

// prepare validates and normalizes c. On error it still returns the fields
// that are valid (others empty), and a parameter hash, for the audit record.
func (g *Gate) prepare(c Call) (callInput, error) {
	in := callInput{run: c.Run}
	var errs []error
	p, err := canonicalParams(c.Params)
	if err != nil {
		errs = append(errs, err)
		// Hash the raw bytes so the record still commits to what was sent.
		p = params{hash: b64u.SHA256(c.Params)}
	}
	in.params = p
	if err := checkID("session key", c.SessionKey, MaxSessionKeyBytes); err != nil {
		errs = append(errs, err)
	} else {
		in.session = c.SessionKey
	}
	if err := checkID("turn id", c.TurnID, maxTurnIDBytes); err != nil {
		errs = append(errs, err)
	} else {
		in.turn = c.TurnID
	}
	agent := c.AgentID
	if agent == "" {
		agent = defaultAgentID
	}
	if !validAgentID(agent) {
		errs = append(errs, fmt.Errorf("%w: invalid agent id", errInvalidCall))
	} else {
		in.agent = agent
	}
	tool := normalizeToolName(c.Tool)
	if !validToolName(tool, false) {
		errs = append(errs, fmt.Errorf("%w: invalid tool name", errInvalidCall))
	} else {
		in.tool = tool
	}
	if c.MessageProvider != "" {
		if err := checkID("message provider", c.MessageProvider, maxProviderBytes); err != nil {
			errs = append(errs, err)
		} else {
			in.provider = c.MessageProvider
		}
	}
	return in, errors.Join(errs...)
}
