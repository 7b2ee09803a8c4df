package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/rebuild"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/sealed"
)

// run is one agent run: the rebuilt prompt (in sealed memory), its
// commitments, its capability (only the hash), the current turn and the
// run's bounded counters. Its gate verification state lives in the gate
// under the run id, from creation to close.
type run struct {
	id         string
	agentID    string
	sessionKey string
	capHash    [32]byte
	created    time.Time

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
	// The current turn: its id, whether its sender is a configured owner,
	// and its message (signed when the turn is an owner turn).
	turn      string
	turnOwner bool
	turnMsg   ownerMessage
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

func (r *run) destroy() {
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
	runs map[string]*run
	max  int
	// closed remembers the capability hashes of the last maxClosedRuns
	// closed runs (FIFO), for 410.
	closed      map[string][32]byte
	closedOrder []string
}

func newRunStore(max int) *runStore {
	return &runStore{runs: map[string]*run{}, max: max, closed: map[string][32]byte{}}
}

var errTooManyRuns = errors.New("too many open runs")

func (st *runStore) add(r *run) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.runs) >= st.max {
		return errTooManyRuns
	}
	st.runs[r.id] = r
	return nil
}

var (
	errNotThisRun = &HTTPError{Code: http.StatusForbidden, Msg: "the capability is not valid for this run"}
	errRunClosed  = &HTTPError{Code: http.StatusGone, Msg: "run closed"}
)

// authorize returns the run named id when capHash is its capability's hash:
// 403 for another run's or an unknown capability (an unknown run id gets the
// same answer, so run ids cannot be probed), 410 for the capability of a
// closed run.
func (st *runStore) authorize(id string, capHash [32]byte) (*run, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if r, ok := st.runs[id]; ok {
		if capEqual(r.capHash, capHash) {
			return r, nil
		}
		return nil, errNotThisRun
	}
	if h, ok := st.closed[id]; ok && capEqual(h, capHash) {
		return nil, errRunClosed
	}
	return nil, errNotThisRun
}

