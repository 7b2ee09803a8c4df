//go:build unix

package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/bintest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/auditrec"
)

// ckOpts returns Options whose checkpoint key is made from seed.
func ckOpts(seed byte) Options {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return Options{
		CheckpointKey:  priv.Public().(ed25519.PublicKey),
		SignCheckpoint: func(m []byte) ([]byte, error) { return ed25519.Sign(priv, m), nil },
	}
}

// ckState writes a directory and closes it cleanly with key 1: run_a has
// 10 records, run_b 1, run_c 5 (closed). It returns the directory.
func ckState(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	l, _, err := openCk(t, dir, ckOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		record(t, l, "run_a", i)
	}
	record(t, l, "run_b", 100)
	for i := range 5 {
		record(t, l, "run_c", 200+i)
	}
	if err := l.CloseRun("run_c"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openCk opens dir with opts and returns the log (closed at cleanup), what
// Open logged, and its error.
func openCk(t testing.TB, dir string, opts Options) (*Log, string, error) {
	t.Helper()
	var logs bintest.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if opts.Now == nil {
		opts.Now = newClock().now
	}
	l, err := Open(dir, opts)
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return l, logs.String(), err
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// alterRecord changes one byte of record n (1-based) of a run file, in
// its reason, keeping the length: the file no longer verifies.
func alterRecord(t testing.TB, path string, n int) {
	t.Helper()
	b := testfile.Read(t, path)
	ls := lines(b)
	off := 0
	for _, l := range ls[:n-1] {
		off += len(l)
	}
	i := bytes.Index(ls[n-1], []byte(`"reason":"reason `))
	if i < 0 {
		t.Fatalf("record %d has no reason", n)
	}
	p := off + i + len(`"reason":"reason `)
	b[p] = '0' + (b[p]-'0'+1)%10
	writeFile(t, path, b)
}

func ckExists(t testing.TB, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, checkpointName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestCheckpointWrittenAtCloseRemovedAtOpen: Close writes a checkpoint
// signed with the key that covers every run file (length, count, last two
// hashes, digest); Open uses it, removes it before any record, and the
// chains continue.
func TestCheckpointWrittenAtCloseRemovedAtOpen(t *testing.T) {
	dir := ckState(t)
	cp, err := parseCheckpoint(testfile.Read(t, filepath.Join(dir, checkpointName)))
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(ckOpts(1).CheckpointKey, checkpointMessage(cp.body), cp.sig) {
		t.Fatal("the checkpoint's signature does not verify")
	}
	want := map[string]uint64{"run_a": 10, "run_b": 1, "run_c": 5}
	if len(cp.entries) != len(want) {
		t.Fatalf("checkpoint covers %d runs, want %d", len(cp.entries), len(want))
	}
	for _, e := range cp.entries {
		b := testfile.Read(t, filepath.Join(dir, e.run+fileSuffix))
		root, count, err := auditrec.Verify(bytes.NewReader(b))
		ls := lines(b)
		prev := ""
		if count > 1 {
			r, _, _ := auditrec.Verify(bytes.NewReader(bytes.Join(ls[:len(ls)-1], nil)))
			prev = r
		}
		sum := sha256.Sum256(b)
		if err != nil || count != want[e.run] || e.count != count || e.root != root || e.prev != prev || e.size != int64(len(b)) || e.sum != b64u.Encode(sum[:]) {
			t.Fatalf("%s: checkpoint %+v, file %d bytes %d records %s (%v)", e.run, e, len(b), count, root, err)
		}
	}

	l, logs, err := openCk(t, dir, ckOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "start-up checkpoint verified") || !strings.Contains(logs, "records_covered=16") {
		t.Fatalf("the checkpoint was not used: %s", logs)
	}
	if ckExists(t, dir) {
		t.Fatal("the checkpoint outlived Open")
	}
	if seq := record(t, l, "run_a", 10); seq != 11 {
		t.Fatalf("run_a continued at %d", seq)
	}
	if seq := record(t, l, "run_b", 101); seq != 2 {
		t.Fatalf("run_b continued at %d", seq)
	}
	snapshot(t, l, "run_a")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err = parseCheckpoint(testfile.Read(t, filepath.Join(dir, checkpointName)))
	if err != nil || cp.entries[0].run != "run_a" || cp.entries[0].count != 11 {
		t.Fatalf("checkpoint after the second Close: %+v %v", cp, err)
	}
}

// TestCheckpointCatchesEditsInItsRange: an offline edit of any byte the
// checkpoint covers (the same length, the last record intact), a cut
// after a complete record (which the full check alone would accept), a
// changed last record, a missing or swapped file: a signed checkpoint the
// files contradict stops Open, which changes nothing.
func TestCheckpointCatchesEditsInItsRange(t *testing.T) {
	for name, attack := range map[string]func(t *testing.T, dir string){
		"record in the middle altered": func(t *testing.T, dir string) { alterRecord(t, filepath.Join(dir, "run_a.jsonl"), 3) },
		"last record altered":          func(t *testing.T, dir string) { alterRecord(t, filepath.Join(dir, "run_a.jsonl"), 10) },
		"cut after a complete record": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "run_a.jsonl")
			ls := lines(testfile.Read(t, p))
			writeFile(t, p, bytes.Join(ls[:9], nil))
		},
		"cut inside a record": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "run_c.jsonl")
			b := testfile.Read(t, p)
			writeFile(t, p, b[:len(b)-5])
		},
		"file removed": func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "run_b.jsonl")); err != nil {
				t.Fatal(err)
			}
		},
		"file replaced by another run's": func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "run_a.jsonl"), testfile.Read(t, filepath.Join(dir, "run_c.jsonl")))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := ckState(t)
			attack(t, dir)
			before := snapshotDir(t, dir)
			_, _, err := openCk(t, dir, ckOpts(1))
			if !errors.Is(err, errCorrupt) || !errors.Is(err, errCheckpointStale) {
				t.Fatalf("Open: %v", err)
			}
			if after := snapshotDir(t, dir); !equalDirs(before, after) {
				t.Fatal("a refused Open changed the directory")
			}
		})
	}
}

