// Package audit is the hash-chained, append-only log of tool-call gate
// decisions (docs/spec/gate-v1.md, "Audit log").
//
// The log is JSON Lines. Every line is the RFC 8785 (JCS) form of one Record;
// record_hash_b64u is b64u(SHA-256(JCS(record without record_hash_b64u))) and
// prev_hash_b64u is the previous record's record_hash_b64u (null for the first
// record). The root of a log is the last record's hash; together with the
// record count it is what an execution attestation commits to.
//
// The package holds no raw tool parameters: callers pass the parameter hash
// only. It has no network or device code, so offline verifiers may import it.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
)

// Version is the value of audit_version in every record.
const Version = "1"

// Limits on record fields and lines.
const (
	// MaxFieldBytes bounds session, turn, agent, tool, stage and decision.
	MaxFieldBytes = 512
	// MaxReasonBytes bounds reason.
	MaxReasonBytes = 4096
	// MaxLineBytes bounds one JSON line (a valid record is far smaller).
	MaxLineBytes = 16 << 10
)

// Decision values.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Sentinel errors. Every error of this package wraps one of them.
var (
	// ErrMalformed: a line is not a well-formed, canonical record.
	ErrMalformed = errors.New("audit: malformed record")
	// ErrHashMismatch: a record's content does not match its record_hash_b64u
	// (the record was modified). PoH code HASH_MISMATCH.
	ErrHashMismatch = errors.New("audit: record hash mismatch")
	// ErrChainBreak: prev_hash_b64u does not name the previous record, or seq
	// is not the next number (records were removed, inserted or reordered).
	// PoH code HASH_CHAIN_BREAK.
	ErrChainBreak = errors.New("audit: hash chain break")
	// ErrInvalidEntry: Append was given an entry that violates the limits.
	ErrInvalidEntry = errors.New("audit: invalid entry")
	// ErrWriterFailed: an earlier write failed; the writer refuses further
	// appends because the chain on the sink is in an unknown state.
	ErrWriterFailed = errors.New("audit: writer failed")
)

// LineError locates a verification failure. It wraps one of the sentinels.
type LineError struct {
	Line int // 1-based line number
	Err  error
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %v: %s", e.Line, e.Err, e.Msg)
}

func (e *LineError) Unwrap() error { return e.Err }

// Code returns the PoH reason code for the failure.
func (e *LineError) Code() string {
	switch {
	case errors.Is(e.Err, ErrHashMismatch):
		return "HASH_MISMATCH"
	case errors.Is(e.Err, ErrChainBreak):
		return "HASH_CHAIN_BREAK"
	}
	return "MALFORMED_ENVELOPE"
}

// Entry is what the gate appends: one decision, without raw parameters.
type Entry struct {
	Session    string
	Turn       string
	Agent      string
	Tool       string
	ParamsHash string // b64u SHA-256 of the JCS of the parameters (43 chars)
	Stage      string
	Decision   string // Allow or Deny
	Reason     string
}

// Record is one line of the log.
type Record struct {
	AuditVersion string  `json:"audit_version"`
	Seq          uint64  `json:"seq"`
	Time         string  `json:"time"`
	Session      string  `json:"session"`
	Turn         string  `json:"turn"`
	Agent        string  `json:"agent"`
	Tool         string  `json:"tool"`
	ParamsHash   string  `json:"params_hash_b64u"`
	Stage        string  `json:"stage"`
	Decision     string  `json:"decision"`
	Reason       string  `json:"reason"`
	PrevHash     *string `json:"prev_hash_b64u"`
	RecordHash   string  `json:"record_hash_b64u,omitempty"`
}

// Hash returns b64u(SHA-256(JCS(r without record_hash_b64u))).
func (r Record) Hash() (string, error) {
	r.RecordHash = ""
	c, err := canonical(r)
	if err != nil {
		return "", err
	}
	return b64u.SHA256(c), nil
}