// remove forgets the run (remembering its capability hash for 410) and
// destroys its prompt. It reports whether the run was open.
func (st *runStore) remove(id string) (*run, bool) {
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

func (st *runStore) closeAll() {
	st.mu.Lock()
	rs := st.runs
	st.runs = map[string]*run{}
	st.mu.Unlock()
	for _, r := range rs {
		r.destroy()
	}
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

// handleCreateRun opens the pack in sealed memory, rebuilds the prompt and
// compares it with the committed report hash. On any mismatch nothing is
// kept: the opened pack and the rebuilt prompt are destroyed. The run's
// capability is returned here only; the run keeps its SHA-256.
func (s *Server) handleCreateRun(w http.ResponseWriter, r *http.Request) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	release, err := s.uploads.reserve(r.ContentLength, s.maxCreateBody())
	if err != nil {
		return err
	}
	defer release()
	body, err := readBody(w, r, s.maxCreateBody(), createBodyTimeout)
	if err != nil {
		return err
	}
	var req createRunRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	body = nil
	agent, err := gate.CheckAgentID(req.AgentID)
	if err != nil {
		return httpErr(http.StatusBadRequest, "agent_id is not an agent id the gate accepts (1-64 of a-z 0-9 _ -, case-insensitive)", err)
	}
	if err := gate.CheckSessionKey(req.SessionKey); err != nil {
		return httpErr(http.StatusBadRequest, fmt.Sprintf("session_key must be 1-%d bytes of UTF-8 without control characters", gate.MaxSessionKeyBytes), err)
	}
	want, err := b64u.DecodeHash(req.ReportHashB64u)
	if err != nil {
		return httpErr(http.StatusBadRequest, "report_hash_b64u must be a b64u SHA-256 hash", err)
	}
	enc, err := b64u.Decode(req.PackB64u)
	if err != nil || len(enc) == 0 {
		return httpErr(http.StatusBadRequest, "pack_b64u must be canonical b64u", err)
	}
	req.PackB64u = ""
	if int64(len(enc)) > s.cfg.MaxPackBytes {
		return httpErr(http.StatusRequestEntityTooLarge, fmt.Sprintf("pack exceeds %d bytes", s.cfg.MaxPackBytes), nil)
	}
	if _, err := envelope.ParseManifest(req.Manifest); err != nil {
		return &HTTPError{Code: http.StatusBadRequest, Msg: "malformed manifest", Reason: string(poh.MalformedEnvelope), Err: err}
	}
	// The pack is opened and the prompt rebuilt in a worker process, so
	// that no plaintext is ever on this process's heap
	// (docs/spec/sealed-memory.md section 2.7).
	// The admission policy, when configured, is applied in the worker too,
	// where the plaintext pack is (admission below).
	rq := rebuild.Request{Pack: enc, Manifest: req.Manifest, ReportHash: want, Trusted: s.cfg.TrustedTemplates}
	if p := s.cfg.AdmissionPolicy; p != nil {
		rq.Admission, rq.Runtime = p.Canonical(), s.runtimeFacts(agent)
	}
	rb, err := s.rebuild.Rebuild(r.Context(), rq)
	if err != nil {
		s.metrics.packs.WithLabelValues("refused").Inc()
		if aerr := admissionError(err); aerr != nil {
			return aerr
		}
		return packError("the rebuilt prompt does not match the committed report", err)
	}
	prompt := rb.Prompt
	ctHash := sha256.Sum256(enc)
	id, err := randomID("run_")
	if err != nil {
		prompt.Destroy()
		return err
	}
	capability, capHash, err := newCapability()
	if err != nil {
		prompt.Destroy()
		return err
	}
	rn := &run{
		id: id, agentID: agent, sessionKey: req.SessionKey, capHash: capHash, created: s.now(),
		prompt: prompt, promptH: rb.PromptHashB64u, reportH: rb.ReportHashB64u,
		packCTH: b64u.Encode(ctHash[:]), packID: rb.PackID, chars: rb.Chars,
		messageIDs: map[[32]byte]struct{}{},
	}
	if p := s.cfg.AdmissionPolicy; p != nil {
		rn.admissionH, rn.sensitive = p.Hash(), p.Sensitive()
	}
	committed, err := promptCommittedEvent(rn, s.now())
	if err != nil {
		prompt.Destroy()
		return err
	}
	rn.committed = committed
	if err := s.runs.add(rn); err != nil {
		prompt.Destroy()
		return httpErr(http.StatusServiceUnavailable, "too many open runs", err)
	}
	if err := s.gate.g.OpenRun(id); err != nil {
		s.runs.remove(id)
		return httpErr(http.StatusServiceUnavailable, "the gate cannot open the run", err)
	}
	s.metrics.packs.WithLabelValues("accepted").Inc()
	s.log.Info("run created", "run_id", id, "agent_id", agent, "prompt_hash", rn.promptH, "report_hash", rn.reportH)
	writeJSON(w, http.StatusCreated, createRunResponse{
		RunID: id, Capability: capability, SystemPromptHashB64u: rn.promptH, SystemPromptChars: rn.chars, ReportHashB64u: rn.reportH,
		PackID: rn.packID, PromptPackCiphertextHashB64u: rn.packCTH, PromptCommitted: committed,
		GatePolicyHashB64u: s.gate.PolicyHash(), AdmissionPolicyHashB64u: rn.admissionH, Sensitive: rn.sensitive,
	})
	return nil
}

// ReasonAdmissionUncheckable is the reason of a 422 for a pack whose inputs
// admission cannot check (an unsupported recipe, params that do not parse):
// it is not admitted.
const ReasonAdmissionUncheckable = "ADMISSION_UNCHECKABLE"

// runtimeFacts are the attester's run-time facts for a run of agent that a
// sensitive admission policy obliges (docs/spec/admission-policy-v1.md
// section 7, docs/spec/attester-api.md "Admission").
func (s *Server) runtimeFacts(agent string) admission.Runtime {
	e := s.gate.g.EnforcementFor(agent)
	return admission.Runtime{
		MemoryLocked:         !s.cfg.AllowUnlockedMemory,
		NoDevelopmentOptions: !s.cfg.Development && !e.Development && s.cfg.TPM.Address == "",
		FailModeDeny:         e.FailModeDeny,
		VerificationEnforced: e.VerificationEnforced,
	}
}

// admissionError maps an admission refusal from the rebuild worker to a
// 422 whose reason is the rule code and whose message names the rule and
// the input, never its content; nil when err is not an admission refusal.
func admissionError(err error) error {
	if re, ok := errors.AsType[*admission.RuleError](err); ok {
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: fmt.Sprintf("the run is not admitted by the admission policy: %s: %q", re.Rule, re.Input), Reason: re.Rule, Err: err}
	}
	if errors.Is(err, admission.ErrUnreadable) {
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the pack's inputs cannot be checked against the admission policy, so it is not admitted", Reason: ReasonAdmissionUncheckable, Err: err}
	}
	return nil
}

