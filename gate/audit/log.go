package audit

import (
	"bufio"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/wire/auditrec"
)

// Defaults for Options.
const (
	// defaultMaxRunBytes bounds one run's log (about 25,000 records).
	defaultMaxRunBytes = 16 << 20
	// defaultMaxTotalBytes bounds the directory: the reservations of active
	// runs plus the files of closed and recovered runs.
	defaultMaxTotalBytes = 4 << 30
	// maxRunIDBytes bounds a run id (it names a file).
	maxRunIDBytes = 128
)

// fileSuffix names run logs: <run id>.jsonl.
const fileSuffix = ".jsonl"

// lockName is the file a Log holds an exclusive lock on while open.
const lockName = "LOCK"

// Errors of Log. Callers branch with errors.Is.
var (
	// errInvalidRun: a run id that is not 1..maxRunIDBytes of [A-Za-z0-9_-].
	errInvalidRun = errors.New("audit: invalid run id")
	// errRunFull: the run's log reached Options.MaxRunBytes. Only that run
	// is refused.
	errRunFull = errors.New("audit: the run's audit log is full")
	// errFull: a new run cannot start: the directory budget
	// (Options.MaxTotalBytes) is reserved by other runs and no closed run
	// can be removed. Runs already started are not affected.
	errFull = errors.New("audit: the audit directory is full")
	// errRunClosed: the run was closed (CloseRun) or its log removed.
	errRunClosed = errors.New("audit: run closed")
	// errRunFailed: writing the run's log failed; its chain on disk is in
	// an unknown state and it takes no further records.
	errRunFailed = errors.New("audit: run log failed")
	// errClosed: the Log was closed.
	errClosed = errors.New("audit: log closed")
	// errCorrupt: at Open, a complete record on disk does not verify (bad
	// form, hash or chain). The log is not opened: a tampered or damaged
	// log is never continued as a new chain.
	errCorrupt = errors.New("audit: log on disk does not verify")
	// errLocked: another process holds the directory.
	errLocked = errors.New("audit: directory in use by another process")
)

// Options configure a Log. The zero value is usable.
type Options struct {
	// Now is the clock for record times; nil means time.Now.
	Now func() time.Time
	// MaxRunBytes bounds one run's log; 0 means defaultMaxRunBytes.
	MaxRunBytes int64
	// MaxTotalBytes bounds the directory; 0 means defaultMaxTotalBytes. It
	// MUST be at least MaxRunBytes.
	MaxTotalBytes int64
	// Logger receives recovery and removal notices; nil discards.
	Logger *slog.Logger
	// CheckpointKey and SignCheckpoint, given together, enable the start-up
	// checkpoint (docs/spec/gate-v1.md section 5.3): Close writes one that
	// SignCheckpoint signs (the Ed25519 signature of the message it is
	// given, by the private key of CheckpointKey), and Open uses one only
	// if its signature verifies under CheckpointKey. Without them Open
	// verifies every record and Close writes no checkpoint.
	CheckpointKey  ed25519.PublicKey
	SignCheckpoint func(message []byte) ([]byte, error)
	// OnCommit, when set, is called by the log's writer after each group
	// commit with its figures: the records and files it wrote, their bytes,
	// the wait from the batch's first record's admission to the commit's
	// start, the slowest file's write and fsync (files are flushed in
	// parallel), and the whole commit (directory fsync included). It runs
	// on the writer, which commits nothing meanwhile: it MUST be quick.
	// Benchmarks use it (make bench-control).
	OnCommit func(records, files, bytes int, wait, write, sync, total time.Duration)
}

