// Package auditrec is the wire format of the gate audit log
// (docs/spec/gate-v1.md section 5): the record, its canonical encoding, the
// record hash, the chain and the JSON Lines reader that verifiers use. It
// is a floor package: the producer (gate/audit) and the offline verifier
// (verify/) both import it, so the format and its rules exist once.
//
// A log is JSON Lines. Every line is the RFC 8785 (JCS) form of one Record;
// record_hash_b64u is b64u(SHA-256(JCS(record without record_hash_b64u))) and
// prev_hash_b64u is the previous record's record_hash_b64u (null for the
// first record). The root of a log is the last record's hash; together with
// the record count it is what an execution attestation commits to.
//
// Records hold parameter hashes, never raw tool parameters.
package auditrec

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/pohjson"
)

// auditVersion is the value of audit_version in every record.
const auditVersion = "1"

// Limits on record fields and lines.
const (
	// MaxFieldBytes bounds session, turn, agent, tool, stage and decision.
	MaxFieldBytes = 512
	// MaxReasonBytes bounds reason.
	MaxReasonBytes = 4096
	// MaxLineBytes bounds one JSON line (a valid record is far smaller).
	MaxLineBytes = 16 << 10
	// maxSeq is the largest seq (the largest integer JSON numbers carry
	// exactly).
	maxSeq = 1<<53 - 1
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
	// errHashMismatch: a record's content does not match its record_hash_b64u
	// (the record was modified). PoH code HASH_MISMATCH.
	errHashMismatch = errors.New("audit: record hash mismatch")
	// ErrChainBreak: prev_hash_b64u does not name the previous record, or seq
	// is not the next number (records were removed, inserted or reordered).
	// PoH code HASH_CHAIN_BREAK.
	ErrChainBreak = errors.New("audit: hash chain break")
	// ErrInvalidEntry: an entry violates the field rules.
	ErrInvalidEntry = errors.New("audit: invalid entry")
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
	case errors.Is(e.Err, errHashMismatch):
		return "HASH_MISMATCH"
	case errors.Is(e.Err, ErrChainBreak):
		return "HASH_CHAIN_BREAK"
	}
	return "MALFORMED_ENVELOPE"
}

// Entry is the content of one decision: a record without its chain fields.
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

