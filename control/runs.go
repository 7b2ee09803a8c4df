package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/evidencedoc"
)

// Run is one agent run: the rebuilt prompt (in sealed memory), its
// commitments, its capability (only the hash), the current turn and the
// run's bounded counters. Its gate verification state lives in the gate
// under the run id, from creation to close.
type Run struct {
	id         string
	agentID    string
	sessionKey string
	capHash    [32]byte
	created    time.Time
	// proc is the process that created the run: every later request of
	// the run must come from it (attester-api section 2, process binding).
	proc Process
	// seq is the sequence number of the run's last signed answer.
	seq atomic.Int64

	mu        sync.Mutex
	prompt    *sealed.Buffer
	promptH   string // b64u SHA-256 of the prompt
	reportH   string // b64u SHA-256(JCS(report))
	packCTH   string // b64u SHA-256 of prompt_pack.enc
	packID    string
	chars     int
	committed poh.EventChainEntry
	// admissionH is the hash of the admission policy the run was admitted
	// under ("" when none is configured); sensitive is that policy's
	// sensitive flag. Both are committed in the run's attestation.
	admissionH string
	sensitive  bool
	// requireGateway says that policy requires every model call of the
	// run to go through the model gateway (admission-policy-v1.md 7.1).
	requireGateway bool
	// isolation is what the attester observed of its isolation when it
	// created the run (observeIsolation), committed in its attestation.
	isolation *evidencedoc.Isolation
	// The current turn: its id, whether its sender is a configured owner,
	// and its message (signed when the turn is an owner turn).
	turn      string
	turnOwner bool
	turnMsg   ownerMessage
	// turnContent is the hash the current turn's message was registered
	// with, and decisions the gate's decisions in the turn: the model
	// gateway checks the turn's user message and tool results against
	// them (docs/spec/model-gateway.md sections 3.5, 3.6).
	turnContent [32]byte
	decisions   []gateway.Decision
	// toolsH is the report's tool_schemas_hash_b64u (section 3.3).
	toolsH [32]byte
	// receipts is the run's gateway record: the receipts of its model
	// calls (docs/spec/model-gateway.md section 8).
	receipts receiptRecord
	// Bounded per run: turns started (each uses one message id), owner
	// messages signed, tool calls decided.
	turns      int
	signed     int
	messageIDs map[[32]byte]struct{}
	toolCalls  int
	attested   bool
	closed     bool
}

// ownerMessage is a sig-ContentStore-style signature of an owner message:
// the id is "<session>:<channel>:<message>", the identity
// "owner:<sender>:<channel>", and only the content hash is kept.
type ownerMessage struct {
	SignatureID string
	MessageID   string
	Identity    string
	ContentHash [32]byte
	SignedAt    time.Time
}

// lockOpen locks the run when it is open; a closed run is refused
// (errRunClosed) and left unlocked. The caller unlocks rn.mu.
func (rn *Run) lockOpen() error {
	rn.mu.Lock()
	if rn.closed {
		rn.mu.Unlock()
		return errRunClosed
	}
	return nil
}

func (r *Run) destroy() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prompt != nil {
		r.prompt.Destroy()
		r.prompt = nil
	}
	r.closed = true
	r.messageIDs = nil
}

// maxClosedRuns bounds how many closed runs are remembered so that their
// capabilities get 410 rather than 403.
const maxClosedRuns = 4096

type runStore struct {
	mu   sync.Mutex
	runs map[string]*Run
	max  int
	// closed remembers the capability hashes of the last maxClosedRuns
	// closed runs (FIFO), for 410.
	closed      map[string][32]byte
	closedOrder []string
}

func newRunStore(max int) *runStore {
	return &runStore{runs: map[string]*Run{}, max: max, closed: map[string][32]byte{}}
}

var errTooManyRuns = errors.New("too many open runs")

func (st *runStore) add(r *Run) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.runs) >= st.max {
		return errTooManyRuns
	}
	st.runs[r.id] = r
	return nil
}

var (
	errNotThisRun = &Error{kind: kindForbidden, Msg: "the capability is not valid for this run"}
	errRunClosed  = &Error{kind: kindGone, Msg: "run closed"}
)