// snapshotDir reads every file of dir but LOCK.
func snapshotDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		if e.Name() != lockName {
			m[e.Name()] = testfile.Read(t, filepath.Join(dir, e.Name()))
		}
	}
	return m
}

func equalDirs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// TestCheckpointNotTheAttestersFallsBack: a checkpoint that is altered,
// signed by another key, of an unknown version, cut or garbage is not
// used: Open verifies every record (so an edited record is still caught,
// as a record that does not verify) and, when they verify, starts and
// removes it.
func TestCheckpointNotTheAttestersFallsBack(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func([]byte) []byte
		key  byte
	}{
		"byte flipped": {edit: func(b []byte) []byte {
			i := bytes.Index(b, []byte("run_a ")) + len("run_a ")
			b[i]++ // the size
			return b
		}, key: 1},
		"another key":     {edit: func(b []byte) []byte { return b }, key: 2},
		"unknown version": {edit: func(b []byte) []byte { return bytes.Replace(b, []byte("/v1\n"), []byte("/v2\n"), 1) }, key: 1},
		"no sig line":     {edit: func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("sig "))] }, key: 1},
		"sig of empty":    {edit: func(b []byte) []byte { return []byte(checkpointHeader + "\nsig " + strings.Repeat("A", 86) + "\n") }, key: 1},
		"empty":           {edit: func([]byte) []byte { return nil }, key: 1},
	} {
		t.Run(name, func(t *testing.T) {
			dir := ckState(t)
			ck := filepath.Join(dir, checkpointName)
			writeFile(t, ck, tc.edit(testfile.Read(t, ck)))
			run := filepath.Join(dir, "run_a.jsonl")
			orig := testfile.Read(t, run)
			alterRecord(t, run, 3)
			_, logs, err := openCk(t, dir, ckOpts(tc.key))
			if !errors.Is(err, errCorrupt) || errors.Is(err, errCheckpointStale) || !strings.Contains(err.Error(), "record 3") {
				t.Fatalf("Open over an edited record: %v", err)
			}
			if !strings.Contains(logs, "checkpoint ignored") {
				t.Fatalf("logs: %s", logs)
			}
			writeFile(t, run, orig)
			if _, _, err := openCk(t, dir, ckOpts(tc.key)); err != nil {
				t.Fatalf("Open: %v", err)
			}
			if ckExists(t, dir) {
				t.Fatal("the checkpoint outlived Open")
			}
		})
	}
}