// Check applies the field rules of section 5. Errors wrap ErrInvalidEntry.
func (e *Entry) Check() error {
	for _, f := range [...]struct{ name, v string }{
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
	if !b64u.ValidHash(e.ParamsHash) {
		return fmt.Errorf("%w: params hash is not a b64u SHA-256 hash", ErrInvalidEntry)
	}
	return nil
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

// formatTime is the canonical form of a record time: RFC 3339 UTC with
// nanoseconds as Go writes it.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// hash returns b64u(SHA-256(JCS(r without record_hash_b64u))). It fails
// (ErrMalformed) only when a string field is not valid UTF-8.
func (r *Record) hash() (string, error) {
	if err := r.checkUTF8(); err != nil {
		return "", err
	}
	var buf [1024]byte
	b, _ := r.appendJCS(buf[:0], false)
	sum := sha256.Sum256(b)
	return b64u.Encode(sum[:]), nil
}

// seal computes r's record hash, sets RecordHash and appends the record's
// line (JCS form and '\n') to dst. Call it on a record built for a chain
// (AuditVersion, Seq, Time and PrevHash set) whose entry passed Check.
func (r *Record) seal(dst []byte) ([]byte, error) {
	if err := r.checkUTF8(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst, mid := r.appendJCS(dst, false)
	sum := sha256.Sum256(dst[start:])
	var h [43]byte
	b64u.AppendEncode(h[:0], sum[:])
	r.RecordHash = string(h[:])
	// The line is the hashed form with the record_hash_b64u member
	// inserted where JCS orders it (after reason, before seq).
	const member = `,"record_hash_b64u":"`
	n := len(dst) - start
	dst = append(dst, dst[start:mid]...)
	dst = append(dst, member...)
	dst = append(dst, h[:]...)
	dst = append(dst, '"')
	dst = append(dst, dst[mid:start+n]...)
	dst = append(dst, '\n')
	// Move the line over the hashed form.
	line := len(dst) - (start + n)
	copy(dst[start:], dst[start+n:])
	return dst[:start+line], nil
}

// marshalCanonical returns the JCS form of r (with record_hash_b64u when it
// is set), without a trailing newline.
func (r *Record) marshalCanonical() ([]byte, error) {
	if err := r.checkUTF8(); err != nil {
		return nil, err
	}
	b, _ := r.appendJCS(nil, r.RecordHash != "")
	return b, nil
}

func (r *Record) checkUTF8() error {
	for _, s := range [...]string{r.AuditVersion, r.Time, r.Session, r.Turn, r.Agent, r.Tool, r.ParamsHash, r.Stage, r.Decision, r.Reason, r.RecordHash} {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: a field is not valid UTF-8", ErrMalformed)
		}
	}
	if r.PrevHash != nil && !utf8.ValidString(*r.PrevHash) {
		return fmt.Errorf("%w: a field is not valid UTF-8", ErrMalformed)
	}
	return nil
}

// appendJCS appends the RFC 8785 form of r: members in UTF-16 code unit
// order of their (ASCII) names, strings escaped as JCS does
// (jsstr.AppendQuote). It also returns the offset in dst where the
// record_hash_b64u member is (or would be). The strings MUST be valid UTF-8
// (checkUTF8).
func (r *Record) appendJCS(dst []byte, withHash bool) ([]byte, int) {
	dst = appendMember(dst, `{"agent":`, r.Agent)
	dst = appendMember(dst, `,"audit_version":`, r.AuditVersion)
	dst = appendMember(dst, `,"decision":`, r.Decision)
	dst = appendMember(dst, `,"params_hash_b64u":`, r.ParamsHash)
	dst = append(dst, `,"prev_hash_b64u":`...)
	if r.PrevHash == nil {
		dst = append(dst, "null"...)
	} else {
		dst = jsstr.AppendQuote(dst, *r.PrevHash)
	}
	dst = appendMember(dst, `,"reason":`, r.Reason)
	mid := len(dst)
	if withHash {
		dst = appendMember(dst, `,"record_hash_b64u":`, r.RecordHash)
	}
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, r.Seq, 10)
	dst = appendMember(dst, `,"session":`, r.Session)
	dst = appendMember(dst, `,"stage":`, r.Stage)
	dst = appendMember(dst, `,"time":`, r.Time)
	dst = appendMember(dst, `,"tool":`, r.Tool)
	dst = appendMember(dst, `,"turn":`, r.Turn)
	dst = append(dst, '}')
	return dst, mid
}

// appendMember appends a member name (with its separator and colon) and
// its string value, quoted as JCS does.
func appendMember(dst []byte, name, value string) []byte {
	return jsstr.AppendQuote(append(dst, name...), value)
}

// Chain is the state of a chain being read or written: the hash of the last
// record ("" before the first) and the number of records.
type Chain struct {
	Root  string
	Count uint64
}

// Next parses raw (one line without its '\n') as the record that follows c,
// checks it (canonical form, field rules, record hash, seq and prev hash)
// and, only if it passes, advances c. Errors wrap ErrMalformed,
// errHashMismatch or ErrChainBreak.
func (c *Chain) Next(raw []byte) (Record, error) {
	rec, err := parseLine(raw)
	if err != nil {
		return Record{}, err
	}
	h, err := rec.hash()
	if err != nil {
		return Record{}, fmt.Errorf("%w: cannot hash record", ErrMalformed)
	}
	if h != rec.RecordHash {
		return Record{}, fmt.Errorf("%w: record_hash_b64u does not match the record", errHashMismatch)
	}
	if rec.Seq != c.Count+1 {
		return Record{}, fmt.Errorf("%w: seq %d, want %d", ErrChainBreak, rec.Seq, c.Count+1)
	}
	switch {
	case c.Count == 0 && rec.PrevHash != nil:
		return Record{}, fmt.Errorf("%w: first record has a prev_hash_b64u", ErrChainBreak)
	case c.Count > 0 && (rec.PrevHash == nil || *rec.PrevHash != c.Root):
		return Record{}, fmt.Errorf("%w: prev_hash_b64u does not name the previous record", ErrChainBreak)
	}
	c.Root, c.Count = rec.RecordHash, rec.Seq
	return rec, nil
}

// Append checks e (the field rules, as Entry.Check), builds the record that
// follows c at time now, seals it (computes and sets RecordHash) and appends
// its line (JCS form and '\n') to dst. It advances c only when it succeeds.
// Errors wrap ErrInvalidEntry or ErrMalformed; on error dst is returned
// unchanged.
func (c *Chain) Append(dst []byte, now time.Time, e *Entry) (Record, []byte, error) {
	if err := e.Check(); err != nil {
		return Record{}, dst, err
	}
	r := Record{
		AuditVersion: auditVersion,
		Seq:          c.Count + 1,
		Time:         formatTime(now),
		Session:      e.Session,
		Turn:         e.Turn,
		Agent:        e.Agent,
		Tool:         e.Tool,
		ParamsHash:   e.ParamsHash,
		Stage:        e.Stage,
		Decision:     e.Decision,
		Reason:       e.Reason,
	}
	if c.Root != "" {
		prev := c.Root
		r.PrevHash = &prev
	}
	line, err := r.seal(dst)
	if err != nil {
		return Record{}, dst, err
	}
	c.Root, c.Count = r.RecordHash, r.Seq
	return r, line, nil
}

// Verify reads a whole log and checks every record: canonical form, field
// constraints, record hash, seq numbering from 1 and the prev-hash chain.
// It returns the root (last record hash, "" for an empty log) and the record
// count. Only a log that verifies completely yields a root; a log cut after
// a complete record verifies as the shorter log, so callers compare the root
// and count with the committed ones. Errors are *LineError.
func Verify(r io.Reader) (root string, count uint64, err error) {
	return Read(r, nil)
}

// Read is Verify that also hands every verified record, in order, to fn
// (when fn is not nil). An error from fn stops the reading and is returned
// as is. Records handed to fn before a later line fails were verified, but
// the log as a whole was not: callers that need the whole log discard them
// on error.
func Read(r io.Reader, fn func(Record) error) (root string, count uint64, err error) {
	br := bufio.NewReaderSize(r, 4096)
	var c Chain
	line := 0
	for {
		raw, rerr := readLine(br)
		if rerr == io.EOF {
			return c.Root, c.Count, nil
		}
		line++
		if rerr != nil {
			return "", 0, &LineError{Line: line, Err: ErrMalformed, Msg: rerr.Error()}
		}
		rec, err := c.Next(raw)
		if err != nil {
			return "", 0, lineError(line, err)
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return "", 0, err
			}
		}
	}
}

