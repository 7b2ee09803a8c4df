package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/b64u"
)

// gateState wraps the gate with its durable, per-run audit log.
type gateState struct {
	g     *gate.Gate
	audit *audit.Log
	// tmpDir is the audit directory created when no state directory is
	// configured (development); it is removed by close.
	tmpDir string
}

func (gs *gateState) PolicyHash() string { return gs.g.PolicyHash() }

// AuditHead returns the run's durable audit root and record count.
func (gs *gateState) AuditHead(run string) (string, int64, error) {
	root, n, err := gs.audit.Root(run)
	return root, int64(n), err
}

func (gs *gateState) close() error {
	err := gs.audit.Close()
	if gs.tmpDir != "" {
		err = errors.Join(err, os.RemoveAll(gs.tmpDir))
	}
	return err
}

// newGateState parses the gate configuration and opens the audit log in
// stateDir/audit (a fresh temporary directory when stateDir is empty: the
// log then does not outlive the process, like the identity).
func newGateState(raw map[string]json.RawMessage, opts gate.Options, development bool, stateDir string) (*gateState, error) {
	doc, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := gate.ParseConfig(doc, gate.ParseOptions{Development: development, AllowForeignKeys: true, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	gs := &gateState{}
	dir := filepath.Join(stateDir, "audit")
	if stateDir == "" {
		if gs.tmpDir, err = os.MkdirTemp("", "clawea-audit-"); err != nil {
			return nil, fmt.Errorf("audit directory: %w", err)
		}
		dir = gs.tmpDir
	}
	gs.audit, err = audit.Open(dir, audit.Options{Now: opts.Now, Logger: opts.Logger})
	if err != nil {
		if gs.tmpDir != "" {
			os.RemoveAll(gs.tmpDir)
		}
		return nil, err
	}
	opts.Config, opts.Audit = cfg, gs.audit
	if gs.g, err = gate.New(opts); err != nil {
		gs.close()
		return nil, err
	}
	return gs, nil
}

// turnRequest starts a turn: a new user message. An owner's message is
// signed in the sig ContentStore manner so that verify can check it.
type turnRequest struct {
	SenderID      string `json:"sender_id"`
	Channel       string `json:"channel"`
	MessageID     string `json:"message_id"`
	SenderIsOwner bool   `json:"sender_is_owner"`
	// ContentSHA256B64u is b64u SHA-256 of the message text (the attester
	// never needs the text itself).
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request) error {
	var req turnRequest
	rn, err := s.runRequest(r, &req)
	if err != nil {
		return err
	}
	if req.Channel == "" || req.MessageID == "" || len(req.Channel) > 64 || len(req.MessageID) > 256 || len(req.SenderID) > 256 {
		return httpErr(http.StatusBadRequest, "channel and message_id are required (at most 64 and 256 bytes)", nil)
	}
	turn, err := randomID("turn_")
	if err != nil {
		return err
	}
	if err := s.gate.g.NewTurn(rn.sessionKey, turn); err != nil {
		return httpErr(http.StatusBadRequest, "cannot start the turn", err)
	}
	resp := map[string]string{"turn_id": turn}
	rn.mu.Lock()
	rn.turn = turn
	if req.SenderIsOwner {
		if req.SenderID == "" {
			rn.mu.Unlock()
			return httpErr(http.StatusBadRequest, "an owner message needs sender_id", nil)
		}
		h, err := b64u.DecodeHash(req.ContentSHA256B64u)
		if err != nil {
			rn.mu.Unlock()
			return httpErr(http.StatusBadRequest, "content_sha256_b64u must be a b64u SHA-256 hash", err)
		}
		sigID := rn.sessionKey + ":" + req.Channel + ":" + req.MessageID
		rn.messages[sigID] = ownerMessage{Identity: "owner:" + req.SenderID + ":" + req.Channel, ContentHash: h, SignedAt: s.now(), Turn: turn}
		resp["signature_id"] = sigID
	}
	rn.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// verifyRequest is the verify tool: templates (default) or a signed owner
// message by signature id. Only the owner can verify.
type verifyRequest struct {
	TurnID        string `json:"turn_id"`
	SenderIsOwner bool   `json:"sender_is_owner"`
	// Message, when set, is a signature id "<session>:<channel>:<message>";
	// ContentSHA256B64u must then equal the signed content hash.
	Message           string `json:"message"`
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request) error {
	var req verifyRequest
	rn, err := s.runRequest(r, &req)
	if err != nil {
		return err
	}
	if !req.SenderIsOwner {
		return &HTTPError{Code: http.StatusForbidden, Msg: "verify is an owner-only tool", Err: nil}
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if req.TurnID == "" || req.TurnID != rn.turn {
		return httpErr(http.StatusConflict, "turn_id is not the run's current turn", nil)
	}
	method := gate.VerifiedTemplates
	result := map[string]any{"turn_id": req.TurnID}
	if req.Message != "" {
		m, ok := rn.messages[req.Message]
		want, herr := b64u.DecodeHash(req.ContentSHA256B64u)
		if !ok || herr != nil || m.ContentHash != want {
			return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the message signature does not verify", Reason: "SIGNATURE_INVALID"}
		}
		method = gate.VerifiedMessage
		result["identity"] = m.Identity
		result["signed_at"] = m.SignedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	} else {
		// The pack's templates were checked against their signatures and the
		// trusted list when the run was created; the rebuilt prompt's hash
		// is what the run serves.
		result["all_verified"] = true
		result["system_prompt_hash_b64u"] = rn.promptH
	}
	if err := s.gate.g.MarkVerified(rn.sessionKey, req.TurnID, true, method); err != nil {
		return httpErr(http.StatusConflict, "cannot mark the turn verified", err)
	}
	result["verified"] = true
	writeJSON(w, http.StatusOK, result)
	return nil
}

type toolCallRequest struct {
	TurnID          string          `json:"turn_id"`
	Tool            string          `json:"tool"`
	Params          json.RawMessage `json:"params"`
	MessageProvider string          `json:"message_provider"`
}

func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request) error {
	var req toolCallRequest
	rn, err := s.runRequest(r, &req)
	if err != nil {
		return err
	}
	d, derr := s.gate.g.Decide(r.Context(), gate.Call{
		SessionKey: rn.sessionKey, TurnID: req.TurnID, AgentID: rn.agentID,
		Tool: req.Tool, Params: req.Params, MessageProvider: req.MessageProvider, Run: rn.id,
	})
	outcome := "deny"
	if d.Allow {
		outcome = "allow"
	}
	s.metrics.decisions.WithLabelValues(string(d.Stage), outcome).Inc()
	if derr != nil {
		s.log.Warn("tool call denied with error", "run_id", rn.id, "tool", d.Tool, "stage", d.Stage, "err", derr)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"allow": d.Allow, "stage": d.Stage, "reason": d.Reason, "tool": d.Tool,
		"params_hash_b64u": d.ParamsHash, "audit_seq": d.AuditSeq,
	})
	return nil
}

// handleAudit streams the run's durable audit log; the headers give the
// root and count of exactly the records in the body.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	rn, err := s.runs.get(r.PathValue("id"))
	if err != nil {
		return err
	}
	snap, err := s.gate.audit.Snapshot(rn.id)
	if errors.Is(err, audit.ErrUnknownRun) {
		snap, err = &audit.Snapshot{}, nil // no decision yet
	}
	if err != nil {
		return httpErr(http.StatusInternalServerError, "cannot read the audit log", err)
	}
	defer snap.Close()
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("X-Clawea-Audit-Root", snap.Root)
	w.Header().Set("X-Clawea-Audit-Count", fmt.Sprint(snap.Count))
	w.Header().Set("Content-Length", fmt.Sprint(snap.Size))
	_, err = snap.WriteTo(w)
	return err
}
