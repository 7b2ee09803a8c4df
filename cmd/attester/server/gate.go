package server

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
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

// newGateState opens the audit log in stateDir/audit (a fresh temporary
// directory when stateDir is empty: the log then does not outlive the
// process, like the identity) and builds the gate from its parsed
// configuration (ParseConfig).
func newGateState(cfg *gate.Config, opts gate.Options, stateDir string) (*gateState, error) {
	if cfg == nil {
		return nil, errors.New("server: no gate configuration")
	}
	var err error
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

// Limits on turn fields.
const (
	maxChannelBytes   = 64
	maxSenderIDBytes  = 256
	maxMessageIDBytes = 256
)

// ValidChannel reports whether ch is a channel name: 1-64 bytes of
// a-z, 0-9, _ and -.
func ValidChannel(ch string) error {
	if ch == "" || len(ch) > maxChannelBytes {
		return errors.New("channel must be 1-64 bytes")
	}
	for i := 0; i < len(ch); i++ {
		c := ch[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("channel may contain only a-z, 0-9, _ and -")
		}
	}
	return nil
}

// ValidSenderID reports whether s is a sender id: 1-256 bytes of UTF-8
// without control characters.
func ValidSenderID(s string) error { return validText(s, maxSenderIDBytes) }

func validText(s string, max int) error {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return fmt.Errorf("must be 1-%d bytes of UTF-8", max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("contains control characters")
		}
	}
	return nil
}

