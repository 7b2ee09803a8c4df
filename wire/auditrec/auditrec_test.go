package auditrec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/audittest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/wire/auditrec"
)

var epoch = time.Date(2026, 2, 12, 15, 30, 0, 0, time.UTC)

// next builds the record after c for e at time t and advances c.
func next(t testing.TB, c *auditrec.Chain, e auditrec.Entry, at time.Time) (auditrec.Record, []byte) {
	t.Helper()
	r, line, err := c.Append(nil, at, &e)
	if err != nil {
		t.Fatal(err)
	}
	return r, line
}

// writeLog builds a log of n records (times 1.5 s apart from epoch).
func writeLog(t testing.TB, n int) (*bytes.Buffer, auditrec.Chain) {
	t.Helper()
	var buf bytes.Buffer
	var c auditrec.Chain
	for i := range n {
		_, line := next(t, &c, audittest.Entry(i), epoch.Add(time.Duration(i+1)*1500*time.Millisecond))
		buf.Write(line)
	}
	return &buf, c
}

// canonical is the reference encoding: encoding/json then JCS.
func canonical(r auditrec.Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return jcs.Canonicalize(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// lines splits b into its lines, each with its newline.
func lines(b []byte) [][]byte { return slices.Collect(bytes.Lines(b)) }

func TestRoundTrip(t *testing.T) {
	buf, c := writeLog(t, 10)
	wantRoot, wantCount := c.Root, c.Count
	root, count, err := auditrec.Verify(bytes.NewReader(buf.Bytes()))
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
	root, count, err := auditrec.Verify(strings.NewReader(""))
	if err != nil || root != "" || count != 0 {
		t.Fatalf("empty log: %q %d %v", root, count, err)
	}
}

// reencode applies f to the record on line i and writes it back canonically,
// optionally recomputing its record hash (an attacker who rewrites a record).
func reencode(t *testing.T, log []byte, i int, rehash bool, f func(*auditrec.Record)) []byte {
	t.Helper()
	ls := lines(log)
	var r auditrec.Record
	if err := json.Unmarshal(bytes.TrimSpace(ls[i]), &r); err != nil {
		t.Fatal(err)
	}
	f(&r)
	if rehash {
		h, err := auditrec.HashOf(&r)
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
		{"reason changed", reencode(t, log, 2, false, func(r *auditrec.Record) { r.Reason = "changed" }), auditrec.ErrHashMismatch, 3},
		{"rewritten and rehashed", reencode(t, log, 2, true, func(r *auditrec.Record) { r.Decision = auditrec.Allow; r.Reason = "forged" }), auditrec.ErrChainBreak, 4},
		{"reordered", join(ls[0], ls[2], ls[1], ls[3]), auditrec.ErrChainBreak, 2},
		{"middle removed", join(ls[0], ls[1], ls[3], ls[4]), auditrec.ErrChainBreak, 3},
		{"first removed", join(ls[1], ls[2]), auditrec.ErrChainBreak, 1},
		{"duplicated", join(ls[0], ls[1], ls[1]), auditrec.ErrChainBreak, 3},
		{"torn last line", join(ls[0], ls[1][:len(ls[1])-10]), auditrec.ErrMalformed, 2},
		{"missing newline", join(ls[0], ls[1][:len(ls[1])-1]), auditrec.ErrMalformed, 2},
		{"blank line", join(ls[0], []byte("\n"), ls[1]), auditrec.ErrMalformed, 2},
		{"non-canonical spacing", join(ls[0], bytes.Replace(ls[1], []byte(`,"`), []byte(`, "`), 1)), auditrec.ErrMalformed, 2},
		{"crlf", join(ls[0], bytes.Replace(ls[1], []byte("\n"), []byte("\r\n"), 1)), auditrec.ErrMalformed, 2},
		{"no-op rewrite", reencode(t, log, 1, true, func(r *auditrec.Record) {}), nil, 0},
		{"first has prev", reencode(t, log, 0, true, func(r *auditrec.Record) { s := b64u.SHA256(nil); r.PrevHash = &s }), auditrec.ErrChainBreak, 1},
		{"seq skipped", reencode(t, log, 1, true, func(r *auditrec.Record) { r.Seq = 3 }), auditrec.ErrChainBreak, 2},
		{"bad params hash", reencode(t, log, 0, true, func(r *auditrec.Record) { r.ParamsHash = "abc" }), auditrec.ErrMalformed, 1},
		{"bad decision", reencode(t, log, 0, true, func(r *auditrec.Record) { r.Decision = "maybe" }), auditrec.ErrMalformed, 1},
		{"bad version", reencode(t, log, 0, true, func(r *auditrec.Record) { r.AuditVersion = "2" }), auditrec.ErrMalformed, 1},
		{"non-utc time", reencode(t, log, 0, true, func(r *auditrec.Record) { r.Time = "2026-02-12T16:30:01.5+01:00" }), auditrec.ErrMalformed, 1},
		{"not json", []byte("hello\n"), auditrec.ErrMalformed, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := auditrec.Verify(bytes.NewReader(tc.data))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			le, ok := errors.AsType[*auditrec.LineError](err)
			if !ok || le.Line != tc.line {
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
	if _, _, err := auditrec.Verify(bytes.NewReader(append(c, '\n'))); !errors.Is(err, auditrec.ErrMalformed) {
		t.Fatalf("extra member: %v", err)
	}
	// The root commits to the whole log: a truncated log verifies, but to a
	// different root and count than the writer's.
	root, count, err := auditrec.Verify(bytes.NewReader(join(ls[0], ls[1])))
	full, fullCount, _ := auditrec.Verify(bytes.NewReader(log))
	if err != nil || count != 2 || root == full || fullCount != 6 {
		t.Fatalf("truncated log: %s %d %v", root, count, err)
	}
}

func TestLineErrorCode(t *testing.T) {
	for err, code := range map[error]string{auditrec.ErrHashMismatch: "HASH_MISMATCH", auditrec.ErrChainBreak: "HASH_CHAIN_BREAK", auditrec.ErrMalformed: "MALFORMED_ENVELOPE"} {
		if got := (&auditrec.LineError{Line: 1, Err: err}).Code(); got != code {
			t.Errorf("%v: %s", err, got)
		}
	}
}

func TestLongLine(t *testing.T) {
	data := append(bytes.Repeat([]byte("a"), auditrec.MaxLineBytes+10), '\n')
	if _, _, err := auditrec.Verify(bytes.NewReader(data)); !errors.Is(err, auditrec.ErrMalformed) {
		t.Fatalf("long line: %v", err)
	}
}

func FuzzVerifyAuditLog(f *testing.F) {
	buf, _ := writeLog(f, 3)
	f.Add(buf.Bytes())
	f.Add([]byte(""))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, count, err := auditrec.Verify(bytes.NewReader(data))
		if err != nil {
			if root != "" || count != 0 {
				t.Fatal("error with a root")
			}
			if _, ok := errors.AsType[*auditrec.LineError](err); !ok {
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
		var last auditrec.Record
		if err := json.Unmarshal(ls[len(ls)-1], &last); err != nil || last.RecordHash != root {
			t.Fatalf("root %s is not the last record hash", root)
		}
		for _, l := range ls {
			var r auditrec.Record
			_ = json.Unmarshal(l, &r)
			c, err := canonical(r)
			if err != nil || !bytes.Equal(append(c, '\n'), l) {
				t.Fatalf("accepted line does not re-encode identically")
			}
		}
	})
}

// TestSealMatchesReference: the hand-written JCS encoder produces the bytes
// of the reference (encoding/json then JCS), for the line and for the hash.
func TestSealMatchesReference(t *testing.T) {
	odd := []string{"", "plain", "\"quoted\" \\ back", "ctl \x00\x01\x08\x09\x0a\x0c\x0d\x1f\x7f", "<&> \u2028\u2029 é 😀 \ufb33", strings.Repeat("x", auditrec.MaxReasonBytes)}
	var c auditrec.Chain
	for i, s := range odd {
		e := audittest.Entry(i)
		e.Reason = s
		if len(s) <= auditrec.MaxFieldBytes {
			e.Session, e.Turn, e.Agent, e.Tool, e.Stage = s, s, s, s, s
		}
		checkSeal(t, &c, e, epoch.Add(time.Duration(i)*time.Nanosecond))
	}
}

func checkSeal(t *testing.T, c *auditrec.Chain, e auditrec.Entry, at time.Time) {
	t.Helper()
	r, line := next(t, c, e, at)
	ref, err := canonical(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(line, append(ref, '\n')) {
		t.Fatalf("Seal line\n%s\nreference\n%s", line, ref)
	}
	r.RecordHash = ""
	refNoHash, _ := canonical(r)
	if want := b64u.SHA256(refNoHash); c.Root != want {
		t.Fatalf("record hash %s, reference %s", c.Root, want)
	}
	if m, _ := auditrec.MarshalCanonical(&r); !bytes.Equal(m, refNoHash) {
		t.Fatalf("marshalCanonical differs")
	}
	// Seal appends: a non-empty dst keeps its prefix.
	r2 := r
	out, err := auditrec.Seal(&r2, []byte("prefix"))
	if err != nil || !bytes.Equal(out, append([]byte("prefix"), line...)) {
		t.Fatalf("Seal with prefix: %q %v", out, err)
	}
}

func FuzzSealMatchesReference(f *testing.F) {
	f.Add("agent:main:main", "turn-1", "exec", "allowed by the tool policy", int64(1), true)
	f.Add("\x00\"\\\u2028", "", "", "\xff", int64(-1), false)
	f.Fuzz(func(t *testing.T, session, turn, tool, reason string, ns int64, allow bool) {
		e := audittest.Entry(1)
		e.Session, e.Turn, e.Tool, e.Reason = session, turn, tool, reason
		if allow {
			e.Decision = auditrec.Allow
		}
		if e.Check() != nil {
			return
		}
		var c auditrec.Chain
		at := epoch.Add(time.Duration(ns))
		checkSeal(t, &c, e, at)
		checkSeal(t, &c, e, at)
	})
}

func TestReadHandsOutRecords(t *testing.T) {
	buf, c := writeLog(t, 5)
	var got []auditrec.Record
	root, n, err := auditrec.Read(bytes.NewReader(buf.Bytes()), func(r auditrec.Record) error { got = append(got, r); return nil })
	if err != nil || root != c.Root || n != 5 || len(got) != 5 || got[4].RecordHash != root {
		t.Fatalf("Read: %s %d %v (%d records)", root, n, err, len(got))
	}
	stop := errors.New("stop")
	if _, _, err := auditrec.Read(bytes.NewReader(buf.Bytes()), func(auditrec.Record) error { return stop }); err != stop {
		t.Fatalf("fn error not returned: %v", err)
	}
}

func TestAppendRefusesInvalidEntry(t *testing.T) {
	_, c := writeLog(t, 2)
	before := c
	e := audittest.Entry(3)
	e.Decision = "maybe"
	if _, dst, err := c.Append([]byte("x"), epoch, &e); !errors.Is(err, auditrec.ErrInvalidEntry) || string(dst) != "x" || c != before {
		t.Fatalf("Append of an invalid entry: %q %v, chain %+v (was %+v)", dst, err, c, before)
	}
}