// promptCommittedEvent is the run's first event (seed 001): its payload
// commits the report and prompt hashes; the header follows PoH rules.
func promptCommittedEvent(rn *run, now time.Time) (poh.EventChainEntry, error) {
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

// packError maps pack/envelope/rebuild failures to a status, a safe message
// and a reason code. Template names are safe to show; contents never are.
func packError(msg string, err error) error {
	var te *openclawsig.TemplateError
	switch {
	case errors.Is(err, rebuild.ErrBusy):
		return &HTTPError{Code: http.StatusServiceUnavailable, Msg: "too many packs are being opened, retry later", Err: err}
	case errors.Is(err, rebuild.ErrWorker):
		return &HTTPError{Code: http.StatusServiceUnavailable, Msg: "the pack could not be checked (rebuild worker failed)", Err: err}
	case errors.As(err, &te):
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: msg + ": template " + te.Name + " is modified or not trusted", Reason: string(poh.HashMismatch), Err: err}
	case errors.Is(err, envelope.ErrNoMatchingRecipient):
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the pack is not sealed to this attester", Reason: string(poh.ClaimNotFound), Err: err}
	case errors.Is(err, promptpack.ErrReportMismatch):
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: msg, Reason: string(poh.PromptCommitmentMismatch), Err: err}
	case errors.Is(err, promptpack.ErrUnknownRecipe), errors.Is(err, promptpack.ErrUnknownVersion):
		return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the pack names an unknown recipe or version", Reason: string(poh.UnknownEnvelopeVersion), Err: err}
	case errors.Is(err, envelope.ErrTooLarge), errors.Is(err, promptpack.ErrTooLarge):
		return &HTTPError{Code: http.StatusRequestEntityTooLarge, Msg: "the pack is too large", Err: err}
	case errors.Is(err, sealed.ErrLockFailed):
		return &HTTPError{Code: http.StatusServiceUnavailable, Msg: "cannot lock memory for the pack", Err: err}
	}
	return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: msg + ": the pack, its manifest or its bound context is invalid", Reason: string(poh.HashMismatch), Err: err}
}

// handlePrompt serves the rebuilt prompt (control socket, capability).
func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request, rn *run, _ []byte) error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.prompt == nil {
		return errRunClosed
	}
	return servePrompt(w, rn.prompt, rn.promptH)
}

type attestRequest struct {
	Bundle   json.RawMessage `json:"bundle"`
	AgentDID string          `json:"agent_did"`
}

