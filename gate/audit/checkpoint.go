package audit

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/wire/auditrec"
)

// The start-up checkpoint (docs/spec/gate-v1.md section 5.3): written at
// Close, signed with the attester's identity key, it names each run file's
// length, record count, last two record hashes and the SHA-256 of its
// bytes, so that the next Open hashes the bytes it covers instead of
// parsing and verifying each record again.
const (
	// checkpointName is the checkpoint's file in the audit directory.
	checkpointName = "CHECKPOINT"
	// checkpointTmpPrefix starts the name of a checkpoint being written.
	checkpointTmpPrefix = ".CHECKPOINT.tmp-"
	// checkpointHeader is the first line: format and version.
	checkpointHeader = "clawea-audit-checkpoint/v1"
	// checkpointFormat is checkpointHeader without the version.
	checkpointFormat = "clawea-audit-checkpoint/"
	// checkpointLabel separates the checkpoint's signatures from every
	// other use of the identity key: the signed message is the label, a
	// zero byte, then the checkpoint up to its sig line.
	checkpointLabel = "clawea.dev/attester/v1/audit-checkpoint"
	// maxCheckpointBytes bounds the checkpoint (about 200,000 runs). A log
	// with more files writes none.
	maxCheckpointBytes = 48 << 20
	// noPrev stands for the previous hash of a run's first record.
	noPrev = "-"
)

// Checkpoint errors. A checkpoint that is not the attester's (errCheckpoint)
// is not used: Open verifies every record. A signed checkpoint that the
// files contradict (errCheckpointStale) stops Open.
var (
	// errCheckpoint: the checkpoint is malformed, of an unknown version, or
	// its signature does not verify under the checkpoint key.
	errCheckpoint = errors.New("audit: checkpoint not usable")
	// errCheckpointStale: a file is shorter than the signed checkpoint says,
	// holds another record where the checkpoint's last record ends, or is
	// missing.
	errCheckpointStale = errors.New("audit: the files differ from the signed checkpoint")
)

// ckptEntry is what the checkpoint says about one run's file.
type ckptEntry struct {
	run   string
	size  int64  // bytes of complete records
	count uint64 // records, >= 1
	prev  string // hash of record count-1; "" when count is 1
	root  string // hash of record count
	sum   string // b64u SHA-256 of the file's first size bytes
}

// appendCheckpointBody writes the checkpoint's signed part for entries
// (sorted by run, each run once).
func appendCheckpointBody(dst []byte, entries []ckptEntry) []byte {
	dst = append(dst, checkpointHeader...)
	dst = append(dst, '\n')
	for _, e := range entries {
		prev := e.prev
		if prev == "" {
			prev = noPrev
		}
		dst = append(dst, "run "...)
		dst = append(dst, e.run...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.size, 10)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, e.count, 10)
		dst = append(dst, ' ')
		dst = append(dst, prev...)
		dst = append(dst, ' ')
		dst = append(dst, e.root...)
		dst = append(dst, ' ')
		dst = append(dst, e.sum...)
		dst = append(dst, '\n')
	}
	return dst
}

// appendCheckpointSig writes the sig line that ends a checkpoint.
func appendCheckpointSig(dst, sig []byte) []byte {
	dst = append(dst, "sig "...)
	dst = b64u.AppendEncode(dst, sig)
	return append(dst, '\n')
}

// checkpointMessage is the byte string a checkpoint's signature is over.
func checkpointMessage(body []byte) []byte {
	m := make([]byte, 0, len(checkpointLabel)+1+len(body))
	m = append(m, checkpointLabel...)
	m = append(m, 0)
	return append(m, body...)
}

// parsedCheckpoint is a checkpoint whose form is valid; its signature is
// not yet verified.
type parsedCheckpoint struct {
	entries []ckptEntry
	body    []byte // the signed part
	sig     []byte
}

