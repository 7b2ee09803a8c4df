package auditrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/clawea/attester/schema/jcs"
)

// stdlibKeys are the members of a serialized record, for stdlibRecord.
var stdlibKeys = [...]string{
	"agent", "audit_version", "decision", "params_hash_b64u", "prev_hash_b64u",
	"reason", "record_hash_b64u", "seq", "session", "stage", "time", "tool", "turn",
}

// stdlibRecord is how parse read a line's members before it used the
// strict reader: the JCS library's canonical form compared with the line,
// then encoding/json. FuzzParseMatchesStdlib holds the two to the same
// answers.
func stdlibRecord(raw []byte) (Record, error) {
	var rec Record
	c, err := jcs.Canonicalize(raw)
	if err != nil {
		return rec, errors.New("not I-JSON")
	}
	if !bytes.Equal(c, raw) {
		return rec, errors.New("record is not in canonical (JCS) form")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return rec, errors.New("record is not a JSON object")
	}
	if len(members) != len(stdlibKeys) {
		return rec, fmt.Errorf("record has %d members, want %d", len(members), len(stdlibKeys))
	}
	for _, k := range stdlibKeys {
		if _, ok := members[k]; !ok {
			return rec, fmt.Errorf("missing member %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return rec, errors.New("member of the wrong type")
	}
	return rec, nil
}

// stdlibParse is parse as it was, with stdlibRecord in place of the strict
// reader; the checks that follow the decoding are the same (checkDecoded).
func stdlibParse(raw []byte) (Record, error) {
	if len(raw) == 0 {
		return Record{}, errors.New("empty line")
	}
	rec, err := stdlibRecord(raw)
	if err != nil {
		return rec, err
	}
	return rec, rec.checkDecoded(raw)
}

// sampleLines are two chained records, the second with escapes in its
// reason, as the producer writes them.
func sampleLines(t testing.TB) [][]byte {
	t.Helper()
	var c Chain
	var out [][]byte
	at := time.Date(2026, 6, 1, 12, 0, 0, 123456789, time.UTC)
	for _, e := range []Entry{
		{Session: "s1", Turn: "t1", Agent: "main", Tool: "exec", ParamsHash: "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU", Stage: "tool_policy", Decision: Allow},
		{Session: "s1", Turn: "t2", Agent: "main", Tool: "read", ParamsHash: "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU", Stage: "tool_policy", Decision: Deny, Reason: "denied: \"rm\"\n\u00e9\u2028"},
	} {
		_, line, err := c.Append(nil, at, &e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.TrimSuffix(line, []byte("\n")))
	}
	return out
}

// FuzzParseMatchesStdlib: parse (the strict reader) accepts exactly the
// lines the encoding/json reader it replaced accepted, and reads the same
// record from them.
func FuzzParseMatchesStdlib(f *testing.F) {
	for _, l := range sampleLines(f) {
		f.Add(l)
		f.Add(bytes.Replace(l, []byte(`"seq":`), []byte(`"seq":1.0,"x":`), 1))
		f.Add(bytes.Replace(l, []byte(`"agent":"main"`), []byte(`"agent":"main","agent":"main"`), 1))
		f.Add(bytes.Replace(l, []byte(`"agent":"main"`), []byte(`"agent":"\ud800"`), 1))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := parse(raw)
		want, werr := stdlibParse(raw)
		if (err == nil) != (werr == nil) {
			t.Fatalf("strict reader: %v; encoding/json: %v", err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("strict reader read %+v, encoding/json %+v", got, want)
		}
	})
}

// BenchmarkParseLine reads one record line with the strict reader and with
// the encoding/json reader it replaced.
func BenchmarkParseLine(b *testing.B) {
	line := sampleLines(b)[1]
	for name, parse := range map[string]func([]byte) (Record, error){"strict": parse, "encoding-json": stdlibParse} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parse(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
