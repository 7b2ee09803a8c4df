package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/clawea/attester/verify"
)

// TestResponseBytes: the answer with its EAR appended is byte for byte
// what encoding/json writes for the Outcome with a last string member
// "ear" (omitted when empty), for answers with and without an outcome
// and an EAR.
func TestResponseBytes(t *testing.T) {
	e := newEnv(t, 0)
	var outs []*verify.Outcome
	for _, body := range [][]byte{e.f.body("", true), e.f.body("prod", true), []byte(`{}`)} {
		r := e.post(body)
		var o verify.Outcome
		if err := json.Unmarshal(r.raw, &o); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, &o)
	}
	outs = append(outs, nil, &verify.Outcome{Verdict: "<&>\u2028"})
	tok := []byte("eyJhbGciOiJFZERTQSJ9.eyJpYXQiOjF9.c2ln-_")
	for _, o := range outs {
		for _, ear := range [][]byte{nil, tok} {
			legacy := struct {
				*verify.Outcome
				EAR string `json:"ear,omitempty"`
			}{o, string(ear)}
			want, err := json.Marshal(legacy)
			if err != nil {
				t.Fatal(err)
			}
			w := &discardWriter{h: http.Header{}}
			var got bytes.Buffer
			rec := &recordWriter{discardWriter: w, body: &got}
			writeJSON(rec, http.StatusOK, &response{Outcome: o, ear: ear})
			if !bytes.Equal(got.Bytes(), append(want, '\n')) {
				t.Errorf("got  %s\nwant %s", got.Bytes(), want)
			}
		}
	}
}

// recordWriter keeps the body written.
type recordWriter struct {
	*discardWriter
	body *bytes.Buffer
}

func (r *recordWriter) Write(b []byte) (int, error) { return r.body.Write(b) }
