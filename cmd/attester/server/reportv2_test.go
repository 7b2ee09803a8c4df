package server

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
)

// TestRunReportV2: the attester rebuilds a pack with report salts into the
// same SystemPromptReport v2 the author committed to (docs/spec/report-v2.md),
// and refuses the pack against the v1 report hash of the same inputs.
func TestRunReportV2(t *testing.T) {
	params := packtest.Params(t, "full.params.json")
	p := packtest.Build(t, params, promptpack.BuildOptions{ReportVersion: 2})
	pack, rb, trusted := p.Pack, p.Rebuilt, p.Trusted
	if rb.Report.ReportVersion != promptpack.ReportVersion2 {
		t.Fatal("not a v2 pack")
	}
	v1, err := promptpack.Build(params, packtest.Dir(t), openclawsig.ID, promptpack.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb1, err := v1.Rebuild(trusted)
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, trusted)
	enc, mj := h.sealPack(t, pack)
	body := func(report string) []byte { return runBody(enc, mj, report, "agent:main:main") }
	if code, m := h.ctl(t, "POST", "/v1/runs", "", body(rb1.ReportHashB64u())); code != 422 {
		t.Fatalf("v1 report hash for a v2 pack: %d %v", code, m)
	}
	code, m := h.ctl(t, "POST", "/v1/runs", "", body(rb.ReportHashB64u()))
	if code != 201 || m["report_hash_b64u"] != rb.ReportHashB64u() || m["system_prompt_hash_b64u"] != rb1.PromptHashB64u() {
		t.Fatalf("v2 pack: %d %v", code, m)
	}
	// The salts never reach the logs.
	for sel, s := range pack.ReportSalts {
		if bytes.Contains(h.logs.Bytes(), []byte(b64u.Encode(s[:]))) {
			t.Fatalf("the salt of %s is in the logs", sel)
		}
	}
}