func lineError(line int, err error) *LineError {
	le := &LineError{Line: line, Err: ErrMalformed}
	for _, s := range []error{errHashMismatch, ErrChainBreak, ErrMalformed} {
		if errors.Is(err, s) {
			le.Err = s
			break
		}
	}
	msg := err.Error()
	if p := le.Err.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		msg = msg[len(p):]
	}
	le.Msg = msg
	return le
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

// stringField is the string field of r serialized as key, nil for none.
func (r *Record) stringField(key string) *string {
	switch key {
	case "agent":
		return &r.Agent
	case "audit_version":
		return &r.AuditVersion
	case "decision":
		return &r.Decision
	case "params_hash_b64u":
		return &r.ParamsHash
	case "reason":
		return &r.Reason
	case "record_hash_b64u":
		return &r.RecordHash
	case "session":
		return &r.Session
	case "stage":
		return &r.Stage
	case "time":
		return &r.Time
	case "tool":
		return &r.Tool
	case "turn":
		return &r.Turn
	}
	return nil
}

// recordKeys is the number of members of a serialized record.
const recordKeys = 13

// recordOf reads the parsed line v as a record: an object of exactly the
// record's members (the parser refused duplicates), each of its type.
func recordOf(v *pohjson.Value) (Record, error) {
	var rec Record
	if v.Kind() != pohjson.Object {
		return rec, errors.New("record is not a JSON object")
	}
	if n := len(v.Members()); n != recordKeys {
		return rec, fmt.Errorf("record has %d members, want %d", n, recordKeys)
	}
	for _, m := range v.Members() {
		ok := true
		switch m.Key {
		case "seq":
			n, isInt := m.Value.Int()
			ok = isInt && n >= 0
			rec.Seq = uint64(n)
		case "prev_hash_b64u":
			if m.Value.Kind() != pohjson.Null {
				h, isStr := m.Value.Str()
				ok, rec.PrevHash = isStr, &h
			}
		default:
			dst := rec.stringField(m.Key)
			if dst == nil {
				return rec, fmt.Errorf("unknown member %q", m.Key)
			}
			*dst, ok = m.Value.Str()
		}
		if !ok {
			return rec, errors.New("member of the wrong type")
		}
	}
	return rec, nil
}