func canonical(r Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	c, err := jcs.Canonicalize(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return c, nil
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Now is the clock for record times; nil means time.Now.
	Now func() time.Time
	// ResumeRoot and ResumeCount continue an existing log whose last record
	// hash and record count are known (both zero for a new log).
	ResumeRoot  string
	ResumeCount uint64
}

// Writer appends records to an io.Writer. It is safe for concurrent use;
// records are written whole, one per Write call, in seq order.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
	root   string
	count  uint64
	failed error
}

// NewWriter returns a Writer that appends to w.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil io.Writer", ErrInvalidEntry)
	}
	if (opts.ResumeRoot == "") != (opts.ResumeCount == 0) {
		return nil, fmt.Errorf("%w: resume root and count must be given together", ErrInvalidEntry)
	}
	if opts.ResumeRoot != "" {
		if _, err := b64u.DecodeHash(opts.ResumeRoot); err != nil {
			return nil, fmt.Errorf("%w: resume root: %w", ErrInvalidEntry, err)
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Writer{w: w, now: now, root: opts.ResumeRoot, count: opts.ResumeCount}, nil
}

// Append writes one record for e and returns it.
func (w *Writer) Append(e Entry) (Record, error) {
	if err := checkEntry(e); err != nil {
		return Record{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrWriterFailed, w.failed)
	}
	r := Record{
		AuditVersion: Version,
		Seq:          w.count + 1,
		Time:         w.now().UTC().Format(time.RFC3339Nano),
		Session:      e.Session,
		Turn:         e.Turn,
		Agent:        e.Agent,
		Tool:         e.Tool,
		ParamsHash:   e.ParamsHash,
		Stage:        e.Stage,
		Decision:     e.Decision,
		Reason:       e.Reason,
	}
	if w.root != "" {
		prev := w.root
		r.PrevHash = &prev
	}
	h, err := r.Hash()
	if err != nil {
		return Record{}, err
	}
	r.RecordHash = h
	line, err := canonical(r)
	if err != nil {
		return Record{}, err
	}
	line = append(line, '\n')
	if _, err := w.w.Write(line); err != nil {
		w.failed = err
		return Record{}, fmt.Errorf("%w: %w", ErrWriterFailed, err)
	}
	w.root = h
	w.count = r.Seq
	return r, nil
}

// Root returns the hash of the last record ("" for an empty log) and the
// number of records written.
func (w *Writer) Root() (root string, count uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.root, w.count
}

func checkEntry(e Entry) error {
	for _, f := range []struct{ name, v string }{
		{"session", e.Session}, {"turn", e.Turn}, {"agent", e.Agent},
		{"tool", e.Tool}, {"stage", e.Stage},
	} {
		if len(f.v) > MaxFieldBytes || !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is not valid UTF-8 of at most %d bytes", ErrInvalidEntry, f.name, MaxFieldBytes)
		}
	}
	if e.Decision != Allow && e.Decision != Deny {
		return fmt.Errorf("%w: decision must be %q or %q", ErrInvalidEntry, Allow, Deny)
	}
	if len(e.Reason) > MaxReasonBytes || !utf8.ValidString(e.Reason) {
		return fmt.Errorf("%w: reason is not valid UTF-8 of at most %d bytes", ErrInvalidEntry, MaxReasonBytes)
	}
	if _, err := b64u.DecodeHash(e.ParamsHash); err != nil {
		return fmt.Errorf("%w: params hash: %w", ErrInvalidEntry, err)
	}
	return nil
}

// recordKeys are exactly the members of a serialized record.
var recordKeys = []string{
	"agent", "audit_version", "decision", "params_hash_b64u", "prev_hash_b64u",
	"reason", "record_hash_b64u", "seq", "session", "stage", "time", "tool", "turn",
}