// TestCheckpointTail: records after a checkpoint (an older checkpoint put
// back) are verified as without one: valid ones continue the chain; an
// altered one or a complete junk line stops Open; a torn one is cut.
func TestCheckpointTail(t *testing.T) {
	dir := ckState(t)
	ck := filepath.Join(dir, checkpointName)
	old := testfile.Read(t, ck)
	l, _, err := openCk(t, dir, ckOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		record(t, l, "run_a", 10+i)
	}
	l.Close()
	run := filepath.Join(dir, "run_a.jsonl")
	grown := testfile.Read(t, run)

	writeFile(t, ck, old)
	l, logs, err := openCk(t, dir, ckOpts(1))
	if err != nil || !strings.Contains(logs, "records_covered=16 records_verified=3") {
		t.Fatalf("Open: %v, %s", err, logs)
	}
	if _, n := snapshot(t, l, "run_a"); n != 13 {
		t.Fatalf("run_a has %d records", n)
	}
	l.Close()

	for name, tc := range map[string]struct {
		edit func([]byte) []byte
		err  error
	}{
		"record after it altered": {edit: func(b []byte) []byte {
			writeFile(t, run, b)
			alterRecord(t, run, 12)
			return testfile.Read(t, run)
		}, err: errCorrupt},
		"junk line appended": {edit: func(b []byte) []byte { return append(b, "{}\n"...) }, err: errCorrupt},
		"torn junk appended": {edit: func(b []byte) []byte { return append(b, `{"audit_ver`...) }},
	} {
		t.Run(name, func(t *testing.T) {
			writeFile(t, ck, old)
			writeFile(t, run, tc.edit(bytes.Clone(grown)))
			_, _, err := openCk(t, dir, ckOpts(1))
			if tc.err != nil {
				if !errors.Is(err, tc.err) || errors.Is(err, errCheckpointStale) {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := testfile.Read(t, run); !bytes.Equal(got, grown) {
				t.Fatalf("torn record not cut: %d bytes, want %d", len(got), len(grown))
			}
		})
	}
}

// TestCheckpointGoneAfterKill: a process killed (SIGKILL) after it opened
// the log leaves no checkpoint, whatever it appended, so the next Open
// verifies every record and an edit inside the old checkpoint's range is
// caught as a record that does not verify.
func TestCheckpointGoneAfterKill(t *testing.T) {
	dir := ckState(t)
	crashRound(t, dir, 100)
	if ckExists(t, dir) {
		t.Fatal("a checkpoint survived kill -9")
	}
	alterRecord(t, filepath.Join(dir, "run_a.jsonl"), 3)
	_, logs, err := openCk(t, dir, ckOpts(1))
	if !errors.Is(err, errCorrupt) || errors.Is(err, errCheckpointStale) || !strings.Contains(logs, "no start-up checkpoint") {
		t.Fatalf("Open: %v; %s", err, logs)
	}
}

// TestCheckpointOptions: the key and the signer come together; a signer
// that fails or signs with another key leaves no checkpoint and Close
// reports it.
func TestCheckpointOptions(t *testing.T) {
	good := ckOpts(1)
	for name, o := range map[string]Options{
		"key alone":    {CheckpointKey: good.CheckpointKey},
		"signer alone": {SignCheckpoint: good.SignCheckpoint},
		"short key":    {CheckpointKey: good.CheckpointKey[:16], SignCheckpoint: good.SignCheckpoint},
	} {
		if _, err := Open(t.TempDir(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, sign := range map[string]func([]byte) ([]byte, error){
		"failing signer": func([]byte) ([]byte, error) { return nil, errors.New("no key") },
		"other key":      ckOpts(2).SignCheckpoint,
	} {
		dir := t.TempDir()
		l, _, err := openCk(t, dir, Options{CheckpointKey: good.CheckpointKey, SignCheckpoint: sign})
		if err != nil {
			t.Fatal(err)
		}
		record(t, l, "run_a", 1)
		if err := l.Close(); err == nil || ckExists(t, dir) {
			t.Errorf("%s: Close %v, checkpoint written %v", name, err, ckExists(t, dir))
		}
	}
}

// TestCheckpointLeavesOutFailedRuns: a run whose write failed is not
// covered (its file's state is unknown); the others are.
func TestCheckpointLeavesOutFailedRuns(t *testing.T) {
	dir := t.TempDir()
	l, _, err := openCk(t, dir, ckOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "run_x.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record("run_x", entry(1)); !errors.Is(err, errRunFailed) {
		t.Fatalf("Record: %v", err)
	}
	record(t, l, "run_y", 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cp, err := parseCheckpoint(testfile.Read(t, filepath.Join(dir, checkpointName)))
	if err != nil || len(cp.entries) != 1 || cp.entries[0].run != "run_y" {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
}

// FuzzRecoverWithCheckpoint: whatever bytes a run file holds under a valid
// checkpoint that covers its first two records, Open either refuses them
// (errCorrupt, file unchanged) or keeps a prefix that verifies record by
// record: the checkpoint never lets through what the full check refuses.
func FuzzRecoverWithCheckpoint(f *testing.F) {
	buf, _ := writeLog(f, 4)
	good := buf.Bytes()
	ls := lines(good)
	covered := bytes.Join(ls[:2], nil)
	f.Add(good)
	f.Add(covered)
	f.Add(good[:len(good)-7])
	f.Add(append(bytes.Clone(good), "{}\n"...))
	f.Add(covered[:len(covered)-1])
	root, _, _ := auditrec.Verify(bytes.NewReader(covered))
	prev, _, _ := auditrec.Verify(bytes.NewReader(ls[0]))
	sum := sha256.Sum256(covered)
	body := appendCheckpointBody(nil, []ckptEntry{{run: "run_f", size: int64(len(covered)), count: 2, prev: prev, root: root, sum: b64u.Encode(sum[:])}})
	opts := ckOpts(1)
	sig, _ := opts.SignCheckpoint(checkpointMessage(body))
	ck := appendCheckpointSig(body, sig)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "run_f.jsonl")
		writeFile(t, path, data)
		writeFile(t, filepath.Join(dir, checkpointName), ck)
		l, err := Open(dir, opts)
		got := testfile.Read(t, path)
		if err != nil {
			if !errors.Is(err, errCorrupt) || !bytes.Equal(got, data) {
				t.Fatalf("refused with %v; file changed %v", err, !bytes.Equal(got, data))
			}
			return
		}
		defer l.Close()
		r, c, verr := auditrec.Verify(bytes.NewReader(got))
		lr, lc, _ := l.root("run_f")
		if verr != nil || !bytes.HasPrefix(got, covered) || !bytes.HasPrefix(data, got) || r != lr || c != lc {
			t.Fatalf("kept %q (%v) of %q", got, verr, data)
		}
	})
}

// TestConcurrentCommitsKeepWriteOrder records from 32 goroutines on three
// runs, closing one while records of the others are in flight (many group
// commits, one of them closing a file). Every acknowledged seq is durable,
// each run's snapshot holds exactly its acknowledged records, and the
// checkpoint Close writes (whose digests follow the records in the order
// they became durable) covers every record at the next start.
func TestConcurrentCommitsKeepWriteOrder(t *testing.T) {
	dir := t.TempDir()
	l, _, err := openCk(t, dir, ckOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	runs := []string{"run_a", "run_b", "run_c"}
	var mu sync.Mutex
	acked := map[string]int{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 30 {
				run := runs[(g+i)%2]
				if g%8 == 0 && i < 10 {
					run = "run_c"
				}
				if _, err := l.Record(run, entry(g*1000+i)); err != nil {
					if run == "run_c" && errors.Is(err, errRunClosed) {
						continue
					}
					t.Error(err)
					return
				}
				mu.Lock()
				acked[run]++
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Millisecond)
	if err := l.CloseRun("run_c"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	total := 0
	for _, run := range runs {
		if _, n := snapshot(t, l, run); n != uint64(acked[run]) {
			t.Fatalf("%s: %d durable records, %d acknowledged", run, n, acked[run])
		}
		total += acked[run]
	}
	if st := l.statsNow(); st.Records != uint64(total) {
		t.Fatalf("stats %+v for %d acknowledged records", st, total)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, logs, err := openCk(t, dir, ckOpts(1)); err != nil || !strings.Contains(logs, fmt.Sprintf("records_covered=%d ", total)) {
		t.Fatalf("the checkpoint does not cover the %d records: %v %s", total, err, logs)
	}
}