// authorize returns the run named id when capHash is its capability's hash
// and caller is the process the run is bound to: 403 for another run's or
// an unknown capability (an unknown run id gets the same answer, so run ids
// cannot be probed), 403 PROCESS_BINDING for the right capability from
// another process, 410 for the capability of a closed run.
func (st *runStore) authorize(id string, capHash [32]byte, caller Process) (*Run, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if r, ok := st.runs[id]; ok {
		if !capEqual(r.capHash, capHash) {
			return nil, errNotThisRun
		}
		if r.proc != caller {
			return nil, errOtherProcess
		}
		return r, nil
	}
	if h, ok := st.closed[id]; ok && capEqual(h, capHash) {
		return nil, errRunClosed
	}
	return nil, errNotThisRun
}

// remove forgets the run (remembering its capability hash for 410) and
// destroys its prompt. It reports whether the run was open.
func (st *runStore) remove(id string) (*Run, bool) {
	st.mu.Lock()
	r := st.runs[id]
	if r != nil {
		delete(st.runs, id)
		if len(st.closedOrder) >= maxClosedRuns {
			delete(st.closed, st.closedOrder[0])
			st.closedOrder = st.closedOrder[1:]
		}
		st.closed[id] = r.capHash
		st.closedOrder = append(st.closedOrder, id)
	}
	st.mu.Unlock()
	if r == nil {
		return nil, false
	}
	r.destroy()
	return r, true
}

// open is the number of open runs.
func (st *runStore) open() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.runs)
}

func (st *runStore) closeAll() {
	st.mu.Lock()
	rs := st.runs
	st.runs = map[string]*Run{}
	st.mu.Unlock()
	for _, r := range rs {
		r.destroy()
	}
}

// issuedID reports whether s has the form randomID(prefix) gives: prefix
// and the canonical b64u of 16 bytes.
func issuedID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != b64u.EncodedLen(16) {
		return false
	}
	b, err := b64u.Decode(rest)
	return err == nil && len(b) == 16 && b64u.Encode(b) == rest
}

func randomID(prefix string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + b64u.Encode(b[:]), nil
}

// createRunRequest is the body of POST /v1/runs.
type createRunRequest struct {
	// PackB64u is prompt_pack.enc, b64u.
	PackB64u string `json:"pack_b64u"`
	// Manifest is prompt_pack_manifest.json as a JSON object.
	Manifest json.RawMessage `json:"manifest"`
	// ReportHashB64u is the committed SystemPromptReport.v1 hash.
	ReportHashB64u string `json:"report_hash_b64u"`
	AgentID        string `json:"agent_id"`
	SessionKey     string `json:"session_key"`
}

// createRunResponse is the answer to POST /v1/runs. Capability is returned
// here only; the run keeps its SHA-256.
type createRunResponse struct {
	RunID                        string              `json:"run_id"`
	Capability                   string              `json:"capability"`
	SystemPromptHashB64u         string              `json:"system_prompt_hash_b64u"`
	SystemPromptChars            int                 `json:"system_prompt_chars"`
	ReportHashB64u               string              `json:"report_hash_b64u"`
	PackID                       string              `json:"pack_id"`
	PromptPackCiphertextHashB64u string              `json:"prompt_pack_ciphertext_hash_b64u"`
	PromptCommitted              poh.EventChainEntry `json:"prompt_committed"`
	GatePolicyHashB64u           string              `json:"gate_policy_hash_b64u"`
	AdmissionPolicyHashB64u      string              `json:"admission_policy_hash_b64u,omitempty"`
	Sensitive                    bool                `json:"sensitive"`
}

// creation is the state of one CreateRun as its steps fill it in.
type creation struct {
	s      *Service
	req    *createRunRequest
	caller Process
	agent  string
	want   [32]byte
	enc    []byte
	rb     *rebuildResult
	// prompt is the rebuilt prompt until the run owns it; registered says
	// the run is in the store (and its prompt released with it).
	prompt     *sealed.Buffer
	rn         *Run
	capability string
	registered bool
}

