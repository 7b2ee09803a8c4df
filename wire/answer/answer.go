// Package answer is the format of the attester's signed control answers
// (docs/spec/attester-api.md section 8): the statement an answer's
// signature covers, its canonical bytes, the request hash, the signed
// message, and the checks a client makes before it acts on an answer. The
// attester (package control) builds and signs statements with it; clients
// verify with it (Go) or with the same rules (clients/openclaw).
package answer

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
)

// Wire constants.
const (
	// Version is the statement's answer_version.
	Version = "1"
	// label is the domain-separation label: a signature is over label, a
	// zero byte and the statement's bytes, so that no answer can be taken
	// for another object the identity key signs.
	label = "clawea.dev/attester/v1/control-answer"
	// HeaderStatement carries b64u(statement bytes); HeaderSignature
	// carries b64u(the 64-byte Ed25519 signature).
	HeaderStatement = "Clawea-Answer-Statement"
	HeaderSignature = "Clawea-Answer-Signature"
	// maxStatementBytes bounds a statement (a client refuses a longer one
	// before decoding it).
	maxStatementBytes = 1024
	maxRunIDBytes     = 128
)

// Statement is what the attester signs for one answer. Its fields are in
// JCS key order; Marshal writes exactly the canonical bytes.
type Statement struct {
	AnswerVersion    string `json:"answer_version"`
	AttesterDID      string `json:"attester_did"`
	PeerPID          int64  `json:"peer_pid"`
	PeerStartTime    int64  `json:"peer_start_time"`
	RequestHashB64u  string `json:"request_hash_b64u"`
	ResponseHashB64u string `json:"response_hash_b64u"`
	RunID            string `json:"run_id"`
	Seq              int64  `json:"seq"`
	Status           int64  `json:"status"`
}

// The errors of a statement or answer that must not be acted on. Each
// names its reason code (the plugin reports the same codes).
var (
	errMalformed        = errors.New("ANSWER_MALFORMED: the answer's statement is not a canonical answer statement")
	errUnsigned         = errors.New("ANSWER_UNSIGNED: the answer carries no signature")
	errSignature        = errors.New("ANSWER_SIGNATURE_INVALID: the answer's signature does not verify with the pinned attester key")
	errSigner           = errors.New("ANSWER_WRONG_SIGNER: the answer names another attester than the pinned one")
	errRequestMismatch  = errors.New("ANSWER_REQUEST_MISMATCH: the answer is for another request than the one sent")
	errResponseMismatch = errors.New("ANSWER_RESPONSE_MISMATCH: the answer's body is not the one the attester signed")
	errStatusMismatch   = errors.New("ANSWER_STATUS_MISMATCH: the answer's status is not the one the attester signed")
	errPeerMismatch     = errors.New("ANSWER_PEER_MISMATCH: the attester answered another process than this one")
	errRunMismatch      = errors.New("ANSWER_RUN_MISMATCH: the answer is for another run")
	errSequence         = errors.New("ANSWER_SEQUENCE: the answer is out of sequence (replayed, reordered or lost)")
)

// reasons are the errors above, each of which Code names.
var reasons = [...]error{
	errMalformed, errUnsigned, errSignature, errSigner, errRequestMismatch,
	errResponseMismatch, errStatusMismatch, errPeerMismatch, errRunMismatch, errSequence,
}

// Code returns the reason code (ANSWER_UNSIGNED, ANSWER_SEQUENCE, ...) of
// an error that Verify, Statement.Check or Statement.Marshal returned, or
// "" for any other error.
func Code(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r) {
			code, _, _ := strings.Cut(r.Error(), ":")
			return code
		}
	}
	return ""
}

// RequestHash is SHA-256(method || LF || request-target || LF || body):
// the request as the attester read it (request-target exactly as sent, for
// example "/v1/runs/run_x/tool-calls"; body the exact body bytes, empty
// when there is none). Neither method nor request-target can hold a line
// feed, so the split is unambiguous.
func RequestHash(method, target string, body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{'\n'})
	h.Write([]byte(target))
	h.Write([]byte{'\n'})
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Message is the byte string a statement's signature is over: label, a
// zero byte, the statement.
func Message(statement []byte) []byte {
	b := make([]byte, 0, len(label)+1+len(statement))
	b = append(b, label...)
	b = append(b, 0)
	return append(b, statement...)
}

// Marshal checks s and returns its canonical (RFC 8785) bytes. Every value
// is a restricted string that needs no escape (check) or a safe integer,
// so writing the members in key order, each string between quotes and
// each integer in decimal, is JCS (and what encoding/json writes for s).
func (s *Statement) Marshal() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 384)
	b = appendString(b, '{', "answer_version", s.AnswerVersion)
	b = appendString(b, ',', "attester_did", s.AttesterDID)
	b = appendInt(b, "peer_pid", s.PeerPID)
	b = appendInt(b, "peer_start_time", s.PeerStartTime)
	b = appendString(b, ',', "request_hash_b64u", s.RequestHashB64u)
	b = appendString(b, ',', "response_hash_b64u", s.ResponseHashB64u)
	b = appendString(b, ',', "run_id", s.RunID)
	b = appendInt(b, "seq", s.Seq)
	b = appendInt(b, "status", s.Status)
	return append(b, '}'), nil
}

