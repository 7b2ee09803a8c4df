package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestInspect: inspect recognises files by content, shows the evidence
// values a policy pins, and says that nothing is verified.
func TestInspect(t *testing.T) {
	f := scriptFiles(t)

	code, so, se := runCmd("inspect", f("sev/evidence.jws"))
	if code != exitOK {
		t.Fatalf("sev evidence: exit %d %s", code, se)
	}
	for _, want := range []string{
		"kind: evidence-document\n", "verified: false\n", "notice: UNVERIFIED",
		"evidence_document.document_kind: execution_attestation\n",
		"evidence_document.evidence[0].platform: sev-snp\n",
		"evidence_document.evidence[0].simulated: true\n",
		"evidence_document.evidence[0].measurement_b64u: ",
		"evidence_document.evidence[0].sev_snp.chip_id_hex: ",
		"evidence_document.evidence[0].sev_snp.reported_tcb.hex: ",
	} {
		if !strings.Contains(so, want) {
			t.Errorf("sev evidence: no %q in\n%s", want, so)
		}
	}

	// Interspersed --json; a file renamed to another extension is still
	// recognised by its content.
	renamed := f("evidence.txt")
	b := testfile.Read(t, f("tdx/evidence.jws"))
	os.WriteFile(renamed, b, 0o644)
	code, so, se = runCmd("inspect", renamed, "--json")
	var v struct {
		Kind     string `json:"kind"`
		Verified bool   `json:"verified"`
		Doc      struct {
			Evidence []struct {
				Platform string `json:"platform"`
				TDX      struct {
					TeeTCBSVN string `json:"tee_tcb_svn_hex"`
					PCK       struct {
						FMSPC string `json:"fmspc"`
					} `json:"pck_certificate"`
				} `json:"tdx"`
			} `json:"evidence"`
		} `json:"evidence_document"`
	}
	if code != exitOK || json.Unmarshal([]byte(so), &v) != nil || v.Kind != "evidence-document" || v.Verified ||
		len(v.Doc.Evidence) != 1 || v.Doc.Evidence[0].Platform != "tdx" || len(v.Doc.Evidence[0].TDX.TeeTCBSVN) != 32 || v.Doc.Evidence[0].TDX.PCK.FMSPC == "" {
		t.Fatalf("tdx evidence --json: exit %d %s\n%s", code, se, so)
	}

	for name, want := range map[string]string{
		"sev/attestation.json": "document.envelope_type: execution_attestation\n",
		"sev/bundle.json":      "kind: poh-envelope\n",
		"report.json":          "kind: report\n",
		"policy.json":          "kind: verify-policy\n",
	} {
		code, so, se := runCmd("inspect", f(name))
		if code != exitOK || !strings.Contains(so, want) || !strings.Contains(so, "verified: false\n") {
			t.Errorf("%s: exit %d %s\n%s", name, code, se, so)
		}
	}

	// A tampered JWS and an unknown file are rejected (2).
	b = []byte(strings.Replace(string(b), ".", ".A", 1))
	os.WriteFile(f("tampered.jws"), b, 0o644)
	if code, _, _ := runCmd("inspect", f("tampered.jws")); code != exitRejected {
		t.Errorf("tampered JWS: exit %d", code)
	}
	os.WriteFile(f("other.txt"), []byte("hello\n"), 0o644)
	if code, _, se := runCmd("inspect", f("other.txt")); code != exitRejected || !strings.Contains(se, "not a document packctl knows") {
		t.Errorf("unknown file: exit %d %s", code, se)
	}
}