// CreateRun opens the pack in sealed memory (in a worker process), rebuilds
// the prompt and compares it with the committed report hash, then opens
// the run, bound to the caller (the process that asks, as ConnContext
// recorded it: every later request of the run must come from it; one the
// attester cannot identify is refused with 403 PROCESS_BINDING before
// anything is decoded). Each step either succeeds or refuses; on any
// refusal nothing is kept: one deferred release destroys the rebuilt prompt
// and forgets the run. req's pack text is cleared once decoded. The run and
// its caller are returned beside the answer so that the answer can be
// signed (SignAnswer).
func (s *Service) CreateRun(ctx context.Context, decode Decoder) (resp *createRunResponse, rn *Run, caller Process, err error) {
	if caller, err = processFrom(ctx); err != nil {
		return nil, nil, Process{}, err
	}
	req, err := decodeAs[createRunRequest](decode)
	if err != nil {
		return nil, nil, Process{}, err
	}
	c := &creation{s: s, req: req, caller: caller}
	defer func() {
		if err != nil {
			c.release()
		}
	}()
	steps := []func(context.Context) error{
		c.checkRequest,
		c.rebuildPrompt,
		c.newRun,
		c.observeIsolation,
		c.commitPrompt,
		c.register,
		c.openGateRun,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, nil, Process{}, err
		}
	}
	rn = c.rn
	s.metrics.packs.WithLabelValues("accepted").Inc()
	s.log.Info("run created", "run_id", rn.id, "agent_id", rn.agentID, "prompt_hash", rn.promptH, "report_hash", rn.reportH)
	return &createRunResponse{
		RunID: rn.id, Capability: c.capability, SystemPromptHashB64u: rn.promptH, SystemPromptChars: rn.chars, ReportHashB64u: rn.reportH,
		PackID: rn.packID, PromptPackCiphertextHashB64u: rn.packCTH, PromptCommitted: rn.committed,
		GatePolicyHashB64u: s.gate.PolicyHash(), AdmissionPolicyHashB64u: rn.admissionH, Sensitive: rn.sensitive,
	}, rn, caller, nil
}

// release undoes a creation that failed: a registered run is removed (its
// prompt destroyed, its capability then gets 410); otherwise the rebuilt
// prompt, if any, is destroyed.
func (c *creation) release() {
	switch {
	case c.registered:
		c.s.runs.remove(c.rn.id)
	case c.prompt != nil:
		c.prompt.Destroy()
	}
	c.prompt = nil
}

// checkRequest checks the request's fields and decodes the pack.
func (c *creation) checkRequest(context.Context) error {
	req := c.req
	agent, err := gate.CheckAgentID(req.AgentID)
	if err != nil {
		return refusal(kindInvalid, "agent_id is not an agent id the gate accepts (1-64 of a-z 0-9 _ -, as they are: not trimmed, not case-folded)", err)
	}
	c.agent = agent
	if err := gate.CheckSessionKey(req.SessionKey); err != nil {
		return refusal(kindInvalid, fmt.Sprintf("session_key must be 1-%d bytes of UTF-8 without control characters", gate.MaxSessionKeyBytes), err)
	}
	if c.want, err = b64u.DecodeHash(req.ReportHashB64u); err != nil {
		return refusal(kindInvalid, "report_hash_b64u must be a b64u SHA-256 hash", err)
	}
	enc, err := b64u.Decode(req.PackB64u)
	if err != nil || len(enc) == 0 {
		return refusal(kindInvalid, "pack_b64u must be canonical b64u", err)
	}
	req.PackB64u = ""
	if int64(len(enc)) > c.s.cfg.MaxPackBytes {
		return refusal(kindTooLarge, fmt.Sprintf("pack exceeds %d bytes", c.s.cfg.MaxPackBytes), nil)
	}
	if _, err := envelope.ParseManifest(req.Manifest); err != nil {
		return &Error{kind: kindInvalid, Msg: "malformed manifest", Reason: string(poh.MalformedEnvelope), Err: err}
	}
	c.enc = enc
	return nil
}

