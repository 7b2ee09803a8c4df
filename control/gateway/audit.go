package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// auditRecord is one line of a run's gateway audit log (section 9): hashes
// and codes only, never prompt, message or answer bytes. The json tags
// name the members appendJSON writes (in this order; omitempty: left out
// when zero), the bytes json.Marshal would write (the differential test).
type auditRecord struct {
	Seq            int64    `json:"seq"`
	At             string   `json:"at"`
	RunID          string   `json:"run_id"`
	TurnID         string   `json:"turn_id,omitempty"`
	Provider       string   `json:"provider"`
	Model          string   `json:"model,omitempty"`
	Outcome        string   `json:"outcome"`
	Reason         string   `json:"reason,omitempty"`
	RequestHash    string   `json:"request_hash_b64u"`
	ResponseHash   string   `json:"response_hash_b64u,omitempty"`
	Status         int      `json:"status,omitempty"`
	EventHash      string   `json:"llm_call_event_hash_b64u,omitempty"`
	SuffixHash     string   `json:"suffix_hash_b64u,omitempty"`
	SuffixBytes    int      `json:"suffix_bytes,omitempty"`
	ToolDescHash   string   `json:"tool_descriptions_hash_b64u,omitempty"`
	InternalHashes []string `json:"internal_context_hashes_b64u,omitempty"`
	ReceiptHash    string   `json:"receipt_hash_b64u,omitempty"`
}

// appendJSON appends r as json.Marshal writes it, without reflection: the
// record is written on every call's critical path.
func (r *auditRecord) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, r.Seq, 10)
	dst = appendMember(dst, `,"at":`, r.At, false)
	dst = appendMember(dst, `,"run_id":`, r.RunID, false)
	dst = appendMember(dst, `,"turn_id":`, r.TurnID, true)
	dst = appendMember(dst, `,"provider":`, r.Provider, false)
	dst = appendMember(dst, `,"model":`, r.Model, true)
	dst = appendMember(dst, `,"outcome":`, r.Outcome, false)
	dst = appendMember(dst, `,"reason":`, r.Reason, true)
	dst = appendMember(dst, `,"request_hash_b64u":`, r.RequestHash, false)
	dst = appendMember(dst, `,"response_hash_b64u":`, r.ResponseHash, true)
	if r.Status != 0 {
		dst = strconv.AppendInt(append(dst, `,"status":`...), int64(r.Status), 10)
	}
	dst = appendMember(dst, `,"llm_call_event_hash_b64u":`, r.EventHash, true)
	dst = appendMember(dst, `,"suffix_hash_b64u":`, r.SuffixHash, true)
	if r.SuffixBytes != 0 {
		dst = strconv.AppendInt(append(dst, `,"suffix_bytes":`...), int64(r.SuffixBytes), 10)
	}
	dst = appendMember(dst, `,"tool_descriptions_hash_b64u":`, r.ToolDescHash, true)
	if len(r.InternalHashes) > 0 {
		dst = append(dst, `,"internal_context_hashes_b64u":[`...)
		for i, h := range r.InternalHashes {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, h)
		}
		dst = append(dst, ']')
	}
	dst = appendMember(dst, `,"receipt_hash_b64u":`, r.ReceiptHash, true)
	return append(dst, '}')
}

// appendMember appends a string member (key: its `,"name":` prefix);
// omitEmpty leaves out an empty one.
func appendMember(dst []byte, key, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

// appendJSONString quotes s as json.Marshal does. The hashes, codes and
// names a record holds are printable ASCII with nothing to escape: they
// are copied; any other string goes through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	return append(append(append(dst, '"'), s...), '"')
}

// auditLog is a run's gateway audit file, <dir>/<run_id>.jsonl. Each
// record is written and fsynced before the call's answer ends. The run's
// call and a call refused because the run is busy (runState.busy) both
// write to it: mu orders their records, and a forwarded call holds it
// from its record to the second record that may follow (finish), so that
// a call's records are never split by another's.
type auditLog struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	closed bool
	seq    int64
	// buf holds the line being written, reused from record to record
	// (under mu); it holds hashes and codes only.
	buf []byte
}

func newAuditLog(dir, runID string) *auditLog {
	return &auditLog{path: filepath.Join(dir, runID+".jsonl")}
}

// open opens the file, unless it is open; a closed log (CloseRun) is not
// opened again.
func (l *auditLog) open() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.openLocked()
}

func (l *auditLog) openLocked() error {
	switch {
	case l.closed:
		return errRunClosed
	case l.f != nil:
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("gateway: opening the audit log: %w", err)
	}
	l.f = f
	return nil
}

// append writes rec durably.
func (l *auditLog) append(rec *auditRecord, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(rec, now)
}

// appendLocked is append for a caller that holds mu.
func (l *auditLog) appendLocked(rec *auditRecord, now time.Time) error {
	if err := l.openLocked(); err != nil {
		return err
	}
	l.seq++
	rec.Seq = l.seq
	rec.At = now.UTC().Format(time.RFC3339Nano)
	l.buf = append(rec.appendJSON(l.buf[:0]), '\n')
	if _, err := l.f.Write(l.buf); err != nil {
		return fmt.Errorf("gateway: writing the audit log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("gateway: syncing the audit log: %w", err)
	}
	return nil
}

// close closes the file for good: a later record of the run fails.
func (l *auditLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