// VerifyAuditLog reads a whole log and checks every record: canonical form,
// field constraints, record hash, seq numbering from 1 and the prev-hash
// chain. It returns the root (last record hash, "" for an empty log) and the
// record count. Only a log that verifies completely yields a root; a log cut
// after a complete record verifies as the shorter log, so callers compare the
// root and count with the committed ones.
func VerifyAuditLog(r io.Reader) (root string, count uint64, err error) {
	br := bufio.NewReaderSize(r, 4096)
	var prev string
	line := 0
	for {
		raw, rerr := readLine(br)
		if rerr == io.EOF {
			return prev, count, nil
		}
		line++
		if rerr != nil {
			return "", 0, &LineError{Line: line, Err: ErrMalformed, Msg: rerr.Error()}
		}
		rec, err := parseRecord(raw)
		if err != nil {
			return "", 0, &LineError{Line: line, Err: ErrMalformed, Msg: err.Error()}
		}
		h, err := rec.Hash()
		if err != nil {
			return "", 0, &LineError{Line: line, Err: ErrMalformed, Msg: "cannot hash record"}
		}
		if h != rec.RecordHash {
			return "", 0, &LineError{Line: line, Err: ErrHashMismatch, Msg: "record_hash_b64u does not match the record"}
		}
		if rec.Seq != count+1 {
			return "", 0, &LineError{Line: line, Err: ErrChainBreak, Msg: fmt.Sprintf("seq %d, want %d", rec.Seq, count+1)}
		}
		switch {
		case count == 0 && rec.PrevHash != nil:
			return "", 0, &LineError{Line: line, Err: ErrChainBreak, Msg: "first record has a prev_hash_b64u"}
		case count > 0 && (rec.PrevHash == nil || *rec.PrevHash != prev):
			return "", 0, &LineError{Line: line, Err: ErrChainBreak, Msg: "prev_hash_b64u does not name the previous record"}
		}
		prev = rec.RecordHash
		count++
	}
}

// readLine returns one line without its '\n'. A final line without '\n' is
// an error (a torn write), as is a line longer than MaxLineBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > MaxLineBytes+1 {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		out = append(out, chunk...)
		switch {
		case err == nil:
			return out[:len(out)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(out) == 0 {
				return nil, io.EOF
			}
			return nil, errors.New("last line is not terminated by a newline")
		default:
			return nil, fmt.Errorf("read: %w", err)
		}
	}
}

func parseRecord(raw []byte) (Record, error) {
	var rec Record
	if len(raw) == 0 {
		return rec, errors.New("empty line")
	}
	c, err := jcs.Canonicalize(raw)
	if err != nil {
		return rec, errors.New("not I-JSON")
	}
	if !bytes.Equal(c, raw) {
		return rec, errors.New("record is not in canonical (JCS) form")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return rec, errors.New("record is not a JSON object")
	}
	if len(members) != len(recordKeys) {
		return rec, fmt.Errorf("record has %d members, want %d", len(members), len(recordKeys))
	}
	for _, k := range recordKeys {
		if _, ok := members[k]; !ok {
			return rec, fmt.Errorf("missing member %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, errors.New("member of the wrong type")
	}
	if rec.AuditVersion != Version {
		return rec, errors.New("unknown audit_version")
	}
	if rec.Seq == 0 || rec.Seq > 1<<53-1 {
		return rec, errors.New("seq out of range")
	}
	t, err := time.Parse(time.RFC3339Nano, rec.Time)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != rec.Time {
		return rec, errors.New("time is not canonical RFC 3339 UTC")
	}
	if err := checkEntry(Entry{
		Session: rec.Session, Turn: rec.Turn, Agent: rec.Agent, Tool: rec.Tool,
		ParamsHash: rec.ParamsHash, Stage: rec.Stage, Decision: rec.Decision, Reason: rec.Reason,
	}); err != nil {
		return rec, err
	}
	if rec.PrevHash != nil {
		if _, err := b64u.DecodeHash(*rec.PrevHash); err != nil {
			return rec, errors.New("prev_hash_b64u is not a b64u SHA-256 hash")
		}
	}
	if _, err := b64u.DecodeHash(rec.RecordHash); err != nil {
		return rec, errors.New("record_hash_b64u is not a b64u SHA-256 hash")
	}
	return rec, nil
}
