package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestTPMPCRSelectionConfigured: attester.tpm.pcrs sets the selection the
// binary's TPM quotes. With PCRs 0-9 its key attestation verifies against a
// pinned measurement without the warning a 0-7 quote carries (PCRs 8 and
// 9, the kernel command line and initrd, not covered): one of the two
// things an affirming TPM verification needs, beside an AK that an EK or AK
// certificate ties to a TPM (platform-tpm.md section 1, verify-v1 section 7).
func TestTPMPCRSelectionConfigured(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	pf := newPack(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, pf, map[string]any{"platform": "tpm", "stateDir": filepath.Join(dir, "state"),
		"tpm": map[string]any{"address": in.Addr, "pcrs": []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}})
	a, code := startAttester(t, cfg)
	if a == nil {
		t.Fatalf("attester on swtpm exited with %d", code)
	}
	ek := a.req(t, true, "GET", "/v1/tpm/ek", "", nil)
	akPub, err := b64u.Decode(ek.body["ak_public_b64u"].(string))
	if err != nil {
		t.Fatalf("ek: %d %s: %v", ek.code, ek.raw, err)
	}
	ak, err := tpmquote.ParsePublic(akPub)
	if err != nil {
		t.Fatal(err)
	}
	challenge := []byte("pcr-selection-challenge")
	id := a.req(t, true, "GET", "/v1/identity?challenge="+b64u.Encode(challenge), "", nil)
	jws, _ := id.body["key_attestation"].(string)
	if id.code != 200 || jws == "" {
		t.Fatalf("identity: %d %s", id.code, id.raw)
	}
	pol := &verify.Policy{AllowSimulated: true, AllowAnyMeasurement: true, TrustedTPMAKs: [][]byte{ak.Name()}}
	res, err := verify.VerifyKeyAttestation([]byte(jws), challenge, pol, verify.Options{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Platform[0].TPM.PCRs); got != 10 {
		t.Fatalf("the quote covers %d PCRs, want 10 (0-9)", got)
	}
	pol = &verify.Policy{AllowSimulated: true, TrustedTPMAKs: [][]byte{ak.Name()}, Measurements: [][]byte{res.Platform[0].Measurement}}
	res, err = verify.VerifyKeyAttestation([]byte(jws), challenge, pol, verify.Options{Now: time.Now})
	if err != nil {
		t.Fatalf("pinned measurement: %v", err)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "pcrs") {
			t.Fatalf("a 0-9 quote still warns: %s", w)
		}
	}
}