// Log is the durable audit log: one hash chain per run, one file per run
// (<dir>/<run>.jsonl, the JSON Lines format of wire/auditrec, so a run's
// file is exactly what a verifier reads). Record returns only after the
// record's bytes and, for a new file, the directory entry are fsynced;
// concurrent records share one write and fsync per file (group commit by a
// single writer goroutine). It is safe for concurrent use.
type Log struct {
	dir      string
	now      func() time.Time
	maxRun   int64
	maxTotal int64
	log      *slog.Logger
	lock     *os.File
	ckKey    ed25519.PublicKey
	signCk   func([]byte) ([]byte, error)

	mu       sync.Mutex
	runs     map[string]*runLog
	reserved int64  // bytes counted against maxTotal
	cur      *batch // the batch new records join; nil when none is open
	// spare holds the buffers of the last committed batch, which the next
	// batch reuses (a batch's lines and items are garbage once committed).
	spare    batch
	ioErr    error // the latest write failure (for Healthy)
	closed   bool
	wake     chan struct{}
	stopped  chan struct{}
	order    uint64 // admission counter, for removal order
	stats    logStats
	onCommit func(records, files, bytes int, wait, write, sync, total time.Duration) // Options.OnCommit
}

// logStats count the work of a Log since Open.
type logStats struct {
	Records uint64 // records acknowledged
	Commits uint64 // group commits (batches written)
	Syncs   uint64 // file fsyncs (directory fsyncs not counted)
}

// statsNow returns the counters (for metrics and benchmarks).
func (l *Log) statsNow() logStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

type runState uint8

const (
	stateIdle    runState = iota // recovered from disk, no file open
	stateActive                  // written in this process
	stateClosed                  // CloseRun: no further records
	stateRemoved                 // file removed to free budget
)

// runLog is one run's chain. Fields are guarded by Log.mu, except f and
// wbuf, which only the writer goroutine touches while the run has records
// in flight.
type runLog struct {
	id      string
	state   runState
	head    auditrec.Chain // including records in flight
	size    int64          // bytes including records in flight
	durable auditrec.Chain // fsynced
	dprev   string         // hash of the record before durable.Root
	dsize   int64          // fsynced bytes
	sum     hash.Hash      // SHA-256 of the fsynced bytes (for the checkpoint)
	failed  error
	exists  bool   // the file exists on disk
	resv    int64  // bytes this run counts in Log.reserved
	order   uint64 // when it was admitted or recovered
	closing bool   // the writer closes f after the current batch

	f    *os.File
	wbuf []byte
}

// batch is one group commit: records appended while the writer was busy.
type batch struct {
	done   chan struct{}
	opened time.Time // when its first record was admitted (for Options.OnCommit)
	buf    []byte
	items  []item
	closes []*runLog
	// set by the writer before done is closed
	failed map[*runLog]error
}

type item struct {
	rl       *runLog
	off, end int
	seq      uint64
	root     string
}