// rebuildPrompt opens the pack and rebuilds the prompt in a worker process,
// so that no plaintext is ever on this process's heap
// (docs/spec/sealed-memory.md section 2.7). The admission policy, when
// configured, is applied in the worker too, where the plaintext pack is.
func (c *creation) rebuildPrompt(ctx context.Context) error {
	s := c.s
	rq := rebuildRequest{Pack: c.enc, Manifest: c.req.Manifest, ReportHash: c.want, Trusted: s.cfg.TrustedTemplates}
	if p := s.cfg.AdmissionPolicy; p != nil {
		rq.Admission, rq.Runtime = p.Canonical(), s.runtimeFacts(c.agent)
	}
	rb, err := s.rebuild.run(ctx, rq)
	if err != nil {
		s.metrics.packs.WithLabelValues("refused").Inc()
		if aerr := admissionError(err); aerr != nil {
			return aerr
		}
		return packError("the rebuilt prompt does not match the committed report", err)
	}
	c.rb, c.prompt = rb, rb.Prompt
	return nil
}

// newRun draws the run's id and capability and fills in the run.
func (c *creation) newRun(context.Context) error {
	s, rb := c.s, c.rb
	ctHash := sha256.Sum256(c.enc)
	id, err := randomID("run_")
	if err != nil {
		return err
	}
	capability, capHash, err := newCapability()
	if err != nil {
		return err
	}
	c.capability = capability
	c.rn = &Run{
		id: id, agentID: c.agent, sessionKey: c.req.SessionKey, capHash: capHash, created: s.now(), proc: c.caller,
		prompt: c.prompt, promptH: rb.PromptHashB64u, reportH: rb.ReportHashB64u,
		packCTH: b64u.Encode(ctHash[:]), packID: rb.PackID, chars: rb.Chars, toolsH: rb.ToolSchemasHash,
		messageIDs: map[[32]byte]struct{}{},
	}
	if p := s.cfg.AdmissionPolicy; p != nil {
		c.rn.admissionH, c.rn.sensitive = p.Hash(), p.Sensitive()
		c.rn.requireGateway = p.RequiresGateway()
	}
	return nil
}

// commitPrompt makes the run's first event, which commits the prompt.
func (c *creation) commitPrompt(context.Context) error {
	committed, err := promptCommittedEvent(c.rn, c.s.now())
	if err != nil {
		return err
	}
	c.rn.committed = committed
	return nil
}

// register adds the run to the store, which then owns its prompt.
func (c *creation) register(context.Context) error {
	if err := c.s.runs.add(c.rn); err != nil {
		return refusal(kindUnavailable, "too many open runs", err)
	}
	c.registered = true
	return nil
}

// openGateRun opens the run's verification state in the gate.
func (c *creation) openGateRun(context.Context) error {
	if err := c.s.gate.OpenRun(c.rn.id); err != nil {
		return refusal(kindUnavailable, "the gate cannot open the run", err)
	}
	return nil
}

// reasonAdmissionUncheckable is the reason of a 422 for a pack whose inputs
// admission cannot check (an unsupported recipe, params that do not parse):
// it is not admitted.
const reasonAdmissionUncheckable = "ADMISSION_UNCHECKABLE"

// runtimeFacts are the attester's run-time facts for a run of agent that a
// sensitive admission policy obliges (docs/spec/admission-policy-v1.md
// section 7, docs/spec/attester-api.md "Admission").
func (s *Service) runtimeFacts(agent string) admission.Runtime {
	e := s.gate.EnforcementFor(agent)
	return admission.Runtime{
		MemoryLocked:         !s.cfg.AllowUnlockedMemory,
		NoDevelopmentOptions: !s.cfg.Development && !e.Development && s.cfg.TPM.Address == "",
		FailModeDeny:         e.FailModeDeny,
		VerificationEnforced: e.VerificationEnforced,
	}
}