// handleAttest checks the agent's proof bundle against the run and issues
// the execution attestation with fresh evidence.
func (s *Server) handleAttest(w http.ResponseWriter, r *http.Request, rn *run, body []byte) error {
	var req attestRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.closed {
		return errRunClosed
	}
	root, count, err := s.gate.AuditHead(rn.id)
	if err != nil {
		return httpErr(http.StatusInternalServerError, "cannot read the audit log", err)
	}
	var out *attestation.Output
	err = s.withIssuer(func(is *attestation.Issuer) (err error) {
		out, err = is.Attest(r.Context(), attestation.AttestInput{
			BundleEnvelope: req.Bundle, AgentDID: req.AgentDID, RunID: rn.id,
			PromptCommittedEventHashB64u: rn.committed.EventHashB64u,
			PromptHashB64u:               rn.promptH, ReportHashB64u: rn.reportH, PackCiphertextHashB64u: rn.packCTH,
			GatePolicyHashB64u: s.gate.PolicyHash(), AuditRootB64u: root, AuditCount: count,
			Model:                   attestation.ModelIdentity{Provider: s.cfg.ModelProvider, Model: s.cfg.Model},
			AdmissionPolicyHashB64u: rn.admissionH, Sensitive: rn.sensitive,
		})
		return err
	})
	if err != nil {
		var be *attestation.BundleError
		if errors.As(err, &be) {
			s.metrics.attestations.WithLabelValues("refused").Inc()
			return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the proof bundle does not match this run: " + be.Msg, Reason: string(be.Code), Err: err}
		}
		if errors.Is(err, attestation.ErrInput) {
			return &HTTPError{Code: http.StatusBadRequest, Msg: "invalid attestation request", Err: err}
		}
		s.metrics.attestations.WithLabelValues("error").Inc()
		return httpErr(http.StatusInternalServerError, "cannot issue the attestation", err)
	}
	rn.attested = true
	s.metrics.attestations.WithLabelValues("issued").Inc()
	s.log.Info("attestation issued", "run_id", rn.id, "attestation_id", out.AttestationID, "platform", out.Platform, "simulated", out.Simulated)
	writeJSON(w, http.StatusOK, map[string]any{
		"attestation":            json.RawMessage(out.AttestationJSON),
		"evidence_jws":           string(out.EvidenceJWS),
		"attestation_id":         out.AttestationID,
		"nonce_binding_b64u":     out.NonceBindingB64u,
		"evidence_hash_b64u":     out.EvidenceHashB64u,
		"proof_bundle_hash_b64u": out.ProofBundleHashB64u,
		"platform":               out.Platform,
		"simulated":              out.Simulated,
	})
	return nil
}

// handleCloseRun destroys the run's prompt, ends its gate state and forgets
// the run; its capability then gets 410.
func (s *Server) handleCloseRun(w http.ResponseWriter, r *http.Request, rn *run, _ []byte) error {
	if _, ok := s.runs.remove(rn.id); !ok {
		return errRunClosed
	}
	s.gate.g.EndRun(rn.id)
	if err := s.gate.audit.CloseRun(rn.id); err != nil {
		s.log.Error("closing the run's audit log", "run_id", rn.id, "err", err)
	}
	s.log.Info("run closed", "run_id", rn.id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleIdentity returns the attester DID, the pack recipient key and a key
// attestation over the optional challenge (?challenge=<b64u, 1-64 bytes>).
// Any other query parameter, a repeated or empty challenge is refused.
func (s *Server) handleIdentity(w http.ResponseWriter, r *http.Request) error {
	var challenge []byte
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return httpErr(http.StatusBadRequest, "malformed query", err)
	}
	for k, v := range q {
		if k != "challenge" || len(v) != 1 {
			return httpErr(http.StatusBadRequest, "the only query parameter is one challenge", nil)
		}
		b, err := b64u.Decode(v[0])
		if err != nil || len(b) == 0 || len(b) > 64 {
			return httpErr(http.StatusBadRequest, "challenge must be b64u, 1 to 64 bytes", err)
		}
		challenge = b
	}
	jws, err := s.keyAttestation(r.Context(), challenge)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"did":             s.id.DID,
		"pack_public_key": s.id.PackKey.Public().String(),
		"key_attestation": string(jws),
		"platform":        s.platform.Platform(),
		"simulated":       s.simulated(),
		"identity_sealed": s.id.Sealed,
	})
	return nil
}