// Open opens (creating it if needed, mode 0700) the audit directory dir,
// takes an exclusive lock on it, and recovers every run log in it: each
// file is verified record by record (from the end of what a valid signed
// checkpoint covers, see Options.CheckpointKey); a torn last record (a
// final line without '\n', left by a crash during a write that was never
// acknowledged) is cut off, and a complete record that does not verify, or
// a file that contradicts the signed checkpoint, is an error (errCorrupt),
// never the start of a new chain. The checkpoint is then removed. Runs
// found on disk can be continued (their chain goes on) and count against
// MaxTotalBytes until they are removed.
func Open(dir string, opts Options) (*Log, error) {
	if dir == "" {
		return nil, errors.New("audit: no directory given")
	}
	l := &Log{
		dir:      dir,
		now:      opts.Now,
		maxRun:   opts.MaxRunBytes,
		maxTotal: opts.MaxTotalBytes,
		log:      opts.Logger,
		ckKey:    opts.CheckpointKey,
		signCk:   opts.SignCheckpoint,
		onCommit: opts.OnCommit,
		runs:     map[string]*runLog{},
		wake:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.maxRun == 0 {
		l.maxRun = defaultMaxRunBytes
	}
	if l.maxTotal == 0 {
		l.maxTotal = defaultMaxTotalBytes
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.maxRun < 0 || l.maxTotal < l.maxRun {
		return nil, fmt.Errorf("audit: MaxTotalBytes (%d) must be at least MaxRunBytes (%d) > 0", l.maxTotal, l.maxRun)
	}
	if (l.ckKey == nil) != (l.signCk == nil) || (l.ckKey != nil && len(l.ckKey) != ed25519.PublicKeySize) {
		return nil, errors.New("audit: CheckpointKey (an Ed25519 public key) and SignCheckpoint must be given together")
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("audit: create directory: %w", err)
		}
		// The new directory's entry must be durable like the files in it.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("audit: create directory: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: lock file: %w", err)
	}
	if err := lockFile(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %w", errLocked, err)
	}
	l.lock = lock
	info, err := os.Lstat(dir)
	if err == nil {
		err = ownFile(filepath.Base(dir), info, fs.ModeDir)
	}
	var ck map[string]ckptEntry
	if err == nil {
		ck, err = l.loadCheckpoint()
	}
	if err == nil {
		err = l.recover(ck)
	}
	if err == nil {
		err = l.dropCheckpoint()
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	go l.writer()
	return l, nil
}

// ownFile refuses a run log (or the audit directory) that is not what the
// attester makes (a regular file, a directory, never a symlink), that
// another user owns or that group or others can write: what is in it cannot
// be vouched for.
func ownFile(name string, info fs.FileInfo, want fs.FileMode) error {
	if info.Mode().Type() != want {
		return fmt.Errorf("%w: %s: not a regular file or directory (%v)", errCorrupt, name, info.Mode().Type())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s: writable by other users (mode %v)", errCorrupt, name, info.Mode().Perm())
	}
	if ownedByOther(info) {
		return fmt.Errorf("%w: %s: owned by another user", errCorrupt, name)
	}
	return nil
}

// validRunID reports whether id can name a run log.
func validRunID(id string) bool {
	return id != "" && len(id) <= maxRunIDBytes && runIDChars.All(id)
}

// runIDChars are the bytes of a run id, safe in a file name.
var runIDChars = charclass.Alnum().Or(charclass.Of("_-"))

func (l *Log) path(id string) string { return filepath.Join(l.dir, id+fileSuffix) }

// recover verifies every run log in the directory, each from the end of
// what ck (the runs a valid checkpoint covers, or nil) says about it.
func (l *Log) recover(ck map[string]ckptEntry) error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("audit: read directory: %w", err)
	}
	type found struct {
		id  string
		mod time.Time
	}
	var runs []found
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutSuffix(name, fileSuffix)
		if !ok {
			continue
		}
		if !validRunID(id) {
			return fmt.Errorf("%w: %s: not a run log name", errCorrupt, name)
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("audit: %s: %w", name, err)
		}
		if err := ownFile(name, info, 0); err != nil {
			return err
		}
		runs = append(runs, found{id, info.ModTime()})
	}
	// Oldest first, so that removal order follows age.
	slices.SortFunc(runs, func(a, b found) int { return a.mod.Compare(b.mod) })
	// A file the checkpoint lists and the directory lacks stops the
	// start-up before any file is changed.
	if len(ck) > 0 {
		onDisk := make(map[string]bool, len(runs))
		for _, fr := range runs {
			onDisk[fr.id] = true
		}
		for _, run := range slices.Sorted(maps.Keys(ck)) {
			if !onDisk[run] {
				return fmt.Errorf("%w: %w: %s%s is missing", errCorrupt, errCheckpointStale, run, fileSuffix)
			}
		}
	}
	var skipped, verified uint64
	for _, fr := range runs {
		var from *ckptEntry
		if e, ok := ck[fr.id]; ok {
			from = &e
		}
		st, err := recoverFile(l.path(fr.id), l.log, from)
		if err != nil {
			return err
		}
		skipped += st.skipped
		verified += st.chain.Count - st.skipped
		l.order++
		l.runs[fr.id] = &runLog{id: fr.id, state: stateIdle, head: st.chain, durable: st.chain, dprev: st.prev,
			size: st.size, dsize: st.size, sum: st.sum, exists: true, resv: st.size, order: l.order}
		l.reserved += st.size
	}
	if ck != nil {
		l.log.Info("audit: start-up checkpoint verified", "files", len(runs), "records_covered", skipped, "records_verified", verified)
	}
	return nil
}