// admissionError maps an admission refusal from the rebuild worker to a
// refusal whose reason is the rule code and whose message names the rule
// and the input, never its content; nil when err is not an admission
// refusal.
func admissionError(err error) error {
	if re, ok := errors.AsType[*admission.RuleError](err); ok {
		return &Error{kind: kindUnprocessable, Msg: fmt.Sprintf("the run is not admitted by the admission policy: %s: %q", re.Rule, re.Input), Reason: re.Rule, Err: err}
	}
	if errors.Is(err, admission.ErrUnreadable) {
		return &Error{kind: kindUnprocessable, Msg: "the pack's inputs cannot be checked against the admission policy, so it is not admitted", Reason: reasonAdmissionUncheckable, Err: err}
	}
	return nil
}

// promptCommittedEvent is the run's first event (seed 001): its payload
// commits the report and prompt hashes; the header follows PoH rules.
func promptCommittedEvent(rn *Run, now time.Time) (poh.EventChainEntry, error) {
	ph, err := poh.PromptCommittedPayloadHash(rn.reportH, rn.promptH, rn.packCTH)
	if err != nil {
		return poh.EventChainEntry{}, err
	}
	eid, err := randomID("evt_")
	if err != nil {
		return poh.EventChainEntry{}, err
	}
	h := poh.EventHeader{EventID: eid, RunID: rn.id, EventType: poh.PromptCommittedEventType, Timestamp: poh.FormatTime(now), PayloadHashB64u: ph}
	return h.Entry()
}

// packError maps pack/envelope/rebuild failures to a kind, a safe message
// and a reason code. Template names are safe to show; contents never are.
func packError(msg string, err error) error {
	var te *openclawsig.TemplateError
	switch {
	case errors.Is(err, errRebuildBusy):
		return &Error{kind: kindUnavailable, Msg: "too many packs are being opened, retry later", Err: err}
	case errors.Is(err, errRebuildWorker):
		return &Error{kind: kindUnavailable, Msg: "the pack could not be checked (rebuild worker failed)", Err: err}
	case errors.As(err, &te):
		return &Error{kind: kindUnprocessable, Msg: msg + ": template " + te.Name + " is modified or not trusted", Reason: string(poh.HashMismatch), Err: err}
	case errors.Is(err, envelope.ErrNoMatchingRecipient):
		return &Error{kind: kindUnprocessable, Msg: "the pack is not sealed to this attester", Reason: string(poh.ClaimNotFound), Err: err}
	case errors.Is(err, promptpack.ErrReportMismatch):
		return &Error{kind: kindUnprocessable, Msg: msg, Reason: string(poh.PromptCommitmentMismatch), Err: err}
	case errors.Is(err, promptpack.ErrUnknownRecipe), errors.Is(err, promptpack.ErrUnknownVersion):
		return &Error{kind: kindUnprocessable, Msg: "the pack names an unknown recipe or version", Reason: string(poh.UnknownEnvelopeVersion), Err: err}
	case errors.Is(err, envelope.ErrTooLarge), errors.Is(err, promptpack.ErrTooLarge):
		return &Error{kind: kindTooLarge, Msg: "the pack is too large", Err: err}
	case errors.Is(err, sealed.ErrLockFailed):
		return &Error{kind: kindUnavailable, Msg: "cannot lock memory for the pack", Err: err}
	}
	return &Error{kind: kindUnprocessable, Msg: msg + ": the pack, its manifest or its bound context is invalid", Reason: string(poh.HashMismatch), Err: err}
}

// WithPrompt calls f with the run's rebuilt prompt (in sealed memory) and
// its hash, holding the run's lock: the prompt cannot be destroyed while f
// runs, so f must not keep it. A closed run is refused.
func (rn *Run) WithPrompt(f func(prompt *sealed.Buffer, hashB64u string) error) error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.prompt == nil {
		return errRunClosed
	}
	return f(rn.prompt, rn.promptH)
}

// attestRequest is the body of POST /v1/runs/{id}/attestation.
type attestRequest struct {
	Bundle   json.RawMessage `json:"bundle"`
	AgentDID string          `json:"agent_did"`
}