// parseLine reads one line (without its '\n') as a record: it MUST be exactly
// the JCS form of a record with every member, valid fields and well-formed
// hashes. Parse does not check the record hash or the chain (Chain.Next
// does). Errors wrap ErrMalformed.
func parseLine(raw []byte) (Record, error) {
	rec, err := parse(raw)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %s", ErrMalformed, err.Error())
	}
	return rec, nil
}

func parse(raw []byte) (Record, error) {
	if len(raw) == 0 {
		return Record{}, errors.New("empty line")
	}
	// The project's strict reader: no duplicate keys, valid UTF-8 without
	// lone surrogates, integers only. One copy of the line holds the
	// strings. Whether the line is exactly the record's JCS form is
	// checked last, by encoding the record again.
	v, err := pohjson.ParseWith(raw, pohjson.ParseOptions{MaxDepth: 1, OneCopy: true})
	if err != nil {
		return Record{}, errors.New("not I-JSON")
	}
	rec, err := recordOf(v)
	if err != nil {
		return rec, err
	}
	return rec, rec.checkDecoded(raw)
}

// checkDecoded checks a record decoded from the line raw: its version,
// seq, time and fields, the form of its hashes, and that it re-encodes to
// raw byte for byte.
func (rec *Record) checkDecoded(raw []byte) error {
	if rec.AuditVersion != auditVersion {
		return errors.New("unknown audit_version")
	}
	if rec.Seq == 0 || rec.Seq > maxSeq {
		return errors.New("seq out of range")
	}
	t, err := time.Parse(time.RFC3339Nano, rec.Time)
	if err != nil || formatTime(t) != rec.Time {
		return errors.New("time is not canonical RFC 3339 UTC")
	}
	e := Entry{
		Session: rec.Session, Turn: rec.Turn, Agent: rec.Agent, Tool: rec.Tool,
		ParamsHash: rec.ParamsHash, Stage: rec.Stage, Decision: rec.Decision, Reason: rec.Reason,
	}
	if err := e.Check(); err != nil {
		return err
	}
	if rec.PrevHash != nil {
		if _, err := b64u.DecodeHash(*rec.PrevHash); err != nil {
			return errors.New("prev_hash_b64u is not a b64u SHA-256 hash")
		}
	}
	if _, err := b64u.DecodeHash(rec.RecordHash); err != nil {
		return errors.New("record_hash_b64u is not a b64u SHA-256 hash")
	}
	// Whatever is accepted re-encodes to the identical bytes.
	if b, _ := rec.appendJCS(nil, true); !bytes.Equal(b, raw) {
		return errors.New("record does not re-encode to the same bytes")
	}
	return nil
}
