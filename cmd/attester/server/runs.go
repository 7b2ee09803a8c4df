package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/sealed"
)

// run is one agent run: the rebuilt prompt (in sealed memory), its
// commitments, the event chain head and the owner-message store.
type run struct {
	id         string
	agentID    string
	sessionKey string
	created    time.Time

	mu       sync.Mutex
	prompt   *sealed.Buffer
	promptH  string // b64u SHA-256 of the prompt
	reportH  string // b64u SHA-256(JCS(report))
	packCTH  string // b64u SHA-256 of prompt_pack.enc
	packID   string
	chars    int
	turn     string
	messages map[string]ownerMessage
	attested bool
	events   []poh.EventChainEntry
	closed   bool
}

// ownerMessage is a sig-ContentStore-style signature of an owner message:
// the id is "<session>:<channel>:<message>", the identity
// "owner:<sender>:<channel>", and only the content hash is kept.
type ownerMessage struct {
	Identity    string
	ContentHash [32]byte
	SignedAt    time.Time
	Turn        string
}

func (r *run) destroy() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prompt != nil {
		r.prompt.Destroy()
		r.prompt = nil
	}
	r.closed = true
}

type runStore struct {
	mu   sync.Mutex
	runs map[string]*run
	max  int
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

func (st *runStore) get(id string) (*run, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.runs[id]
	if !ok {
		return nil, httpErr(http.StatusNotFound, "unknown run", nil)
	}
	return r, nil
}

func (st *runStore) remove(id string) {
	st.mu.Lock()
	r := st.runs[id]
	delete(st.runs, id)
	st.mu.Unlock()
	if r != nil {
		r.destroy()
	}
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
	SystemPromptHashB64u         string              `json:"system_prompt_hash_b64u"`
	SystemPromptChars            int                 `json:"system_prompt_chars"`
	ReportHashB64u               string              `json:"report_hash_b64u"`
	PackID                       string              `json:"pack_id"`
	PromptPackCiphertextHashB64u string              `json:"prompt_pack_ciphertext_hash_b64u"`
	PromptCommitted              poh.EventChainEntry `json:"prompt_committed"`
	GatePolicyHashB64u           string              `json:"gate_policy_hash_b64u"`
}

// handleCreateRun opens the pack in sealed memory, rebuilds the prompt and
// compares it with the committed report hash. On any mismatch nothing is
// kept: the opened pack and the rebuilt prompt are destroyed.
func (s *Server) handleCreateRun(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req createRunRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.AgentID == "" || req.SessionKey == "" || len(req.AgentID) > 128 || len(req.SessionKey) > 512 {
		return httpErr(http.StatusBadRequest, "agent_id and session_key are required (at most 128 and 512 bytes)", nil)
	}
	want, err := b64u.DecodeHash(req.ReportHashB64u)
	if err != nil {
		return httpErr(http.StatusBadRequest, "report_hash_b64u must be a b64u SHA-256 hash", err)
	}
	enc, err := b64u.Decode(req.PackB64u)
	if err != nil || len(enc) == 0 {
		return httpErr(http.StatusBadRequest, "pack_b64u must be canonical b64u", err)
	}
	if int64(len(enc)) > s.cfg.MaxPackBytes {
		return httpErr(http.StatusRequestEntityTooLarge, fmt.Sprintf("pack exceeds %d bytes", s.cfg.MaxPackBytes), nil)
	}
	m, err := envelope.ParseManifest(req.Manifest)
	if err != nil {
		return &HTTPError{Code: http.StatusBadRequest, Msg: "malformed manifest", Reason: string(poh.MalformedEnvelope), Err: err}
	}
	opened, err := promptpack.OpenPack(enc, m, s.id.PackKey, want, promptpack.OpenOptions{AllowUnlocked: s.cfg.AllowUnlockedMemory})
	if err != nil {
		s.metrics.packs.WithLabelValues("refused").Inc()
		return packError("cannot open the pack", err)
	}
	defer opened.Destroy()
	rb, err := opened.Rebuild(s.cfg.TrustedTemplates)
	if err != nil {
		s.metrics.packs.WithLabelValues("refused").Inc()
		return packError("the rebuilt prompt does not match the committed report", err)
	}
	defer rb.Wipe()

	prompt, err := sealed.NewFrom(rb.Prompt, s.memOpts)
	if err != nil {
		return httpErr(http.StatusServiceUnavailable, "cannot allocate sealed memory", err)
	}
	ctHash := sha256.Sum256(enc)
	id, err := randomID("run_")
	if err != nil {
		prompt.Destroy()
		return err
	}
	rn := &run{
		id: id, agentID: req.AgentID, sessionKey: req.SessionKey, created: s.now(),
		prompt: prompt, promptH: rb.PromptHashB64u(), reportH: rb.ReportHashB64u(),
		packCTH: b64u.Encode(ctHash[:]), packID: rb.PackID, chars: rb.Report.Final.SystemPromptChars,
		messages: map[string]ownerMessage{},
	}
	committed, err := promptCommittedEvent(rn, s.now())
	if err != nil {
		prompt.Destroy()
		return err
	}
	rn.events = append(rn.events, committed)
	if err := s.runs.add(rn); err != nil {
		prompt.Destroy()
		return httpErr(http.StatusServiceUnavailable, "too many open runs", err)
	}
	s.metrics.packs.WithLabelValues("accepted").Inc()
	s.log.Info("run created", "run_id", id, "agent_id", req.AgentID, "prompt_hash", rn.promptH, "report_hash", rn.reportH)
	writeJSON(w, http.StatusCreated, createRunResponse{
		RunID: id, SystemPromptHashB64u: rn.promptH, SystemPromptChars: rn.chars, ReportHashB64u: rn.reportH,
		PackID: rn.packID, PromptPackCiphertextHashB64u: rn.packCTH, PromptCommitted: committed,
		GatePolicyHashB64u: s.gate.PolicyHash(),
	})
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

// handlePrompt serves the rebuilt prompt on the agent socket only.
func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request) error {
	rn, err := s.runs.get(r.PathValue("id"))
	if err != nil {
		return err
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.prompt == nil {
		return httpErr(http.StatusGone, "run closed", nil)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Clawea-System-Prompt-Hash", rn.promptH)
	_, err = w.Write(rn.prompt.Bytes())
	return err
}

// handleAttest checks the agent's proof bundle against the run and issues
// the execution attestation with fresh evidence.
func (s *Server) handleAttest(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Bundle   json.RawMessage `json:"bundle"`
		AgentDID string          `json:"agent_did"`
	}
	rn, err := s.runRequest(r, &req)
	if err != nil {
		return err
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.closed {
		return httpErr(http.StatusGone, "run closed", nil)
	}
	root, count, err := s.gate.AuditHead(rn.id)
	if err != nil {
		return httpErr(http.StatusInternalServerError, "cannot read the audit log", err)
	}
	var out *attestation.Output
	err = s.withIssuer(func(is *attestation.Issuer) (err error) {
		out, err = is.Attest(r.Context(), attestation.AttestInput{
			BundleEnvelope: req.Bundle, AgentDID: req.AgentDID, RunID: rn.id,
			PromptCommittedEventHashB64u: rn.events[0].EventHashB64u,
			PromptHashB64u:               rn.promptH, ReportHashB64u: rn.reportH, PackCiphertextHashB64u: rn.packCTH,
			GatePolicyHashB64u: s.gate.PolicyHash(), AuditRootB64u: root, AuditCount: count,
			Model:   attestation.ModelIdentity{Provider: s.cfg.ModelProvider, Model: s.cfg.Model},
			Harness: &poh.Harness{ID: "openclaw", Runtime: "clawea"},
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

// runRequest looks up the run named in the path and decodes the request
// body strictly into req.
func (s *Server) runRequest(r *http.Request, req any) (*run, error) {
	rn, err := s.runs.get(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if err := decodeStrict(body, req); err != nil {
		return nil, err
	}
	return rn, nil
}

// handleCloseRun destroys the run's prompt and forgets the run.
func (s *Server) handleCloseRun(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.runs.get(r.PathValue("id")); err != nil {
		return err
	}
	s.runs.remove(r.PathValue("id"))
	if err := s.gate.audit.CloseRun(r.PathValue("id")); err != nil {
		s.log.Error("closing the run's audit log", "run_id", r.PathValue("id"), "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleIdentity returns the attester DID, the pack recipient key and a key
// attestation over the optional challenge (?challenge=<b64u>, at most 64
// bytes).
func (s *Server) handleIdentity(w http.ResponseWriter, r *http.Request) error {
	var challenge []byte
	if c := r.URL.Query().Get("challenge"); c != "" {
		b, err := b64u.Decode(c)
		if err != nil || len(b) > 64 {
			return httpErr(http.StatusBadRequest, "challenge must be b64u, at most 64 bytes", err)
		}
		challenge = b
	}
	var jws []byte
	err := s.withIssuer(func(is *attestation.Issuer) (err error) {
		jws, err = is.KeyAttestation(r.Context(), challenge)
		return err
	})
	if err != nil {
		return httpErr(http.StatusInternalServerError, "cannot produce the key attestation", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"did":             s.id.DID,
		"pack_public_key": s.id.PackKey.Public().String(),
		"key_attestation": string(jws),
		"platform":        s.platform.Platform(),
		"simulated":       s.report != nil && s.report.Simulated,
		"identity_sealed": s.id.Sealed,
	})
	return nil
}