// Attest checks the agent's proof bundle against the run (its prompt
// commitments, and its tool calls against the run's own audit records, one
// to one and in order) and issues the execution attestation with fresh
// evidence, committing to exactly the records it checked.
func (s *Service) Attest(ctx context.Context, rn *Run, decode Decoder) (*attestation.Output, error) {
	req, err := decodeAs[attestRequest](decode)
	if err != nil {
		return nil, err
	}
	if err := rn.lockOpen(); err != nil {
		return nil, err
	}
	defer rn.mu.Unlock()
	recs, root, count, err := s.runAudit(rn)
	if err != nil {
		return nil, err
	}
	var out *attestation.Output
	err = s.withIssuer(func(is *attestation.Issuer) (err error) {
		out, err = is.Attest(ctx, attestation.AttestInput{
			BundleEnvelope: req.Bundle, AgentDID: req.AgentDID, RunID: rn.id,
			PromptCommittedEventHashB64u: rn.committed.EventHashB64u,
			PromptHashB64u:               rn.promptH, ReportHashB64u: rn.reportH, PackCiphertextHashB64u: rn.packCTH,
			GatePolicyHashB64u: s.gate.PolicyHash(), AuditRootB64u: root, AuditCount: count,
			Model:                   attestation.ModelIdentity{Provider: s.cfg.ModelProvider, Model: s.cfg.Model},
			AdmissionPolicyHashB64u: rn.admissionH, Sensitive: rn.sensitive,
			BundleCheck: rn.gatewayCheck(toolCallCheck(recs)), Isolation: rn.isolation, Gateway: rn.gatewayRecord(),
		})
		return err
	})
	if err != nil {
		if pe, ok := errors.AsType[*poh.Error](err); ok && errors.Is(err, attestation.ErrBundle) {
			s.metrics.attestations.WithLabelValues("refused").Inc()
			return nil, &Error{kind: kindUnprocessable, Msg: "the proof bundle does not match this run: " + pe.Msg, Reason: string(pe.Code), Err: err}
		}
		if errors.Is(err, attestation.ErrInput) {
			return nil, &Error{kind: kindInvalid, Msg: "invalid attestation request", Err: err}
		}
		s.metrics.attestations.WithLabelValues("error").Inc()
		return nil, refusal(kindInternal, "cannot issue the attestation", err)
	}
	rn.attested = true
	s.metrics.attestations.WithLabelValues("issued").Inc()
	s.log.Info("attestation issued", "run_id", rn.id, "attestation_id", out.AttestationID, "platform", out.Platform, "simulated", out.Simulated)
	return out, nil
}

// CloseRun destroys the run's prompt, ends its gate state and forgets the
// run; its capability then gets kindGone.
func (s *Service) CloseRun(rn *Run) error {
	if _, ok := s.runs.remove(rn.id); !ok {
		return errRunClosed
	}
	s.gate.EndRun(rn.id)
	s.gw.CloseRun(rn.id)
	if err := s.gate.audit.CloseRun(rn.id); err != nil {
		s.log.Error("closing the run's audit log", "run_id", rn.id, "err", err)
	}
	s.log.Info("run closed", "run_id", rn.id)
	return nil
}

// Authorize returns the run named id and the process that asks, when
// authorization (the request's Authorization header) carries the run's
// capability and the caller (the peer ConnContext recorded) is the process
// that created the run. The checks run in this order: kindUnauthenticated
// without a well-formed "Bearer clawea-cap-v1.<43 b64u characters>";
// kindForbidden with reason reasonProcessBinding for a caller the attester
// cannot identify; kindForbidden for another run's or an unknown capability
// (an unknown run id gets the same answer, so run ids cannot be probed);
// kindForbidden with reason reasonProcessBinding for the capability used by
// another process; kindGone for the capability of a closed run.
func (s *Service) Authorize(ctx context.Context, id, authorization string) (*Run, Process, error) {
	capHash, err := bearerCapability(authorization)
	if err != nil {
		return nil, Process{}, err
	}
	caller, err := processFrom(ctx)
	if err != nil {
		return nil, Process{}, err
	}
	rn, err := s.runs.authorize(id, capHash, caller)
	if err != nil {
		return nil, Process{}, err
	}
	return rn, caller, nil
}