// parseCheckpoint reads a checkpoint strictly: the header line, one run
// line per file in increasing run order, the sig line, nothing after.
// Whatever it accepts re-encodes to the identical bytes. Errors wrap
// errCheckpoint.
func parseCheckpoint(b []byte) (*parsedCheckpoint, error) {
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: no header line", errCheckpoint)
	case string(line) == checkpointHeader:
	case bytes.HasPrefix(line, []byte(checkpointFormat)):
		return nil, fmt.Errorf("%w: unknown version %q", errCheckpoint, line[len(checkpointFormat):min(len(line), len(checkpointFormat)+16)])
	default:
		return nil, fmt.Errorf("%w: not a checkpoint", errCheckpoint)
	}
	cp := &parsedCheckpoint{}
	for n := 2; ; n++ {
		line, next, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("%w: line %d: no sig line", errCheckpoint, n)
		}
		if s, isSig := bytes.CutPrefix(line, []byte("sig ")); isSig {
			if len(next) != 0 {
				return nil, fmt.Errorf("%w: line %d: bytes after the sig line", errCheckpoint, n)
			}
			sig, err := b64u.Decode(string(s))
			if err != nil || len(sig) != ed25519.SignatureSize {
				return nil, fmt.Errorf("%w: line %d: sig is not a b64u Ed25519 signature", errCheckpoint, n)
			}
			cp.body, cp.sig = b[:len(b)-len(rest)], sig
			return cp, nil
		}
		e, err := parseCheckpointRun(string(line))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", errCheckpoint, n, err)
		}
		if k := len(cp.entries); k > 0 && cp.entries[k-1].run >= e.run {
			return nil, fmt.Errorf("%w: line %d: runs not in increasing order", errCheckpoint, n)
		}
		cp.entries = append(cp.entries, e)
		rest = next
	}
}

// parseCheckpointRun reads "run <id> <size> <count> <prev> <root> <sum>".
func parseCheckpointRun(line string) (ckptEntry, error) {
	f := strings.Split(line, " ")
	if len(f) != 7 || f[0] != "run" {
		return ckptEntry{}, errors.New("not a run line")
	}
	e := ckptEntry{run: f[1], prev: f[4], root: f[5], sum: f[6]}
	if !validRunID(e.run) {
		return e, errors.New("not a run id")
	}
	size, okSize := canonicalUint(f[2])
	count, okCount := canonicalUint(f[3])
	if !okSize || !okCount || size < 1 || size > 1<<62 || count < 1 || count > size {
		return e, errors.New("size and count must be decimal, 1 <= count <= size")
	}
	e.size, e.count = int64(size), count
	if count == 1 && e.prev == noPrev {
		e.prev = ""
	} else if count == 1 || !b64u.ValidHash(e.prev) {
		return e, errors.New("prev must be - for the first record, else a b64u SHA-256 hash")
	}
	if !b64u.ValidHash(e.root) || !b64u.ValidHash(e.sum) {
		return e, errors.New("root and sum must be b64u SHA-256 hashes")
	}
	return e, nil
}

// canonicalUint parses a decimal without sign or leading zeros.
func canonicalUint(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && strconv.FormatUint(v, 10) == s
}

// checkpointEntries lists what Close's checkpoint covers: every run file
// on disk whose durable state is known (not failed, not removed) and that
// holds a record. Called after the writer stopped.
func (l *Log) checkpointEntries() []ckptEntry {
	var entries []ckptEntry
	for _, rl := range l.runs {
		if !rl.exists || rl.state == stateRemoved || rl.failed != nil || rl.dsize == 0 {
			continue
		}
		entries = append(entries, ckptEntry{run: rl.id, size: rl.dsize, count: rl.durable.Count, prev: rl.dprev,
			root: rl.durable.Root, sum: b64u.Encode(rl.sum.Sum(nil))})
	}
	slices.SortFunc(entries, func(a, b ckptEntry) int { return strings.Compare(a.run, b.run) })
	return entries
}