// recovered is what recoverFile found in a run's file.
type recovered struct {
	chain   auditrec.Chain
	prev    string    // hash of the record before chain.Root
	size    int64     // bytes of complete records
	sum     hash.Hash // SHA-256 of those bytes
	skipped uint64    // records the checkpoint covered (not re-parsed)
}

// recoverFile verifies one run log and cuts a torn last record. With from
// (the checkpoint's entry for the file), it checks the bytes the
// checkpoint covers against its digest and last record, and verifies
// record by record only what follows. It returns the chain and the size
// of the verified prefix.
func recoverFile(path string, log *slog.Logger, from *ckptEntry) (recovered, error) {
	name := filepath.Base(path)
	st := recovered{sum: sha256.New()}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return st, fmt.Errorf("audit: %s: %w", name, err)
	}
	defer f.Close()
	if from != nil {
		if err := checkCheckpointed(f, *from, st.sum); err != nil {
			if errors.Is(err, errCheckpointStale) {
				return st, fmt.Errorf("%w: %s: %w", errCorrupt, name, err)
			}
			return st, fmt.Errorf("audit: %s: %w", name, err)
		}
		if _, err := f.Seek(from.size, io.SeekStart); err != nil {
			return st, fmt.Errorf("audit: %s: %w", name, err)
		}
		st.chain = auditrec.Chain{Root: from.root, Count: from.count}
		st.prev, st.size, st.skipped = from.prev, from.size, from.count
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			line = append(line, chunk...)
			if len(line) > auditrec.MaxLineBytes+1 {
				long, line = true, line[:0]
			}
		}
		switch {
		case err == nil:
			if long {
				return st, fmt.Errorf("%w: %s: %w", errCorrupt, name, &auditrec.LineError{Line: int(st.chain.Count) + 1, Err: auditrec.ErrMalformed, Msg: "line too long"})
			}
			prev := st.chain.Root
			if _, err := st.chain.Next(line[:len(line)-1]); err != nil {
				return st, fmt.Errorf("%w: %s: record %d: %w", errCorrupt, name, st.chain.Count+1, err)
			}
			st.prev = prev
			st.size += int64(len(line))
			st.sum.Write(line)
			line = line[:0]
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
		default:
			return st, fmt.Errorf("audit: %s: read: %w", name, err)
		}
		break
	}
	return st, cutTorn(f, name, st, log)
}

// cutTorn truncates f after its last complete record when a final line
// without '\n' follows it: a write that never completed, so no record in
// it was acknowledged.
func cutTorn(f *os.File, name string, st recovered, log *slog.Logger) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit: %s: %w", name, err)
	}
	if info.Size() == st.size {
		return nil
	}
	if err := f.Truncate(st.size); err != nil {
		return fmt.Errorf("audit: %s: cut torn record: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("audit: %s: cut torn record: %w", name, err)
	}
	log.Warn("audit: cut a torn last record", "file", name, "records", st.chain.Count, "cut_bytes", info.Size()-st.size)
	return nil
}

// Record appends e to run's chain (creating the run's log on its first
// record) and returns the record's seq once the record is durable. An error
// means the record is not in the log, or (errRunFailed) that the run's log
// is in an unknown state; either way the caller MUST treat the decision as
// not recorded.
func (l *Log) Record(run string, e Entry) (uint64, error) {
	if !validRunID(run) {
		return 0, errInvalidRun
	}
	if err := e.Check(); err != nil {
		return 0, err
	}
	l.mu.Lock()
	rl, err := l.admit(run)
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	b := l.openBatch()
	off := len(b.buf)
	head := rl.head
	r, buf, err := head.Append(b.buf, l.now(), &e)
	if err != nil {
		l.mu.Unlock()
		return 0, err
	}
	n := int64(len(buf) - off)
	if rl.size+n > l.maxRun {
		b.buf = buf[:off]
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: %d bytes", errRunFull, l.maxRun)
	}
	b.buf = buf
	b.items = append(b.items, item{rl: rl, off: off, end: len(buf), seq: r.Seq, root: r.RecordHash})
	rl.head = head
	rl.size += n
	l.kick()
	l.mu.Unlock()
	<-b.done
	if err := b.failed[rl]; err != nil {
		return 0, err
	}
	return r.Seq, nil
}