// turnRequest starts a turn: a new inbound message. Whether its sender is
// an owner comes from attester.owners, never from the request.
type turnRequest struct {
	Channel   string `json:"channel"`
	SenderID  string `json:"sender_id"`
	MessageID string `json:"message_id"`
	// ContentSHA256B64u is b64u SHA-256 of the message text (the attester
	// never needs the text itself).
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

var (
	errStaleTurn = &HTTPError{Code: http.StatusConflict, Msg: "turn_id is not the run's current turn"}
)

func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request, rn *run, body []byte) error {
	var req turnRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := ValidChannel(req.Channel); err != nil {
		return httpErr(http.StatusBadRequest, "channel: "+err.Error(), nil)
	}
	if err := ValidSenderID(req.SenderID); err != nil {
		return httpErr(http.StatusBadRequest, "sender_id: "+err.Error(), nil)
	}
	if err := validText(req.MessageID, maxMessageIDBytes); err != nil {
		return httpErr(http.StatusBadRequest, "message_id: "+err.Error(), nil)
	}
	content, err := b64u.DecodeHash(req.ContentSHA256B64u)
	if err != nil {
		return httpErr(http.StatusBadRequest, "content_sha256_b64u must be a b64u SHA-256 hash", err)
	}
	owner := s.cfg.owner(req.Channel, req.SenderID)
	turn, err := randomID("turn_")
	if err != nil {
		return err
	}
	midKey := sha256.Sum256([]byte(req.MessageID))

	// Every check happens before anything changes: a refused turn leaves the
	// previous turn current.
	rn.mu.Lock()
	defer rn.mu.Unlock()
	switch {
	case rn.closed:
		return errRunClosed
	case rn.turns >= s.cfg.MaxTurnsPerRun:
		return &HTTPError{Code: http.StatusTooManyRequests, Msg: fmt.Sprintf("the run has reached its limit of %d turns", s.cfg.MaxTurnsPerRun)}
	case owner && rn.signed >= s.cfg.MaxOwnerMessagesPerRun:
		return &HTTPError{Code: http.StatusTooManyRequests, Msg: fmt.Sprintf("the run has reached its limit of %d signed owner messages", s.cfg.MaxOwnerMessagesPerRun)}
	}
	if _, used := rn.messageIDs[midKey]; used {
		return httpErr(http.StatusConflict, "message_id was already used in this run", nil)
	}
	if err := s.gate.g.NewTurn(rn.id, turn, owner); err != nil {
		if errors.Is(err, gate.ErrUnknownRun) {
			return errRunClosed
		}
		return httpErr(http.StatusInternalServerError, "cannot start the turn", err)
	}
	rn.turns++
	rn.messageIDs[midKey] = struct{}{}
	rn.turn, rn.turnOwner, rn.turnMsg = turn, owner, ownerMessage{}
	resp := map[string]any{"turn_id": turn, "owner": owner}
	if owner {
		rn.signed++
		sigID := rn.sessionKey + ":" + req.Channel + ":" + req.MessageID
		rn.turnMsg = ownerMessage{SignatureID: sigID, MessageID: req.MessageID, Identity: "owner:" + req.SenderID + ":" + req.Channel, ContentHash: content, SignedAt: s.now()}
		resp["signature_id"] = sigID
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// verifyRequest is the verify tool: templates (default) or the signed owner
// message of the current turn. Only an owner turn can be verified.
type verifyRequest struct {
	TurnID string `json:"turn_id"`
	// MessageID and ContentSHA256B64u, when set, must both be set and equal
	// the current turn's signed owner message.
	MessageID         string `json:"message_id"`
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request, rn *run, body []byte) error {
	var req verifyRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	switch {
	case rn.closed:
		return errRunClosed
	case req.TurnID == "" || req.TurnID != rn.turn:
		return errStaleTurn
	case !rn.turnOwner:
		return &HTTPError{Code: http.StatusForbidden, Msg: "verify is an owner-only tool: this turn's sender is not a configured owner"}
	}
	method := gate.VerifiedTemplates
	result := map[string]any{"turn_id": req.TurnID}
	if req.MessageID != "" || req.ContentSHA256B64u != "" {
		m := rn.turnMsg
		want, herr := b64u.DecodeHash(req.ContentSHA256B64u)
		if herr != nil || req.MessageID != m.MessageID || want != m.ContentHash {
			return &HTTPError{Code: http.StatusUnprocessableEntity, Msg: "the message does not match the signed owner message of this turn", Reason: string(poh.SignatureInvalid)}
		}
		method = gate.VerifiedMessage
		result["signature_id"] = m.SignatureID
		result["identity"] = m.Identity
		result["signed_at"] = m.SignedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	} else {
		// The pack's templates were checked against their signatures and the
		// trusted list when the run was created; the rebuilt prompt's hash
		// is what the run serves.
		result["all_verified"] = true
		result["system_prompt_hash_b64u"] = rn.promptH
	}
	if err := s.gate.g.MarkVerified(rn.id, req.TurnID, method); err != nil {
		return httpErr(http.StatusInternalServerError, "cannot mark the turn verified", err)
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

func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request, rn *run, body []byte) error {
	var req toolCallRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	rn.mu.Lock()
	switch {
	case rn.closed:
		rn.mu.Unlock()
		return errRunClosed
	case req.TurnID == "" || req.TurnID != rn.turn:
		rn.mu.Unlock()
		return errStaleTurn
	case rn.toolCalls >= s.cfg.MaxToolCallsPerRun:
		rn.mu.Unlock()
		return &HTTPError{Code: http.StatusTooManyRequests, Msg: fmt.Sprintf("the run has reached its limit of %d tool calls", s.cfg.MaxToolCallsPerRun)}
	}
	rn.toolCalls++
	rn.mu.Unlock()
	d, derr := s.gate.g.Decide(r.Context(), gate.Call{
		Run: rn.id, SessionKey: rn.sessionKey, TurnID: req.TurnID, AgentID: rn.agentID,
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
	writeJSON(w, http.StatusOK, toolCallResponse{
		Allow: d.Allow, Stage: string(d.Stage), Reason: d.Reason, Tool: d.Tool,
		ParamsHash: d.ParamsHash, AuditSeq: d.AuditSeq,
	})
	return nil
}

// toolCallResponse is the decision (a struct: encoding/json encodes it
// without sorting map keys or boxing values).
type toolCallResponse struct {
	Allow      bool   `json:"allow"`
	Stage      string `json:"stage"`
	Reason     string `json:"reason"`
	Tool       string `json:"tool"`
	ParamsHash string `json:"params_hash_b64u"`
	AuditSeq   uint64 `json:"audit_seq"`
}

// handleAudit streams the run's durable audit log; the headers give the
// root and count of exactly the records in the body.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, rn *run, _ []byte) error {
	rn.mu.Lock()
	closed := rn.closed
	rn.mu.Unlock()
	if closed {
		return errRunClosed
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
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Clawea-Audit-Root", snap.Root)
	w.Header().Set("X-Clawea-Audit-Count", fmt.Sprint(snap.Count))
	w.Header().Set("Content-Length", fmt.Sprint(snap.Size))
	_, err = snap.WriteTo(w)
	return err
}