// writeCheckpoint signs and writes the checkpoint atomically: a temporary
// file, fsync, rename, directory fsync. Called by Close with the lock held.
func (l *Log) writeCheckpoint() error {
	if l.signCk == nil {
		return nil
	}
	body := appendCheckpointBody(nil, l.checkpointEntries())
	if len(body)+128 > maxCheckpointBytes {
		l.log.Warn("audit: too many run files for a start-up checkpoint; the next start verifies every record", "bytes", len(body))
		return nil
	}
	sig, err := l.signCk(checkpointMessage(body))
	if err != nil {
		return fmt.Errorf("audit: sign checkpoint: %w", err)
	}
	if !ed25519.Verify(l.ckKey, checkpointMessage(body), sig) {
		return errors.New("audit: sign checkpoint: the signature does not verify under the checkpoint key")
	}
	data := appendCheckpointSig(body, sig)
	f, err := os.CreateTemp(l.dir, checkpointTmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("audit: write checkpoint: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(l.dir, checkpointName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("audit: write checkpoint: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("audit: write checkpoint: %w", err)
	}
	return nil
}

// loadCheckpoint returns the runs a valid checkpoint covers, or nil when
// there is none to use (no key, no file, not the attester's): then every
// record is verified. An error (the checkpoint cannot be read) stops Open.
func (l *Log) loadCheckpoint() (map[string]ckptEntry, error) {
	path := filepath.Join(l.dir, checkpointName)
	// Opening a FIFO would wait for a writer for ever; a symlink or a
	// directory is nothing the attester writes. It could not check.
	if info, err := os.Lstat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("audit: read checkpoint: %s is not a regular file (%v)", checkpointName, info.Mode().Type())
	}
	b, err := bounded.ReadFile(path, maxCheckpointBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		l.log.Info("audit: no start-up checkpoint (first start or no clean shutdown): verifying every record")
		return nil, nil
	case errors.Is(err, bounded.ErrTooLarge):
		l.log.Warn("audit: start-up checkpoint ignored: verifying every record", "err", err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("audit: read checkpoint: %w", err)
	case l.ckKey == nil:
		l.log.Info("audit: no checkpoint key: verifying every record")
		return nil, nil
	}
	cp, err := parseCheckpoint(b)
	if err == nil && !ed25519.Verify(l.ckKey, checkpointMessage(cp.body), cp.sig) {
		err = fmt.Errorf("%w: its signature does not verify under the checkpoint key", errCheckpoint)
	}
	if err != nil {
		l.log.Warn("audit: start-up checkpoint ignored: verifying every record", "err", err)
		return nil, nil
	}
	m := make(map[string]ckptEntry, len(cp.entries))
	for _, e := range cp.entries {
		m[e.run] = e
	}
	return m, nil
}

// dropCheckpoint removes the checkpoint, and any left by a Close that
// did not finish, before the log takes a record: once the files can grow
// or be removed, no checkpoint may describe them.
func (l *Log) dropCheckpoint() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("audit: remove checkpoint: %w", err)
	}
	removed := false
	for _, e := range ents {
		if name := e.Name(); name == checkpointName || strings.HasPrefix(name, checkpointTmpPrefix) {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("audit: remove checkpoint: %w", err)
			}
			removed = true
		}
	}
	if removed {
		if err := syncDir(l.dir); err != nil {
			return fmt.Errorf("audit: remove checkpoint: %w", err)
		}
	}
	return nil
}

// checkCheckpointed checks that f still holds what the checkpoint entry
// e says, leaving the digest of its first e.size bytes in sum: they hash
// to e.sum, and the line ending at byte e.size verifies as record e.count
// after a record with hash e.prev and has hash e.root. Errors wrap
// errCheckpointStale, except read failures.
func checkCheckpointed(f *os.File, e ckptEntry, sum hash.Hash) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.Size() < e.size {
		return fmt.Errorf("%w: %d bytes, the checkpoint says %d", errCheckpointStale, info.Size(), e.size)
	}
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, e.size)); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if b64u.Encode(sum.Sum(nil)) != e.sum {
		return fmt.Errorf("%w: its first %d bytes are not those the checkpoint covers", errCheckpointStale, e.size)
	}
	// The last line with its '\n', and the '\n' before it.
	buf := make([]byte, min(e.size, auditrec.MaxLineBytes+2))
	off := e.size - int64(len(buf))
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	start := bytes.LastIndexByte(buf[:len(buf)-1], '\n') + 1
	switch {
	case buf[len(buf)-1] != '\n', start == 0 && off > 0:
		return fmt.Errorf("%w: no record ends at byte %d", errCheckpointStale, e.size)
	case e.count == 1 && off+int64(start) != 0:
		return fmt.Errorf("%w: record 1 does not start the file", errCheckpointStale)
	}
	c := auditrec.Chain{Root: e.prev, Count: e.count - 1}
	if _, err := c.Next(buf[start : len(buf)-1]); err != nil || c.Root != e.root {
		return fmt.Errorf("%w: the record ending at byte %d is not record %d of the checkpoint", errCheckpointStale, e.size, e.count)
	}
	return nil
}
