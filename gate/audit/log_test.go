//go:build unix

package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/wire/auditrec"
)

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	if opts.Now == nil {
		opts.Now = newClock().now
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func record(t testing.TB, l *Log, run string, i int) uint64 {
	t.Helper()
	seq, err := l.Record(run, entry(i))
	if err != nil {
		t.Fatalf("Record(%s, %d): %v", run, i, err)
	}
	return seq
}

// openWithRecords opens a log in dir with the default options and records
// n entries in run_a.
func openWithRecords(t testing.TB, dir string, n int) *Log {
	t.Helper()
	l := openLog(t, dir, Options{})
	for i := range n {
		record(t, l, "run_a", i)
	}
	return l
}

// snapshot reads a run's log through Snapshot, verifies it, and checks it
// against Root.
func snapshot(t testing.TB, l *Log, run string) ([]byte, uint64) {
	t.Helper()
	s, err := l.Snapshot(run)
	if err != nil {
		t.Fatalf("Snapshot(%s): %v", run, err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	root, count, err := auditrec.Verify(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("run %s does not verify: %v", run, err)
	}
	if root != s.Root || count != s.Count || int64(buf.Len()) != s.Size {
		t.Fatalf("snapshot headers %s/%d/%d, body %s/%d/%d", s.Root, s.Count, s.Size, root, count, buf.Len())
	}
	r, c, err := l.root(run)
	if err != nil || r != root || c != count {
		t.Fatalf("Root(%s) = %s/%d %v, body %s/%d", run, r, c, err, root, count)
	}
	return buf.Bytes(), count
}

func TestLogPerRunChains(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	for i := range 5 {
		if seq := record(t, l, "run_a", i); seq != uint64(i+1) {
			t.Fatalf("run_a seq %d", seq)
		}
	}
	for i := range 3 {
		if seq := record(t, l, "run_b", 10+i); seq != uint64(i+1) {
			t.Fatalf("run_b seq %d: each run has its own chain", seq)
		}
	}
	a, na := snapshot(t, l, "run_a")
	b, nb := snapshot(t, l, "run_b")
	if na != 5 || nb != 3 {
		t.Fatalf("counts %d %d", na, nb)
	}
	// Each run's view holds only its records.
	if bytes.Contains(a, []byte(`"turn-2"`)) || !bytes.Contains(b, []byte(`"turn-2"`)) {
		t.Fatal("records leaked between runs")
	}
	if s, err := l.Snapshot("run_c"); err != nil || s.Root != "" || s.Count != 0 || s.Size != 0 {
		t.Fatalf("run without records: %+v %v", s, err)
	}
	for _, bad := range []string{"", "../x", "a/b", "run.x", strings.Repeat("r", maxRunIDBytes+1)} {
		if _, err := l.Record(bad, entry(1)); !errors.Is(err, errInvalidRun) {
			t.Fatalf("run id %q: %v", bad, err)
		}
	}
	if _, err := l.Record("run_a", Entry{Decision: "maybe"}); !errors.Is(err, errInvalidEntry) {
		t.Fatalf("invalid entry: %v", err)
	}
	if err := l.Healthy(); err != nil {
		t.Fatal(err)
	}
}

func TestLogContinuesChainAfterReopen(t *testing.T) {
	dir := t.TempDir()
	l := openWithRecords(t, dir, 3)
	root1, _, _ := l.root("run_a")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, Options{})
	if r, c, _ := l2.root("run_a"); r != root1 || c != 3 {
		t.Fatalf("recovered %s/%d, want %s/3", r, c, root1)
	}
	if seq := record(t, l2, "run_a", 3); seq != 4 {
		t.Fatalf("continued seq %d, want 4", seq)
	}
	if _, n := snapshot(t, l2, "run_a"); n != 4 {
		t.Fatalf("count %d", n)
	}
}

func TestLogCutsTornRecord(t *testing.T) {
	dir := t.TempDir()
	l := openWithRecords(t, dir, 3)
	l.Close()
	path := filepath.Join(dir, "run_a.jsonl")
	good, _ := os.ReadFile(path)
	ls := lines(good)
	// A crash during the write of a fourth record: part of a line.
	for _, torn := range [][]byte{ls[2][:40], bytes.TrimSuffix(ls[1], []byte("\n")), {0, 0, 0}} {
		if err := os.WriteFile(path, append(bytes.Clone(good), torn...), 0o600); err != nil {
			t.Fatal(err)
		}
		l2 := openLog(t, dir, Options{})
		if _, c, _ := l2.root("run_a"); c != 3 {
			t.Fatalf("count after cut %d", c)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, good) {
			t.Fatal("torn record not cut off")
		}
		if seq := record(t, l2, "run_a", 9); seq != 4 {
			t.Fatalf("seq after cut %d", seq)
		}
		snapshot(t, l2, "run_a")
		l2.Close()
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogRefusesCorruptRecordAtOpen(t *testing.T) {
	dir := t.TempDir()
	l := openWithRecords(t, dir, 4)
	record(t, l, "run_b", 1)
	l.Close()
	path := filepath.Join(dir, "run_a.jsonl")
	good, _ := os.ReadFile(path)
	ls := lines(good)
	join := func(p ...[]byte) []byte { return bytes.Join(p, nil) }
	cases := map[string][]byte{
		"reason changed":   join(ls[0], bytes.Replace(ls[1], []byte("reason 1"), []byte("reason 7"), 1), ls[2], ls[3]),
		"record removed":   join(ls[0], ls[2], ls[3]),
		"garbage line":     join(ls[0], []byte("{}\n"), ls[1]),
		"zeros then line":  join(ls[0], make([]byte, 20), ls[1]),
		"torn in middle":   join(ls[0], ls[1][:30], ls[2]),
		"overlong line":    join(ls[0], bytes.Repeat([]byte("x"), auditrec.MaxLineBytes+5), []byte("\n")),
		"first record cut": join(ls[1], ls[2]),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := Open(dir, Options{})
			if !errors.Is(err, errCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			// Nothing was changed on disk: the operator sees what was there.
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("corrupt log was modified")
			}
		})
	}
	// A file whose name is not a run id is refused too.
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.name.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, errCorrupt) {
		t.Fatalf("bad name: %v", err)
	}
}

func TestLogSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	openLog(t, dir, Options{})
	if l, err := Open(dir, Options{}); !errors.Is(err, errLocked) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("second Open: %v", err)
	}
}

