package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/b64u"
)

// maxAuditBytes bounds the in-memory audit log. When it is full the gate
// fails closed: further tool calls are denied.
const maxAuditBytes = 64 << 20

// auditLog keeps the hash-chained audit log (hash-only records: no raw
// params) in memory for GET /v1/audit.
type auditLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *auditLog) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.buf.Len()+len(p) > maxAuditBytes {
		return 0, fmt.Errorf("audit log is full (%d bytes)", maxAuditBytes)
	}
	return a.buf.Write(p)
}

func (a *auditLog) snapshot() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return bytes.Clone(a.buf.Bytes())
}

// gateState wraps the gate with its audit log.
type gateState struct {
	g   *gate.Gate
	log *auditLog
	w   *audit.Writer
}

func (gs *gateState) PolicyHash() string { return gs.g.PolicyHash() }

func (gs *gateState) AuditHead() (string, int64) {
	root, n := gs.w.Root()
	return root, int64(n)
}

func newGateState(raw map[string]json.RawMessage, opts gate.Options, development bool) (*gateState, error) {
	doc, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := gate.ParseConfig(doc, gate.ParseOptions{Development: development, AllowForeignKeys: true, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	al := &auditLog{}
	w, err := audit.NewWriter(al, audit.WriterOptions{Now: opts.Now})
	if err != nil {
		return nil, err
	}
	opts.Config, opts.Audit = cfg, w
	g, err := gate.New(opts)
	if err != nil {
		return nil, err
	}
	return &gateState{g: g, log: al, w: w}, nil
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
		Tool: req.Tool, Params: req.Params, MessageProvider: req.MessageProvider,
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

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	root, n := s.gate.AuditHead()
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("X-Clawea-Audit-Root", root)
	w.Header().Set("X-Clawea-Audit-Count", fmt.Sprint(n))
	_, err := w.Write(s.gate.log.snapshot())
	return err
}
