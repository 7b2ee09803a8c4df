package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// auditRecordOf is a record whose every string member is s and whose
// numbers are n (so each member, omitted when empty or zero, is tried).
func auditRecordOf(s string, n int) *auditRecord {
	r := &auditRecord{
		Seq: int64(n), At: s, RunID: s, TurnID: s, Provider: s, Model: s, Outcome: s, Reason: s,
		RequestHash: s, ResponseHash: s, Status: n, EventHash: s, SuffixHash: s, SuffixBytes: -n,
		ToolDescHash: s, ReceiptHash: s,
	}
	if n%3 != 0 {
		r.InternalHashes = []string{s, s + "x"}
	}
	return r
}

// checkAuditJSON fails unless appendJSON writes r as json.Marshal does.
func checkAuditJSON(t *testing.T, r *auditRecord) {
	t.Helper()
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.appendJSON([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("appendJSON wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}

// The audit record is written without reflection: the same bytes as
// json.Marshal, for every member present or left out and for the strings
// json.Marshal escapes (a model name comes from the request).
func TestAuditRecordJSON(t *testing.T) {
	strs := []string{
		"", "plain", `q"b\s/`, "\x00\x01\x1f\b\f\n\r\t\x7f", "<script>&amp;</script>",
		"\u2028\u2029\u2027\u202a", "é漢🙂", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	}
	for i, s := range strs {
		checkAuditJSON(t, auditRecordOf(s, i))
		checkAuditJSON(t, auditRecordOf(s, 0))
	}
	checkAuditJSON(t, &auditRecord{})
	checkAuditJSON(t, &auditRecord{Seq: -1 << 63, Status: 1<<31 - 1, SuffixBytes: 1 << 40, InternalHashes: []string{}})
}

// FuzzAuditRecordJSON is the differential test of appendJSON against
// json.Marshal on any strings and numbers.
func FuzzAuditRecordJSON(f *testing.F) {
	f.Add("forwarded", "gpt-<4>&\u2028", 200)
	f.Add("\xff\x00\"\\", "", 0)
	f.Fuzz(func(t *testing.T, a, b string, n int) {
		r := auditRecordOf(a, n)
		r.Model, r.Reason = b, b+a
		checkAuditJSON(t, r)
	})
}
