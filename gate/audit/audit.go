// Package audit records the tool-call gate's decisions in hash-chained
// audit logs (docs/spec/gate-v1.md section 5). The record format, its
// canonical encoding and the chain verification live in the floor package
// wire/auditrec, which verifiers import; this package writes.
//
// Two writers share the format:
//
//   - Log (Open) is the attester's durable log: one chain per run, one file
//     per run under a state directory, every record fsynced (with group
//     commit) before Record returns, recovered after a crash. A clean Close
//     leaves a signed start-up checkpoint (checkpoint.go) so that the next
//     Open hashes the bytes it covers instead of re-verifying each record.
//   - Writer (NewWriter) appends one chain to an io.Writer with no
//     durability; tests and benchmarks use it.
//
// The package holds no raw tool parameters: callers pass the parameter hash
// only.
package audit

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/clawea/attester/wire/auditrec"
)

// The format's names, for writers that do not import wire/auditrec.
type (
	// Entry is one decision, without raw parameters.
	Entry = auditrec.Entry
	// logRecord is one line of a log.
	logRecord = auditrec.Record
)

// Decision values.
const (
	Allow = auditrec.Allow
	Deny  = auditrec.Deny
)

// Sentinel errors. Every error of this package wraps one of them.
var (
	// errInvalidEntry: the entry violates the field rules (the same value
	// as auditrec.ErrInvalidEntry).
	errInvalidEntry = auditrec.ErrInvalidEntry
	// errWriterFailed: an earlier write failed; the writer refuses further
	// appends because the chain on the sink is in an unknown state.
	errWriterFailed = errors.New("audit: writer failed")
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Now is the clock for record times; nil means time.Now.
	Now func() time.Time
	// ResumeRoot and ResumeCount continue an existing log whose last record
	// hash and record count are known (both zero for a new log).
	ResumeRoot  string
	ResumeCount uint64
}

// Writer appends one chain to an io.Writer, with no durability of its own.
// It is safe for concurrent use; records are written whole, one per Write
// call, in seq order. Production code uses Log.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
	chain  auditrec.Chain
	buf    []byte
	failed error
}

// NewWriter returns a Writer that appends to w.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil io.Writer", errInvalidEntry)
	}
	if (opts.ResumeRoot == "") != (opts.ResumeCount == 0) {
		return nil, fmt.Errorf("%w: resume root and count must be given together", errInvalidEntry)
	}
	if opts.ResumeRoot != "" {
		e := Entry{ParamsHash: opts.ResumeRoot, Decision: Allow}
		if e.Check() != nil {
			return nil, fmt.Errorf("%w: resume root is not a b64u SHA-256 hash", errInvalidEntry)
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Writer{w: w, now: now, chain: auditrec.Chain{Root: opts.ResumeRoot, Count: opts.ResumeCount}}, nil
}

// Append writes one record for e and returns it.
func (w *Writer) Append(e Entry) (logRecord, error) {
	if err := e.Check(); err != nil {
		return logRecord{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return logRecord{}, fmt.Errorf("%w: %w", errWriterFailed, w.failed)
	}
	next := w.chain
	r, line, err := next.Append(w.buf[:0], w.now(), &e)
	if err != nil {
		return logRecord{}, err
	}
	w.buf = line
	if _, err := w.w.Write(line); err != nil {
		w.failed = err
		return logRecord{}, fmt.Errorf("%w: %w", errWriterFailed, err)
	}
	w.chain = next
	return r, nil
}

// Record appends e and returns its seq. The run is ignored: a Writer holds
// one chain. It makes a Writer usable as the gate's recorder in tests.
func (w *Writer) Record(_ string, e Entry) (uint64, error) {
	r, err := w.Append(e)
	return r.Seq, err
}

// Root returns the hash of the last record ("" for an empty log) and the
// number of records written.
func (w *Writer) Root() (root string, count uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.chain.Root, w.chain.Count
}
