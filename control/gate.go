package control

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/poh"
)

// gateState is the gate with its durable, per-run audit log: the gate
// decides and records each decision in the log.
type gateState struct {
	*gate.Gate
	audit *audit.Log
	// tmpDir is the audit directory created when no state directory is
	// configured (development); it is removed by close.
	tmpDir string
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
// configuration (ParseConfigWith). A sealed identity signs the audit log's
// start-up checkpoint (docs/spec/gate-v1.md section 5.3).
func newGateState(cfg *gate.Config, opts gate.Options, stateDir string, id *Identity) (*gateState, error) {
	if cfg == nil {
		return nil, errors.New("control: no gate configuration")
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
	aopts := audit.Options{Now: opts.Now, Logger: opts.Logger}
	if id != nil && id.Sealed {
		// An ephemeral identity's checkpoint could not be verified by the
		// next start: it writes none. audit labels what it has signed.
		aopts.CheckpointKey = id.Public
		aopts.SignCheckpoint = func(m []byte) ([]byte, error) {
			return id.Signer.Sign(nil, m, crypto.Hash(0))
		}
	}
	gs.audit, err = audit.Open(dir, aopts)
	if err != nil {
		if gs.tmpDir != "" {
			os.RemoveAll(gs.tmpDir)
		}
		return nil, err
	}
	opts.Config, opts.Audit = cfg, gs.audit
	if gs.Gate, err = gate.New(opts); err != nil {
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

// validChannel reports whether ch is a channel name: 1-64 bytes of
// a-z, 0-9, _ and -.
func validChannel(ch string) error {
	if ch == "" || len(ch) > maxChannelBytes {
		return errors.New("channel must be 1-64 bytes")
	}
	if !channelChars.All(ch) {
		return errors.New("channel may contain only a-z, 0-9, _ and -")
	}
	return nil
}

// channelChars is the class of a channel name (validChannel).
var channelChars = charclass.Lower().Or(charclass.Digit(), charclass.Of("_-"))

// validSenderID reports whether s is a sender id: 1-256 bytes of UTF-8
// without control characters.
func validSenderID(s string) error { return validText(s, maxSenderIDBytes) }

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

// turnRequest, the body of POST /v1/runs/{id}/turns, starts a turn: a new inbound message. Whether its sender is
// an owner comes from attester.owners, never from the request.
type turnRequest struct {
	Channel   string `json:"channel"`
	SenderID  string `json:"sender_id"`
	MessageID string `json:"message_id"`
	// ContentSHA256B64u is b64u SHA-256 of the message text (the attester
	// never needs the text itself).
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

var errStaleTurn = &Error{kind: kindConflict, Msg: "turn_id is not the run's current turn"}

// errBadTurnID refuses a turn_id that no attester issues (missing, null,
// another form): the request is malformed, not stale.
var errBadTurnID = &Error{kind: kindInvalid, Msg: "turn_id is missing or not a turn id this attester issues"}

// countToolCall admits one more tool call of the run's current turn, under
// the run's lock: refused when the run is closed, the turn_id is malformed
// or stale, or the run has had max tool calls.
func (rn *Run) countToolCall(turnID string, max int) error {
	if err := rn.lockOpen(); err != nil {
		return err
	}
	defer rn.mu.Unlock()
	if err := checkTurnRef(turnID, rn.turn); err != nil {
		return err
	}
	if rn.toolCalls >= max {
		return refusal(kindTooMany, fmt.Sprintf("the run has reached its limit of %d tool calls", max), nil)
	}
	rn.toolCalls++
	return nil
}

// recordDecision keeps a decision of the current turn for the model
// gateway's tool-result rule: the tool, the params hash and, for a denial,
// the block reason the plugin gives the model (docs/spec/openclaw-plugin.md
// section 2.3). A decision whose params hash is not a hash (a call the
// gate could not parse) answers no tool call.
func (rn *Run) recordDecision(turnID, tool, paramsHash string, allow bool, stage, reason string) {
	h, err := b64u.DecodeHash(paramsHash)
	if err != nil {
		return
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.turn != turnID {
		return
	}
	d := gateway.Decision{Tool: tool, ParamsHash: h, Allow: allow}
	if !allow {
		d.BlockReason = "clawea gate (" + stage + "): " + reason
	}
	rn.decisions = append(rn.decisions, d)
}

// checkTurnRef classifies the turn_id of a verify or tool-call request:
// errBadTurnID for one of another form than randomID("turn_") makes,
// errStaleTurn for one that is not the run's current turn.
func checkTurnRef(id, current string) error {
	if !issuedID("turn_", id) {
		return errBadTurnID
	}
	if id != current {
		return errStaleTurn
	}
	return nil
}

// turnResponse is the answer to a turn: its id, whether its sender is an
// owner, and for an owner turn the signature id of its message.
// (Fields in key order, as the answer was once a sorted map.)
type turnResponse struct {
	Owner       bool   `json:"owner"`
	SignatureID string `json:"signature_id,omitempty"`
	TurnID      string `json:"turn_id"`
}

// StartTurn starts a turn of rn: a new inbound message, which becomes the
// run's current turn. Every check happens before anything changes: a
// refused turn leaves the previous turn current.
func (s *Service) StartTurn(rn *Run, decode Decoder) (*turnResponse, error) {
	req, err := decodeAs[turnRequest](decode)
	if err != nil {
		return nil, err
	}
	if err := validChannel(req.Channel); err != nil {
		return nil, refusal(kindInvalid, "channel: "+err.Error(), nil)
	}
	if err := validSenderID(req.SenderID); err != nil {
		return nil, refusal(kindInvalid, "sender_id: "+err.Error(), nil)
	}
	if err := validText(req.MessageID, maxMessageIDBytes); err != nil {
		return nil, refusal(kindInvalid, "message_id: "+err.Error(), nil)
	}
	content, err := b64u.DecodeHash(req.ContentSHA256B64u)
	if err != nil {
		return nil, refusal(kindInvalid, "content_sha256_b64u must be a b64u SHA-256 hash", err)
	}
	owner := s.cfg.owner(req.Channel, req.SenderID)
	turn, err := randomID("turn_")
	if err != nil {
		return nil, err
	}
	midKey := sha256.Sum256([]byte(req.MessageID))

	rn.mu.Lock()
	defer rn.mu.Unlock()
	switch {
	case rn.closed:
		return nil, errRunClosed
	case rn.turns >= s.cfg.MaxTurnsPerRun:
		return nil, refusal(kindTooMany, fmt.Sprintf("the run has reached its limit of %d turns", s.cfg.MaxTurnsPerRun), nil)
	case owner && rn.signed >= s.cfg.MaxOwnerMessagesPerRun:
		return nil, refusal(kindTooMany, fmt.Sprintf("the run has reached its limit of %d signed owner messages", s.cfg.MaxOwnerMessagesPerRun), nil)
	}
	if _, used := rn.messageIDs[midKey]; used {
		return nil, refusal(kindConflict, "message_id was already used in this run", nil)
	}
	// The gate holds the run's state from creation until CloseRun, which
	// marks the run closed (checked above, under the same lock) before it
	// ends that state: an error here is the attester's own failure.
	if err := s.gate.NewTurn(rn.id, turn, owner); err != nil {
		return nil, refusal(kindInternal, "cannot start the turn", err)
	}
	rn.turns++
	rn.messageIDs[midKey] = struct{}{}
	rn.turn, rn.turnOwner, rn.turnMsg = turn, owner, ownerMessage{}
	rn.turnContent, rn.decisions = content, nil
	resp := &turnResponse{TurnID: turn, Owner: owner}
	if owner {
		rn.signed++
		sigID := rn.sessionKey + ":" + req.Channel + ":" + req.MessageID
		rn.turnMsg = ownerMessage{SignatureID: sigID, MessageID: req.MessageID, Identity: "owner:" + req.SenderID + ":" + req.Channel, ContentHash: content, SignedAt: s.now()}
		resp.SignatureID = sigID
	}
	return resp, nil
}

// verifyRequest, the body of POST /v1/runs/{id}/verify, is the verify tool: templates (default) or the signed owner
// message of the current turn. Only an owner turn can be verified.
type verifyRequest struct {
	TurnID string `json:"turn_id"`
	// MessageID and ContentSHA256B64u, when set, must both be set and equal
	// the current turn's signed owner message.
	MessageID         string `json:"message_id"`
	ContentSHA256B64u string `json:"content_sha256_b64u"`
}

// verifyResponse is the verify tool's answer (fields in key order, as the
// answer was once a sorted map): for the templates, the prompt's hash; for
// an owner message, its signature.
type verifyResponse struct {
	AllVerified          bool   `json:"all_verified,omitempty"`
	Identity             string `json:"identity,omitempty"`
	SignatureID          string `json:"signature_id,omitempty"`
	SignedAt             string `json:"signed_at,omitempty"`
	SystemPromptHashB64u string `json:"system_prompt_hash_b64u,omitempty"`
	TurnID               string `json:"turn_id"`
	Verified             bool   `json:"verified"`
}

// Verify runs the verify tool for the run's current turn and marks the
// turn verified in the gate.
func (s *Service) Verify(rn *Run, decode Decoder) (*verifyResponse, error) {
	req, err := decodeAs[verifyRequest](decode)
	if err != nil {
		return nil, err
	}
	if err := rn.lockOpen(); err != nil {
		return nil, err
	}
	defer rn.mu.Unlock()
	if err := checkTurnRef(req.TurnID, rn.turn); err != nil {
		return nil, err
	}
	switch {
	case !rn.turnOwner:
		return nil, refusal(kindForbidden, "verify is an owner-only tool: this turn's sender is not a configured owner", nil)
	case !s.gate.EnforcementFor(rn.agentID).VerifyAllowed:
		// The gate decides the verify tool like any other (the plugin asks it
		// first); calling the route directly must not get around a deny.
		return nil, refusal(kindForbidden, "the tool policy denies the verify tool for this run's agent", nil)
	}
	method := gate.VerifiedTemplates
	result := &verifyResponse{TurnID: req.TurnID}
	if req.MessageID != "" || req.ContentSHA256B64u != "" {
		m := rn.turnMsg
		want, herr := b64u.DecodeHash(req.ContentSHA256B64u)
		if herr != nil || req.MessageID != m.MessageID || want != m.ContentHash {
			return nil, &Error{kind: kindUnprocessable, Msg: "the message does not match the signed owner message of this turn", Reason: string(poh.SignatureInvalid)}
		}
		method = gate.VerifiedMessage
		result.SignatureID = m.SignatureID
		result.Identity = m.Identity
		result.SignedAt = m.SignedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	} else {
		// The pack's templates were checked against their signatures and the
		// trusted list when the run was created; the rebuilt prompt's hash
		// is what the run serves.
		result.AllVerified = true
		result.SystemPromptHashB64u = rn.promptH
	}
	if err := s.gate.MarkVerified(rn.id, req.TurnID, method); err != nil {
		return nil, refusal(kindInternal, "cannot mark the turn verified", err)
	}
	result.Verified = true
	return result, nil
}

// toolCallRequest is the body of POST /v1/runs/{id}/tool-calls.
type toolCallRequest struct {
	TurnID          string          `json:"turn_id"`
	Tool            string          `json:"tool"`
	Params          json.RawMessage `json:"params"`
	MessageProvider string          `json:"message_provider"`
}

// toolCallResponse is the decision.
type toolCallResponse struct {
	Allow      bool   `json:"allow"`
	Stage      string `json:"stage"`
	Reason     string `json:"reason"`
	Tool       string `json:"tool"`
	ParamsHash string `json:"params_hash_b64u"`
	AuditSeq   uint64 `json:"audit_seq"`
}

// ToolCall has the gate decide a tool call of the run's current turn; the
// decision is recorded in the run's audit log. A call the gate could not
// decide is a denial, not an error.
func (s *Service) ToolCall(ctx context.Context, rn *Run, decode Decoder) (*toolCallResponse, error) {
	req, err := decodeAs[toolCallRequest](decode)
	if err != nil {
		return nil, err
	}
	if err := rn.countToolCall(req.TurnID, s.cfg.MaxToolCallsPerRun); err != nil {
		return nil, err
	}
	d, derr := s.gate.Decide(ctx, gate.Call{
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
	rn.recordDecision(req.TurnID, d.Tool, d.ParamsHash, d.Allow, string(d.Stage), d.Reason)
	return &toolCallResponse{
		Allow: d.Allow, Stage: string(d.Stage), Reason: d.Reason, Tool: d.Tool,
		ParamsHash: d.ParamsHash, AuditSeq: d.AuditSeq,
	}, nil
}

// AuditSnapshot is the run's durable audit log as it stands: the snapshot's
// root and count describe exactly its records. The caller closes it.
func (s *Service) AuditSnapshot(rn *Run) (*audit.Snapshot, error) {
	if err := rn.lockOpen(); err != nil {
		return nil, err
	}
	rn.mu.Unlock()
	snap, err := s.gate.audit.Snapshot(rn.id) // empty: no decision yet
	if err != nil {
		return nil, refusal(kindInternal, "cannot read the audit log", err)
	}
	return snap, nil
}
