package main

import (
	"testing"

	"github.com/clawea/attester/internal/testfixture"
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
	})
}