// appendString appends sep and the member "key":"v" (v needs no escape).
func appendString(b []byte, sep byte, key, v string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	b = append(b, v...)
	return append(b, '"')
}

// appendInt appends a comma and the member "key":v (v in decimal).
func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// check checks a statement's members; every integer is at most
// pohjson.MaxSafeInteger, so that JavaScript reads every number exactly.
func (s *Statement) check() error {
	const maxInt = pohjson.MaxSafeInteger
	switch {
	case s.AnswerVersion != Version:
		return fmt.Errorf("%w: answer_version", errMalformed)
	case !validRunID(s.RunID):
		return fmt.Errorf("%w: run_id", errMalformed)
	case !b64u.ValidHash(s.RequestHashB64u) || !b64u.ValidHash(s.ResponseHashB64u):
		return fmt.Errorf("%w: hashes", errMalformed)
	case s.PeerPID < 1 || s.PeerPID > maxInt || s.PeerStartTime < 0 || s.PeerStartTime > maxInt:
		return fmt.Errorf("%w: peer", errMalformed)
	case s.Seq < 1 || s.Seq > maxInt || s.Status < 200 || s.Status > 299:
		return fmt.Errorf("%w: seq or status", errMalformed)
	}
	if _, err := didkey.Parse(s.AttesterDID); err != nil {
		return fmt.Errorf("%w: attester_did", errMalformed)
	}
	return nil
}

// validRunID: 1-128 of A-Z a-z 0-9 _ - (what the attester issues).
func validRunID(id string) bool {
	return id != "" && len(id) <= maxRunIDBytes && runIDChars.All(id)
}

// runIDChars is the class of a run id (validRunID).
var runIDChars = charclass.Alnum().Or(charclass.Of("_-"))

// parse reads a statement strictly: it must be exactly the canonical bytes
// of a valid statement (what Marshal writes), so a duplicate, case-variant
// or unknown member, whitespace or another number form is refused.
func parse(b []byte) (*Statement, error) {
	if len(b) > maxStatementBytes {
		return nil, fmt.Errorf("%w: too long", errMalformed)
	}
	var s Statement
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	c, err := s.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(c, b) {
		return nil, fmt.Errorf("%w: not canonical", errMalformed)
	}
	return &s, nil
}

// Verify checks an answer's headers (b64u statement and signature, empty
// when absent) against the pinned attester key pub and returns the
// statement only when its signature verifies. A statement that is signed
// by another key and names another attester is errSigner; any other
// signature failure is errSignature.
func Verify(pub ed25519.PublicKey, statementB64u, signatureB64u string) (*Statement, error) {
	if statementB64u == "" || signatureB64u == "" {
		return nil, errUnsigned
	}
	if len(statementB64u) > b64u.EncodedLen(maxStatementBytes) {
		return nil, fmt.Errorf("%w: too long", errMalformed)
	}
	stmt, err := b64u.Decode(statementB64u)
	if err != nil {
		return nil, fmt.Errorf("%w: statement is not b64u", errMalformed)
	}
	sig, err := b64u.Decode(signatureB64u)
	if err != nil || len(sig) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return nil, errSignature
	}
	if !ed25519.Verify(pub, Message(stmt), sig) {
		// Diagnosis only: an unverified statement naming another attester.
		if s, err := parse(stmt); err == nil && s.AttesterDID != didkey.Format(pub) {
			return nil, fmt.Errorf("%w (%s)", errSigner, s.AttesterDID)
		}
		return nil, errSignature
	}
	s, err := parse(stmt)
	if err != nil {
		return nil, err
	}
	if s.AttesterDID != didkey.Format(pub) {
		return nil, errSigner
	}
	return s, nil
}

// Expect is what a client knows about an answer before it trusts it: what
// it sent, what it received, who it is, and the sequence number it expects
// next in the run (1 for the answer that creates the run). RunID is empty
// for run creation (the statement names the new run).
type Expect struct {
	RunID        string
	Seq          int64
	Status       int
	RequestHash  [32]byte
	ResponseHash [32]byte
	PID          int64
	StartTime    int64
}

// Check compares a verified statement with e, field by field, each with
// its own error.
func (s *Statement) Check(e Expect) error {
	switch {
	case s.RequestHashB64u != b64u.Encode(e.RequestHash[:]):
		return errRequestMismatch
	case s.ResponseHashB64u != b64u.Encode(e.ResponseHash[:]):
		return errResponseMismatch
	case s.Status != int64(e.Status):
		return errStatusMismatch
	case s.PeerPID != e.PID || s.PeerStartTime != e.StartTime:
		return fmt.Errorf("%w: pid %d start %d, this process is pid %d start %d", errPeerMismatch, s.PeerPID, s.PeerStartTime, e.PID, e.StartTime)
	case e.RunID != "" && s.RunID != e.RunID:
		return errRunMismatch
	case s.Seq != e.Seq:
		return fmt.Errorf("%w: got %d, want %d", errSequence, s.Seq, e.Seq)
	}
	return nil
}