func TestLogRunCapDeniesOnlyThatRun(t *testing.T) {
	const maxRun = 4 << 10
	l := openLog(t, t.TempDir(), Options{MaxRunBytes: maxRun, MaxTotalBytes: 3 * maxRun})
	n := 0
	for {
		_, err := l.Record("run_a", entry(n))
		if errors.Is(err, errRunFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n > 1000 {
			t.Fatal("cap not enforced")
		}
	}
	data, count := snapshot(t, l, "run_a")
	if count != uint64(n) || len(data) > maxRun {
		t.Fatalf("full run: %d records, %d bytes", count, len(data))
	}
	// Other runs go on; the full run stays refused; the log is healthy.
	record(t, l, "run_b", 1)
	if _, err := l.Record("run_a", entry(1)); !errors.Is(err, errRunFull) {
		t.Fatalf("full run accepted a record: %v", err)
	}
	if err := l.Healthy(); err != nil {
		t.Fatalf("healthy: %v", err)
	}
}

func TestLogBudgetAndRotation(t *testing.T) {
	const maxRun = 4 << 10
	l := openLog(t, t.TempDir(), Options{MaxRunBytes: maxRun, MaxTotalBytes: 2 * maxRun})
	record(t, l, "run_a", 1)
	record(t, l, "run_b", 1)
	// Two runs reserve the whole budget: a third cannot start, the others
	// keep recording up to their own caps.
	if _, err := l.Record("run_c", entry(1)); !errors.Is(err, errFull) {
		t.Fatalf("third run: %v", err)
	}
	if err := l.Healthy(); !errors.Is(err, errFull) {
		t.Fatalf("Healthy with a full budget: %v", err)
	}
	record(t, l, "run_a", 2)
	record(t, l, "run_b", 2)
	// Closing a run frees its unused reservation, and its log is removed
	// (oldest closed first) when a new run needs the space.
	if err := l.CloseRun("run_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record("run_a", entry(3)); !errors.Is(err, errRunClosed) {
		t.Fatalf("closed run: %v", err)
	}
	snapshot(t, l, "run_a") // still readable
	if err := l.Healthy(); err != nil {
		t.Fatalf("Healthy after close: %v", err)
	}
	record(t, l, "run_c", 1)
	if _, err := l.Snapshot("run_a"); !errors.Is(err, errRunClosed) {
		t.Fatalf("removed run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, "run_a.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed run's file: %v", err)
	}
	if _, err := l.Record("run_a", entry(4)); !errors.Is(err, errRunClosed) {
		t.Fatalf("removed run restarted: %v", err)
	}
	snapshot(t, l, "run_b")
	snapshot(t, l, "run_c")
}

func TestLogConcurrentGroupCommit(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	runs := []string{"run_a", "run_b", "run_c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]map[uint64]bool{}
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				run := runs[(g+i)%len(runs)]
				seq, err := l.Record(run, entry(g*100+i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[run] == nil {
					seen[run] = map[uint64]bool{}
				}
				if seen[run][seq] {
					t.Errorf("seq %d of %s acknowledged twice", seq, run)
				}
				seen[run][seq] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := uint64(0)
	for _, run := range runs {
		_, n := snapshot(t, l, run)
		if n != uint64(len(seen[run])) {
			t.Fatalf("%s: %d records, %d acknowledged", run, n, len(seen[run]))
		}
		total += n
	}
	if total != 16*40 {
		t.Fatalf("total %d", total)
	}
	if st := l.statsNow(); st.Records != total || st.Syncs > st.Records || st.Commits > st.Records {
		t.Fatalf("stats %+v", st)
	}
}

// TestLogOnCommit checks the commit figures Options.OnCommit reports
// against what the files hold: every record and byte in exactly one
// commit, each commit's files at most its records, the commit at least
// as long as its slowest write and fsync.
func TestLogOnCommit(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var commits, records, nbytes, syncs int
	bad := ""
	l := openLog(t, dir, Options{OnCommit: func(recs, files, n int, wait, write, sync, total time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		commits, records, nbytes, syncs = commits+1, records+recs, nbytes+n, syncs+files
		if recs < 1 || files < 1 || files > recs || n < recs || wait < 0 || write <= 0 || sync <= 0 || total < max(write, sync) {
			bad = fmt.Sprint(recs, files, n, wait, write, sync, total)
		}
	}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := l.Record([]string{"run_a", "run_b"}[(g+i)%2], entry(g*100+i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, run := range []string{"run_a", "run_b"} {
		st, err := os.Stat(filepath.Join(dir, run+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	st := l.statsNow()
	if bad != "" || records != 200 || int64(nbytes) != size || uint64(commits) != st.Commits || uint64(syncs) != st.Syncs {
		t.Fatalf("commits %d (log: %d), records %d, bytes %d of %d, fsyncs %d (log: %d); bad commit: %s",
			commits, st.Commits, records, nbytes, size, syncs, st.Syncs, bad)
	}
}

func TestLogClosed(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	record(t, l, "run_a", 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record("run_a", entry(2)); !errors.Is(err, errClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := l.Healthy(); !errors.Is(err, errClosed) {
		t.Fatalf("Healthy after Close: %v", err)
	}
	if _, err := Open(t.TempDir(), Options{MaxRunBytes: 10, MaxTotalBytes: 5}); err == nil {
		t.Fatal("contradictory sizes accepted")
	}
}

// crashChildEnv names the directory the crash child writes to.
const crashChildEnv = "CLAWEA_AUDIT_CRASH_CHILD_DIR"

// TestMain runs the crash child (crashChild) instead of the tests when the
// environment asks for it.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild is the process TestCrashKeepsAcknowledgedRecords kills: it
// opens the log in dir with a checkpoint key, as the attester does,
// records from 16 goroutines and prints "ack <run> <seq>" for every
// acknowledged record, until it is killed.
func crashChild(dir string) {
	l, err := Open(dir, ckOpts(1))
	if err != nil {
		fmt.Fprintln(os.Stdout, "open error:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			run := fmt.Sprintf("run_%d", g%3)
			for i := 0; ; i++ {
				seq, err := l.Record(run, entry(g*1_000_000+i))
				if err != nil {
					fmt.Fprintln(os.Stdout, "record error:", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %s %d\n", run, seq)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrashKeepsAcknowledgedRecords kills (SIGKILL) a process that records
// under load, then reopens its log: every acknowledged record is there, the
// chains verify, and they continue.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	dir := t.TempDir()
	for round := range 2 {
		acked := crashRound(t, dir, 300+round*200)
		l := openLog(t, dir, Options{})
		for run, max := range acked {
			_, n := snapshot(t, l, run)
			if n < max {
				t.Fatalf("round %d: %s has %d records, but seq %d was acknowledged", round, run, n, max)
			}
		}
		// The chains continue after the crash.
		for run := range acked {
			_, before, _ := l.root(run)
			if seq := record(t, l, run, 1); seq != before+1 {
				t.Fatalf("continued seq %d after %d", seq, before)
			}
		}
		l.Close()
	}
}

// crashRound runs the child until it acknowledged at least n records, kills
// it and returns the highest acknowledged seq per run.
func crashRound(t *testing.T, dir string, n int) map[string]uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	count := 0
	killed := false
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ack" {
			if strings.Contains(line, "error") {
				t.Errorf("child: %s", line)
			}
			continue
		}
		seq, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("child line %q", line)
		}
		acked[f[1]] = max(acked[f[1]], seq)
		count++
		if count >= n && !killed {
			// Kill mid-load; lines already written are still read.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v", err)
	}
	ee, ok := errors.AsType[*exec.ExitError](err)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	if len(acked) == 0 {
		t.Fatal("no acknowledged records")
	}
	return acked
}

func TestLogWriteFailureIsStickyPerRun(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	// A directory where run_x's file would be: creating the file fails
	// (even as root).
	if err := os.Mkdir(filepath.Join(dir, "run_x.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record("run_x", entry(1)); !errors.Is(err, errRunFailed) {
		t.Fatalf("first record: %v", err)
	}
	if _, err := l.Record("run_x", entry(2)); !errors.Is(err, errRunFailed) {
		t.Fatalf("sticky: %v", err)
	}
	if _, c, _ := l.root("run_x"); c != 0 {
		t.Fatalf("failed run has %d durable records", c)
	}
	// Readiness sees the failure; other runs still record.
	if err := l.Healthy(); !errors.Is(err, errRunFailed) {
		t.Fatalf("Healthy: %v", err)
	}
	record(t, l, "run_y", 1)
	snapshot(t, l, "run_y")
}

// FuzzRecover: whatever bytes a run file holds, Open either refuses them
// (errCorrupt, file unchanged) or keeps exactly a prefix that verifies, and
// cuts only an unterminated last line.
func FuzzRecover(f *testing.F) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{Now: newClock().now})
	for i := range 3 {
		w.Append(entry(i))
	}
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(append(bytes.Clone(good), "{\"a"...))
	f.Add([]byte("{}\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "run_f.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{})
		got, _ := os.ReadFile(path)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("unexpected error %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("refused file was modified")
			}
			return
		}
		defer l.Close()
		if !bytes.HasPrefix(data, got) || bytes.IndexByte(data[len(got):], '\n') >= 0 {
			t.Fatalf("kept %q of %q", got, data)
		}
		root, n, verr := auditrec.Verify(bytes.NewReader(got))
		r, c, _ := l.root("run_f")
		if verr != nil || root != r || n != c {
			t.Fatalf("kept prefix does not verify to the recovered head: %v", verr)
		}
	})
}

// BenchmarkLogRecord: durable records from 64 concurrent callers on 4 runs
// (group commit); reports records per fsync. Compare ns/op with
// BenchmarkBaselineFsync in package gate (one fsync per record).
func BenchmarkLogRecord(b *testing.B) {
	l := openLog(b, b.TempDir(), Options{MaxRunBytes: 1 << 30, MaxTotalBytes: 8 << 30})
	b.SetParallelism(32)
	var n sync.Mutex
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		n.Lock()
		run := fmt.Sprintf("run_%d", next%4)
		next++
		n.Unlock()
		e := entry(1)
		for pb.Next() {
			if _, err := l.Record(run, e); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := l.statsNow()
	if st.Syncs > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Syncs), "records/fsync")
		b.ReportMetric(float64(st.Records)/float64(st.Commits), "records/commit")
	}
}

func TestLogBudgetCountsRecoveredRuns(t *testing.T) {
	const maxRun = 4 << 10
	opts := Options{MaxRunBytes: maxRun}
	dir := t.TempDir()
	l := openLog(t, dir, opts)
	record(t, l, "run_a", 1)
	record(t, l, "run_b", 1)
	l.Close()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "run_a.jsonl"), old, old); err != nil {
		t.Fatal(err)
	}
	// Room for two full runs and one of the recovered ones.
	st, err := os.Stat(filepath.Join(dir, "run_b.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxTotalBytes = 2*maxRun + st.Size() + 100
	l = openLog(t, dir, opts)
	record(t, l, "run_c", 1)
	// run_d needs a full cap: the oldest recovered run is removed for it.
	record(t, l, "run_d", 1)
	if _, err := l.Snapshot("run_a"); !errors.Is(err, errRunClosed) {
		t.Fatalf("oldest recovered run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run_b.jsonl")); err != nil {
		t.Fatalf("newer recovered run removed: %v", err)
	}
	// Continuing run_b needs the rest of its cap, which only removing
	// run_b itself could free: refused, and run_b is intact.
	if _, err := l.Record("run_b", entry(2)); !errors.Is(err, errFull) {
		t.Fatalf("continuing run_b: %v", err)
	}
	if _, n := snapshot(t, l, "run_b"); n != 1 {
		t.Fatalf("run_b has %d records", n)
	}
	// Closing run_c frees its reservation: run_b continues its chain.
	if err := l.CloseRun("run_c"); err != nil {
		t.Fatal(err)
	}
	if seq := record(t, l, "run_b", 2); seq != 2 {
		t.Fatalf("run_b continued at %d", seq)
	}
}

// BenchmarkLogRecordOpenLoop offers durable records at a fixed rate (5,000
// a second on 4 runs, one goroutine per record, as callers with a
// connection each) and reports the latency percentiles, counted from each
// record's scheduled time: what group commit adds to a decision at a load
// below its capacity, and the CPU it costs per record (this process's,
// which includes the benchmark's own goroutines). Run it with
// -benchtime=Nx (N records).
func BenchmarkLogRecordOpenLoop(b *testing.B) {
	const rate = 5000
	l := openLog(b, b.TempDir(), Options{MaxRunBytes: 1 << 30, MaxTotalBytes: 8 << 30})
	lats := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	e := entry(1)
	b.ResetTimer()
	cpu0, start := loadstat.SelfCPU(b), time.Now()
	for i := range b.N {
		due := start.Add(time.Duration(i) * time.Second / rate)
		time.Sleep(time.Until(due))
		wg.Go(func() {
			if _, err := l.Record(fmt.Sprintf("run_%d", i%4), e); err != nil {
				b.Error(err)
			}
			lats[i] = time.Since(due)
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(float64(loadstat.Percentile(lats, 500).Microseconds()), "p50-µs")
	b.ReportMetric(float64(loadstat.Percentile(lats, 990).Microseconds()), "p99-µs")
	st := l.statsNow()
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Commits), "records/commit")
	}
	b.ReportMetric(float64((loadstat.SelfCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/rec")
}