// admit returns run's log, starting it if needed. Called with l.mu held.
func (l *Log) admit(run string) (*runLog, error) {
	if l.closed {
		return nil, errClosed
	}
	rl := l.runs[run]
	if rl != nil {
		switch rl.state {
		case stateActive:
			if rl.failed != nil {
				return nil, fmt.Errorf("%w: %w", errRunFailed, rl.failed)
			}
			return rl, nil
		case stateClosed, stateRemoved:
			return nil, errRunClosed
		}
		// Idle (recovered): continue its chain. Its bytes are counted
		// already; reserve the rest of its cap.
		need := max(l.maxRun, rl.size) - rl.resv
		if err := l.reserve(need, rl); err != nil {
			return nil, err
		}
		rl.resv += need
		l.order++
		rl.state, rl.order = stateActive, l.order
		return rl, nil
	}
	if err := l.reserve(l.maxRun, nil); err != nil {
		return nil, err
	}
	l.order++
	rl = &runLog{id: run, state: stateActive, resv: l.maxRun, order: l.order, sum: sha256.New()}
	l.runs[run] = rl
	return rl, nil
}

// reserve counts n more bytes against the directory budget, removing the
// logs of closed and recovered runs (other than keep), oldest first, when
// needed. Called with l.mu held.
func (l *Log) reserve(n int64, keep *runLog) error {
	for l.reserved+n > l.maxTotal {
		var victim *runLog
		for _, rl := range l.runs {
			if removable(rl) && rl != keep {
				if victim == nil || rl.order < victim.order {
					victim = rl
				}
			}
		}
		if victim == nil {
			return errFull
		}
		if err := os.Remove(l.path(victim.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.ioErr = err
			return fmt.Errorf("%w: remove %s: %w", errFull, victim.id, err)
		}
		l.log.Info("audit: removed a closed run's log to free space", "run_id", victim.id, "bytes", victim.size)
		l.reserved -= victim.resv
		victim.state, victim.exists, victim.resv = stateRemoved, false, 0
	}
	l.reserved += n
	return nil
}

// openBatch returns the batch new records join, opening one with the spare
// buffers when none is open. Called with l.mu held.
func (l *Log) openBatch() *batch {
	if l.cur == nil {
		l.cur = &batch{done: make(chan struct{}), buf: l.spare.buf, items: l.spare.items}
		if l.onCommit != nil {
			l.cur.opened = time.Now()
		}
		l.spare.buf, l.spare.items = nil, nil
	}
	return l.cur
}

// maxSpareBytes bounds the line buffer kept for the next batch.
const maxSpareBytes = 1 << 20

// keepSpare keeps b's buffers for the next batch once b is committed: its
// waiters read only b.failed. Called with l.mu held.
func (l *Log) keepSpare(b *batch) {
	if cap(b.buf) <= maxSpareBytes {
		l.spare.buf = b.buf[:0]
	}
	clear(b.items) // no committed run stays reachable through the spare
	l.spare.items = b.items[:0]
}

// kick wakes the writer. Called with l.mu held (Close closes l.wake under
// l.mu, so a kick never sends on a closed channel).
func (l *Log) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// removable reports whether a run's file may be removed to free budget:
// a closed run (once its file is closed) or a run recovered from disk and
// not continued. Called with l.mu held.
func removable(rl *runLog) bool {
	return (rl.state == stateClosed || rl.state == stateIdle) && !rl.closing && rl.exists
}

// writer is the single goroutine that writes and fsyncs batches.
func (l *Log) writer() {
	defer close(l.stopped)
	for range l.wake {
		for {
			l.mu.Lock()
			b := l.cur
			l.cur = nil
			l.mu.Unlock()
			if b == nil {
				break
			}
			l.commit(b)
			l.mu.Lock()
			l.keepSpare(b)
			l.mu.Unlock()
		}
	}
}

// commit writes a batch: per run, one write of its records, one fsync,
// and one directory fsync when a file was created.
func (l *Log) commit(b *batch) {
	t0 := time.Now()
	var dirty []*runLog
	for _, it := range b.items {
		rl := it.rl
		if len(rl.wbuf) == 0 {
			dirty = append(dirty, rl)
		}
		rl.wbuf = append(rl.wbuf, b.buf[it.off:it.end]...)
	}
	fail := func(rl *runLog, err error) {
		if b.failed == nil {
			b.failed = map[*runLog]error{}
		}
		b.failed[rl] = fmt.Errorf("%w: %w", errRunFailed, err)
	}
	created := false
	for _, rl := range dirty {
		// Only the writer sets rl.failed, so it reads it without l.mu.
		// Records admitted before a failure was known are not written
		// after it: the file's state is unknown.
		if rl.failed != nil {
			fail(rl, rl.failed)
			rl.wbuf = rl.wbuf[:0]
			continue
		}
		if rl.f != nil {
			continue
		}
		f, err := os.OpenFile(l.path(rl.id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fail(rl, err)
			rl.wbuf = rl.wbuf[:0]
			continue
		}
		rl.f = f
		l.mu.Lock()
		if !rl.exists {
			rl.exists, created = true, true
		}
		l.mu.Unlock()
	}
	// One write and one fsync per file; files are synced in parallel so
	// that the file system can merge them into one journal commit.
	errs := make([]error, len(dirty))
	times := make([][2]time.Duration, len(dirty))
	var wg sync.WaitGroup
	for i, rl := range dirty {
		if rl.f == nil || b.failed[rl] != nil {
			continue
		}
		flush := func() {
			times[i], errs[i] = flushRun(rl)
		}
		if len(dirty) == 1 {
			flush()
			continue
		}
		wg.Go(flush)
	}
	wg.Wait()
	for i, rl := range dirty {
		if errs[i] != nil {
			fail(rl, errs[i])
		}
	}
	if created {
		if err := syncDir(l.dir); err != nil {
			for _, rl := range dirty {
				fail(rl, err)
			}
		}
	}
	l.mu.Lock()
	l.stats.Commits++
	for i, rl := range dirty {
		if rl.f != nil && errs[i] == nil && b.failed[rl] == nil {
			l.stats.Syncs++
		}
	}
	for _, it := range b.items {
		rl := it.rl
		if err := b.failed[rl]; err != nil {
			if rl.failed == nil {
				rl.failed = err
				l.ioErr = err
			}
			continue
		}
		rl.dprev, rl.durable.Root, rl.durable.Count = rl.durable.Root, it.root, it.seq
		rl.dsize += int64(it.end - it.off)
		l.stats.Records++
	}
	closes := b.closes
	l.mu.Unlock()
	if l.onCommit != nil {
		var wr, fs time.Duration
		for _, tm := range times {
			wr, fs = max(wr, tm[0]), max(fs, tm[1])
		}
		l.onCommit(len(b.items), len(dirty), len(b.buf), t0.Sub(b.opened), wr, fs, time.Since(t0))
	}
	for _, rl := range closes {
		if rl.f != nil {
			rl.f.Close()
		}
		l.mu.Lock()
		rl.f, rl.closing = nil, false
		l.mu.Unlock()
	}
	close(b.done)
}

// flushRun writes a run's pending records and fsyncs its file; it returns
// how long the write and the fsync took, and the error.
func flushRun(rl *runLog) ([2]time.Duration, error) {
	w0 := time.Now()
	_, err := rl.f.Write(rl.wbuf)
	w1 := time.Now()
	if err == nil {
		err = rl.f.Sync()
	}
	if err == nil {
		rl.sum.Write(rl.wbuf)
	}
	rl.wbuf = rl.wbuf[:0]
	return [2]time.Duration{w1.Sub(w0), time.Since(w1)}, err
}

// CloseRun ends a run's log: later records for the run are refused
// (errRunClosed), its file is closed, and it becomes eligible for removal
// when the directory budget is needed by a new run. Its snapshot stays
// readable until then. Closing an unknown or closed run is a no-op.
func (l *Log) CloseRun(run string) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errClosed
	}
	rl := l.runs[run]
	if rl == nil || rl.state != stateActive {
		if rl != nil && rl.state == stateIdle {
			rl.state = stateClosed
		}
		l.mu.Unlock()
		return nil
	}
	rl.state, rl.closing = stateClosed, true
	// Give back the unused part of the reservation.
	l.reserved -= rl.resv - rl.size
	rl.resv = rl.size
	b := l.openBatch()
	b.closes = append(b.closes, rl)
	l.kick()
	l.mu.Unlock()
	<-b.done
	return nil
}

