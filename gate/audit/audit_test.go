package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
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

func entry(i int) Entry {
	dec := Allow
	if i%3 == 0 {
		dec = Deny
	}
	return Entry{
		Session:    "agent:main:main",
		Turn:       fmt.Sprintf("turn-%d", i/4),
		Agent:      "main",
		Tool:       "exec",
		ParamsHash: b64u.SHA256([]byte(fmt.Sprint(i))),
		Stage:      "tool_policy",
		Decision:   dec,
		Reason:     fmt.Sprintf("reason %d <&> \u2028 é", i),
	}
}

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

func lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func TestRoundTrip(t *testing.T) {
	buf, w := writeLog(t, 10)
	wantRoot, wantCount := w.Root()
	root, count, err := VerifyAuditLog(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if root != wantRoot || count != wantCount || count != 10 {
		t.Fatalf("got %s/%d, want %s/%d", root, count, wantRoot, wantCount)
	}
	// Every line is JCS and carries the documented fields.
	ls := lines(buf.Bytes())
	var first, second map[string]any
	if err := json.Unmarshal(ls[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ls[1], &second); err != nil {
		t.Fatal(err)
	}
	if first["prev_hash_b64u"] != nil || second["prev_hash_b64u"] != first["record_hash_b64u"] {
		t.Fatalf("chain fields wrong: %v %v", first, second)
	}
	if first["time"] != "2026-02-12T15:30:01.5Z" || first["seq"] != float64(1) {
		t.Fatalf("time/seq = %v/%v", first["time"], first["seq"])
	}
	// record hash recomputed independently: JCS of the record without the hash.
	delete(first, "record_hash_b64u")
	raw, _ := json.Marshal(first)
	h, err := jcs.Hash(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h != second["prev_hash_b64u"] {
		t.Fatalf("independent record hash %s != %v", h, second["prev_hash_b64u"])
	}
}

func TestEmptyLog(t *testing.T) {
	root, count, err := VerifyAuditLog(strings.NewReader(""))
	if err != nil || root != "" || count != 0 {
		t.Fatalf("empty log: %q %d %v", root, count, err)
	}
}

// reencode applies f to the record on line i and writes it back canonically,
// optionally recomputing its record hash (an attacker who rewrites a record).
func reencode(t *testing.T, log []byte, i int, rehash bool, f func(*Record)) []byte {
	t.Helper()
	ls := lines(log)
	var r Record
	if err := json.Unmarshal(bytes.TrimSpace(ls[i]), &r); err != nil {
		t.Fatal(err)
	}
	f(&r)
	if rehash {
		h, err := r.Hash()
		if err != nil {
			t.Fatal(err)
		}
		r.RecordHash = h
	}
	c, err := canonical(r)
	if err != nil {
		t.Fatal(err)
	}
	ls[i] = append(c, '\n')
	return bytes.Join(ls, nil)
}

func TestTamper(t *testing.T) {
	buf, _ := writeLog(t, 6)
	log := buf.Bytes()
	ls := lines(log)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		data []byte
		want error
		line int
	}{
		{"reason changed", reencode(t, log, 2, false, func(r *Record) { r.Reason = "changed" }), ErrHashMismatch, 3},
		{"rewritten and rehashed", reencode(t, log, 2, true, func(r *Record) { r.Decision = Allow; r.Reason = "forged" }), ErrChainBreak, 4},
		{"reordered", join(ls[0], ls[2], ls[1], ls[3]), ErrChainBreak, 2},
		{"middle removed", join(ls[0], ls[1], ls[3], ls[4]), ErrChainBreak, 3},
		{"first removed", join(ls[1], ls[2]), ErrChainBreak, 1},
		{"duplicated", join(ls[0], ls[1], ls[1]), ErrChainBreak, 3},
		{"torn last line", join(ls[0], ls[1][:len(ls[1])-10]), ErrMalformed, 2},
		{"missing newline", join(ls[0], ls[1][:len(ls[1])-1]), ErrMalformed, 2},
		{"blank line", join(ls[0], []byte("\n"), ls[1]), ErrMalformed, 2},
		{"non-canonical spacing", join(ls[0], bytes.Replace(ls[1], []byte(`,"`), []byte(`, "`), 1)), ErrMalformed, 2},
		{"crlf", join(ls[0], bytes.Replace(ls[1], []byte("\n"), []byte("\r\n"), 1)), ErrMalformed, 2},
		{"no-op rewrite", reencode(t, log, 1, true, func(r *Record) {}), nil, 0},
		{"first has prev", reencode(t, log, 0, true, func(r *Record) { s := b64u.SHA256(nil); r.PrevHash = &s }), ErrChainBreak, 1},
		{"seq skipped", reencode(t, log, 1, true, func(r *Record) { r.Seq = 3 }), ErrChainBreak, 2},
		{"bad params hash", reencode(t, log, 0, true, func(r *Record) { r.ParamsHash = "abc" }), ErrMalformed, 1},
		{"bad decision", reencode(t, log, 0, true, func(r *Record) { r.Decision = "maybe" }), ErrMalformed, 1},
		{"bad version", reencode(t, log, 0, true, func(r *Record) { r.AuditVersion = "2" }), ErrMalformed, 1},
		{"non-utc time", reencode(t, log, 0, true, func(r *Record) { r.Time = "2026-02-12T16:30:01.5+01:00" }), ErrMalformed, 1},
		{"not json", []byte("hello\n"), ErrMalformed, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := VerifyAuditLog(bytes.NewReader(tc.data))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line {
				t.Fatalf("err = %#v, want line %d", err, tc.line)
			}
		})
	}
	// An unknown member: added to the canonical object, rehashed by hand.
	var m map[string]any
	_ = json.Unmarshal(ls[0], &m)
	m["extra"] = "x"
	raw, _ := json.Marshal(m)
	c, _ := jcs.Canonicalize(raw)
	if _, _, err := VerifyAuditLog(bytes.NewReader(append(c, '\n'))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("extra member: %v", err)
	}
	// The root commits to the whole log: a truncated log verifies, but to a
	// different root and count than the writer's.
	root, count, err := VerifyAuditLog(bytes.NewReader(join(ls[0], ls[1])))
	full, fullCount, _ := VerifyAuditLog(bytes.NewReader(log))
	if err != nil || count != 2 || root == full || fullCount != 6 {
		t.Fatalf("truncated log: %s %d %v", root, count, err)
	}
}

func TestLineErrorCode(t *testing.T) {
	for err, code := range map[error]string{ErrHashMismatch: "HASH_MISMATCH", ErrChainBreak: "HASH_CHAIN_BREAK", ErrMalformed: "MALFORMED_ENVELOPE"} {
		if got := (&LineError{Line: 1, Err: err}).Code(); got != code {
			t.Errorf("%v: %s", err, got)
		}
	}
}

func TestLongLine(t *testing.T) {
	data := append(bytes.Repeat([]byte("a"), MaxLineBytes+10), '\n')
	if _, _, err := VerifyAuditLog(bytes.NewReader(data)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("long line: %v", err)
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
	root, count, err := VerifyAuditLog(&buf)
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
	got, n, err := VerifyAuditLog(buf)
	if err != nil || n != 4 || got != r2 || c2 != 4 {
		t.Fatalf("resume: %s %d %v", got, n, err)
	}
	if _, err := NewWriter(buf, WriterOptions{ResumeRoot: root}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("root without count: %v", err)
	}
	if _, err := NewWriter(buf, WriterOptions{ResumeRoot: "x", ResumeCount: 1}); !errors.Is(err, ErrInvalidEntry) {
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
	if _, err := w.Append(entry(2)); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("first failure: %v", err)
	}
	fw.n = 10
	if _, err := w.Append(entry(3)); !errors.Is(err, ErrWriterFailed) {
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
		func(e *Entry) { e.Session = strings.Repeat("s", MaxFieldBytes+1) },
		func(e *Entry) { e.Reason = "\xff" },
		func(e *Entry) { e.Reason = strings.Repeat("r", MaxReasonBytes+1) },
	}
	for i, f := range bad {
		e := entry(1)
		f(&e)
		if _, err := w.Append(e); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	if _, c := w.Root(); c != 0 {
		t.Fatalf("invalid entries were written")
	}
	if _, err := NewWriter(nil, WriterOptions{}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatal("nil writer accepted")
	}
}

func FuzzVerifyAuditLog(f *testing.F) {
	buf, _ := writeLog(f, 3)
	f.Add(buf.Bytes())
	f.Add([]byte(""))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, count, err := VerifyAuditLog(bytes.NewReader(data))
		if err != nil {
			if root != "" || count != 0 {
				t.Fatal("error with a root")
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Accepted: one canonical record per line, the root is the last
		// record hash, and the chain re-verifies record by record.
		ls := lines(data)
		if uint64(len(ls)) != count {
			t.Fatalf("count %d, lines %d", count, len(ls))
		}
		if count == 0 {
			if root != "" {
				t.Fatal("root for empty log")
			}
			return
		}
		var last Record
		if err := json.Unmarshal(ls[len(ls)-1], &last); err != nil || last.RecordHash != root {
			t.Fatalf("root %s is not the last record hash", root)
		}
		for _, l := range ls {
			var r Record
			_ = json.Unmarshal(l, &r)
			c, err := canonical(r)
			if err != nil || !bytes.Equal(append(c, '\n'), l) {
				t.Fatalf("accepted line does not re-encode identically")
			}
		}
	})
}