// TestSwappedInputs: a file given for the wrong flag is named, and the exit
// code stays the one the parser gives.
func TestSwappedInputs(t *testing.T) {
	f := scriptFiles(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify", "--attestation", f("sev/evidence.jws"), "--evidence", f("sev/attestation.json"), "--policy", f("policy.json")},
			exitRejected, "--attestation and --evidence look swapped: " + f("sev/evidence.jws") + " is an evidence document and " + f("sev/attestation.json") + " is an execution attestation"},
		{[]string{"verify", "--attestation", f("sev/attestation.json"), "--evidence", f("sev/evidence.jws"), "--policy", f("report.json"), "--report", f("policy.json")},
			exitUsage, "--report and --policy look swapped"},
		{[]string{"verify", "--attestation", f("sev/bundle.json"), "--evidence", f("sev/evidence.jws"), "--policy", f("policy.json")},
			exitRejected, "--attestation " + f("sev/bundle.json") + " is a proof bundle or other PoH envelope, not an execution attestation"},
		{[]string{"report", f("report.json")}, exitRejected, "the argument " + f("report.json") + " is a SystemPromptReport, not a plaintext pack"},
		{[]string{"verify-disclosure", "--report", f("policy.json"), "--disclosure", f("report.json")}, exitRejected, "--report " + f("policy.json") + " is a verify policy, not a SystemPromptReport"},
	} {
		code, _, se := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(se, tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr:\n%s\nwant %q", tc.args[0], code, tc.code, se, tc.want)
		}
	}
	// Right files: no hint.
	code, _, se := runCmd("verify", "--attestation", f("sev/attestation.json"), "--evidence", f("sev/evidence.jws"), "--policy", f("policy.json"), "--at", "2026-06-01T12:00:00Z")
	if code != exitOK || strings.Contains(se, "swapped") || strings.Contains(se, " is a") {
		t.Errorf("right files: exit %d %s", code, se)
	}
}

// FuzzInspect: whatever the bytes, sniffing and inspecting never panic, and
// a document that inspects is shown unverified.
func FuzzInspect(f *testing.F) {
	f.Add([]byte(`{"did":"x","key_attestation":"a.b.c"}`))
	f.Add([]byte(`{"envelope_type":"execution_attestation","payload":{}}`))
	f.Add([]byte("eyJhbGciOiJFZERTQSJ9.e30.AAAA"))
	f.Add([]byte("clawea.dev/attester/v1/tpm-ak-certification\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := sniff(b)
		if k == kindUnknown || k == kindEnvelope || k == kindManifest {
			return
		}
		v, err := inspectDocument(b, k)
		if err != nil {
			return
		}
		if ok, _ := v.Get("verified").Bool(); ok || v.Get("verified") == nil {
			t.Fatal("an inspection claims to be verified")
		}
		_ = inputHint(input{"--x", "f", b, kindReport})
	})
}

// TestSealAttesterWrongFile: seal --attester given another kind of file
// names it.
func TestSealAttesterWrongFile(t *testing.T) {
	in := scriptFiles(t)
	f := in("sev/attestation.json")
	code, _, se := runCmd("seal", "--attester", f, "--policy", in("policy.json"), "--challenge", "AA", "-o", in("x"), "--manifest", in("y"), "pack.json")
	if code != exitRejected || !strings.Contains(se, "--attester "+f+" is an execution attestation, not an attester identity") {
		t.Fatalf("exit %d %s", code, se)
	}
}

// TestInspectGPUEvidence: inspect shows a GPU item's report (nonce, FWID,
// blocks, the measurement digest a policy pins) and no claims error.
func TestInspectGPUEvidence(t *testing.T) {
	in := scriptFilesOf(t, "verify_gpu.txt")
	code, so, se := runCmd("inspect", in("gpu/evidence.jws"))
	if code != exitOK || strings.Contains(so, "claims_error") {
		t.Fatalf("exit %d %s\n%s", code, se, so)
	}
	for _, want := range []string{"platform: nvidia-gpu", "nvidia_gpu.nonce_hex: ", "nvidia_gpu.measurement_blocks: 8", "nvidia_gpu.measurement_b64u: ", "nvidia_gpu.device: CN=TEST ONLY"} {
		if !strings.Contains(so, want) {
			t.Errorf("missing %q in\n%s", want, so)
		}
	}
}
