package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/audittest"
	"github.com/clawea/attester/wire/auditrec"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(1500 * time.Millisecond)
	return c.t
}

func newClock() *clock { return &clock{t: time.Date(2026, 2, 12, 15, 30, 0, 0, time.UTC)} }

// entry is the i-th entry of a test log (shared with wire/auditrec).
var entry = audittest.Entry

func writeLog(t testing.TB, n int) (*bytes.Buffer, *Writer) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Now: newClock().now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	return &buf, w
}

// lines splits b into its lines, each with its newline.
func lines(b []byte) [][]byte { return slices.Collect(bytes.Lines(b)) }

func TestWriterRoundTrip(t *testing.T) {
	buf, w := writeLog(t, 10)
	wantRoot, wantCount := w.Root()
	root, count, err := auditrec.Verify(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if root != wantRoot || count != wantCount || count != 10 {
		t.Fatalf("got %s/%d, want %s/%d", root, count, wantRoot, wantCount)
	}
	// The first record's time comes from the injected clock.
	var first map[string]any
	if err := json.Unmarshal(lines(buf.Bytes())[0], &first); err != nil {
		t.Fatal(err)
	}
	if first["time"] != "2026-02-12T15:30:01.5Z" || first["seq"] != float64(1) || first["prev_hash_b64u"] != nil {
		t.Fatalf("first record %v", first)
	}
}

func TestConcurrentAppend(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Now: newClock().now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := w.Append(entry(g*100 + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	root, count, err := auditrec.Verify(&buf)
	wr, wc := w.Root()
	if err != nil || count != 200 || root != wr || wc != 200 {
		t.Fatalf("concurrent: %s %d %v", root, count, err)
	}
}

func TestResume(t *testing.T) {
	buf, w := writeLog(t, 3)
	root, count := w.Root()
	w2, err := NewWriter(buf, WriterOptions{Now: newClock().now, ResumeRoot: root, ResumeCount: count})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Append(entry(7)); err != nil {
		t.Fatal(err)
	}
	r2, c2 := w2.Root()
	got, n, err := auditrec.Verify(buf)
	if err != nil || n != 4 || got != r2 || c2 != 4 {
		t.Fatalf("resume: %s %d %v", got, n, err)
	}
	if _, err := NewWriter(buf, WriterOptions{ResumeRoot: root}); !errors.Is(err, errInvalidEntry) {
		t.Fatalf("root without count: %v", err)
	}
	if _, err := NewWriter(buf, WriterOptions{ResumeRoot: "x", ResumeCount: 1}); !errors.Is(err, errInvalidEntry) {
		t.Fatalf("bad root: %v", err)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrShortWrite
	}
	f.n--
	return len(p), nil
}

func TestWriterFailureIsSticky(t *testing.T) {
	fw := &failWriter{n: 1}
	w, _ := NewWriter(fw, WriterOptions{})
	if _, err := w.Append(entry(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(entry(2)); !errors.Is(err, errWriterFailed) {
		t.Fatalf("first failure: %v", err)
	}
	fw.n = 10
	if _, err := w.Append(entry(3)); !errors.Is(err, errWriterFailed) {
		t.Fatalf("sticky: %v", err)
	}
	if _, c := w.Root(); c != 1 {
		t.Fatalf("count after failure = %d", c)
	}
}

func TestInvalidEntry(t *testing.T) {
	w, _ := NewWriter(io.Discard, WriterOptions{})
	bad := []func(*Entry){
		func(e *Entry) { e.ParamsHash = "" },
		func(e *Entry) { e.Decision = "ALLOW" },
		func(e *Entry) { e.Session = strings.Repeat("s", auditrec.MaxFieldBytes+1) },
		func(e *Entry) { e.Reason = "\xff" },
		func(e *Entry) { e.Reason = strings.Repeat("r", auditrec.MaxReasonBytes+1) },
	}
	for i, f := range bad {
		e := entry(1)
		f(&e)
		if _, err := w.Append(e); !errors.Is(err, errInvalidEntry) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	if _, c := w.Root(); c != 0 {
		t.Fatalf("invalid entries were written")
	}
	if _, err := NewWriter(nil, WriterOptions{}); !errors.Is(err, errInvalidEntry) {
		t.Fatal("nil writer accepted")
	}
}
