package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// auditRecord is one line of a run's gateway audit log (section 9): hashes
// and codes only, never prompt, message or answer bytes.
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

// auditLog is a run's gateway audit file, <dir>/<run_id>.jsonl. Each
// record is written and fsynced before the call's answer ends.
type auditLog struct {
	f   *os.File
	seq int64
}

func openAudit(dir, runID string) (*auditLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, runID+".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("gateway: opening the audit log: %w", err)
	}
	return &auditLog{f: f}, nil
}

// append writes rec durably.
func (l *auditLog) append(rec *auditRecord, now time.Time) error {
	l.seq++
	rec.Seq = l.seq
	rec.At = now.UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("gateway: writing the audit log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("gateway: syncing the audit log: %w", err)
	}
	return nil
}

func (l *auditLog) close() error { return l.f.Close() }