// root returns the run's durable root and record count ("" and 0 for a
// run without records).
func (l *Log) root(run string) (root string, count uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rl := l.runs[run]
	if rl == nil {
		if !validRunID(run) {
			return "", 0, errInvalidRun
		}
		return "", 0, nil
	}
	if rl.state == stateRemoved {
		return "", 0, errRunClosed
	}
	return rl.durable.Root, rl.durable.Count, nil
}

// Snapshot is a consistent view of one run's log: the durable records at
// the time it was taken, their root and count. Its body is streamed from
// the file, never copied into memory whole.
type Snapshot struct {
	Root  string
	Count uint64
	Size  int64
	f     *os.File
}

// Snapshot returns the run's durable log. The caller MUST call WriteTo or
// Close. A run that never recorded anything (no decision yet: the log
// knows no such run) has an empty snapshot, root "" and count 0.
func (l *Log) Snapshot(run string) (*Snapshot, error) {
	if !validRunID(run) {
		return nil, errInvalidRun
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	rl := l.runs[run]
	if rl == nil {
		return &Snapshot{}, nil
	}
	if rl.state == stateRemoved {
		return nil, errRunClosed
	}
	s := &Snapshot{Root: rl.durable.Root, Count: rl.durable.Count, Size: rl.dsize}
	if s.Size > 0 {
		f, err := os.Open(l.path(run))
		if err != nil {
			return nil, fmt.Errorf("audit: open run log: %w", err)
		}
		s.f = f
	}
	return s, nil
}

// WriteTo writes the snapshot's records (JSON Lines) to w and closes the
// snapshot.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	if s.f == nil {
		return 0, nil
	}
	defer s.Close()
	n, err := io.Copy(w, io.NewSectionReader(s.f, 0, s.Size))
	if err == nil && n != s.Size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Close releases the snapshot.
func (s *Snapshot) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Healthy reports whether the log can record: nil, or errClosed, the
// latest write failure (errRunFailed), or errFull when no new run could
// start. Readiness checks call it.
func (l *Log) Healthy() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return errClosed
	case l.ioErr != nil:
		return fmt.Errorf("%w: %w", errRunFailed, l.ioErr)
	}
	free := l.maxTotal - l.reserved
	for _, rl := range l.runs {
		if removable(rl) {
			free += rl.resv
		}
	}
	if free < l.maxRun {
		return errFull
	}
	return nil
}

// Close waits for records in flight, closes every file, writes the
// start-up checkpoint (when Options.CheckpointKey is set) and releases the
// directory. Later calls return errClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errClosed
	}
	l.closed = true
	close(l.wake)
	l.mu.Unlock()
	<-l.stopped
	var errs []error
	for _, rl := range l.runs {
		if rl.f != nil {
			errs = append(errs, rl.f.Close())
			rl.f = nil
		}
	}
	if err := errors.Join(errs...); err == nil {
		errs = append(errs, l.writeCheckpoint())
	}
	errs = append(errs, l.lock.Close())
	return errors.Join(errs...)
}
