package main

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// FuzzParseRequest: the request parser never panics, and what it accepts
// has the required documents and a valid policy name.
func FuzzParseRequest(f *testing.F) {
	fx := newFixture(f, testfixture.Now)
	f.Add(fx.body("", true))
	f.Add(fx.body("prod", false))
	f.Add([]byte(`{"request_version":"` + RequestVersion + `","attestation":{},"evidence":"a.b.c"}`))
	f.Add([]byte(`{"request_version":"` + RequestVersion + `","attestation_b64u":"","evidence_b64u":"","disclosure":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseRequest(body, 1<<20)
		if err != nil {
			if req != nil {
				t.Fatal("a request and an error")
			}
			return
		}
		if req.attestation == nil || req.evidence == nil || !policyName.MatchString(req.policy) {
			t.Fatalf("accepted without the required members: %+v", req)
		}
		// An inline document's bytes are its JSON.stringify form, as an
		// encoder run on a parse that keeps no input text writes them.
		root, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("accepted, then refused without OneCopy: %v", err)
		}
		for name, got := range map[string][]byte{"attestation": req.attestation, "bundle": req.bundle, "report": req.report} {
			if v := root.Get(name); v != nil {
				want, err := pohjson.Stringify(v)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: %q, encoder %q (%v)", name, got, want, err)
				}
			}
		}
	})
}

// TestInlineDocumentBytes: an inline document is passed on as its
// JSON.stringify form, whether the request already carries it in that form
// (its text is taken as it is) or with whitespace and escapes
// JSON.stringify does not write (it is encoded again).
func TestInlineDocumentBytes(t *testing.T) {
	const want = `{"a":[1,{"b":"é\n"}],"c":"x"}`
	for _, in := range []string{
		want,
		`{ "a" : [ 1 , { "b" : "\u00e9\n" } ] , "c" : "\u0078" }`,
		`{"a":[1,{"b":"\u00e9\n"}],"c":"x"}`,
	} {
		body := `{"request_version":"` + RequestVersion + `","attestation":` + in + `,"evidence":"a.b.c"}`
		req, err := parseRequest([]byte(body), 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(req.attestation) != want {
			t.Fatalf("%s: attestation bytes %s, want %s", in, req.attestation, want)
		}
	}
}
