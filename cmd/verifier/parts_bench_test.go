package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

// discardWriter is a ResponseWriter that keeps nothing: the response
// write measured without a recorder's copy.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkServiceParts measures, each alone, the parts of a full
// POST /v1/verify that are not verify.Verify (issue 22): the body read,
// the request parse (JSON, the documents re-encoded or base64-decoded),
// the EAR (built, encoded, signed) and the response (encoded, written).
func BenchmarkServiceParts(b *testing.B) {
	e := newEnv(b, 0)
	body := e.f.body("", true)
	plain := e.f.body("", false)
	pol := e.svc.snap.Load().policies[DefaultPolicy]
	res, err := verify.Verify(e.f.att, e.f.ev, e.f.bundle, pol, verify.Options{
		Now: func() time.Time { return testfixture.Now }, CertCache: e.svc.cache, AuditLog: e.f.audit, Report: e.f.report})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequest(http.MethodPost, "/v1/verify", bytes.NewReader(body))
			if _, err := bounded.ReadBody(nil, r, DefaultMaxBody); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		body []byte
	}{{"parse b64u", body}, {"parse objects", plain}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseRequest(c.body, DefaultMaxBody); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ear", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ar, err := earresult.New(res, nil, earresult.Options{Now: testfixture.Now, Build: buildPrefix + "test", Policy: pol})
			if err == nil {
				_, err = e.svc.signer.Sign(ar)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	ar, err := earresult.New(res, nil, earresult.Options{Now: testfixture.Now, Build: buildPrefix + "test", Policy: pol})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := e.svc.signer.Sign(ar)
	if err != nil {
		b.Fatal(err)
	}
	out := &response{Outcome: verify.NewOutcome(res, nil), ear: tok}
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		w := &discardWriter{h: http.Header{}}
		for b.Loop() {
			writeJSON(w, http.StatusOK, out)
		}
	})
}
