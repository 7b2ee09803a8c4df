package tpm

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/tpmquote"
)

var update = flag.Bool("update", false, "rewrite wire/tpmquote/testdata fixtures and the fuzz seeds from swtpm")

// TestWriteFixtures regenerates the fixtures: go test ./enclave/tpm -run TestWriteFixtures -update
func TestWriteFixtures(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate tpmquote fixtures")
	}
	tp := openSwtpm(t, Options{PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7, 16}})
	seed := "fixture"
	rd := testReportData(t, seed)
	ev := quote(t, tp, rd)
	v, err := tpmquote.Verify(ev, rd, pinned(tp))
	if err != nil {
		t.Fatal(err)
	}
	evJSON, err := json.MarshalIndent(ev, "  ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	nonce := sha256.Sum256([]byte("nonce/" + seed))
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	fx := testfixture.TPMQuoteFile{
		Comment:         "swtpm quote made by enclave/tpm TestWriteFixtures; simulated, EK certificate from a throwaway swtpm_localca",
		NonceBinding:    hex.EncodeToString(nonce[:]),
		Identity:        hex.EncodeToString(key),
		EvidenceContext: seed,
		AKName:          hex.EncodeToString(v.AKName),
		Evidence:        evJSON,
	}
	out, err := json.MarshalIndent(fx, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(testfixture.TPMQuotePath())
	if err := os.WriteFile(filepath.Join(dir, "swtpm_quote.json"), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][][]byte{
		"FuzzParseAttest":    {ev.Blob},
		"FuzzParseSignature": {ev.Signature},
		"FuzzParsePublic":    {ev.Aux[tpmquote.AuxAKPublic]},
		"FuzzParsePCRValues": {ev.Aux[tpmquote.AuxPCRValues]},
		"FuzzVerify":         {ev.Blob, ev.Signature, ev.Aux[tpmquote.AuxAKPublic], ev.Aux[tpmquote.AuxPCRValues]},
	}
	if seeds["FuzzParseSealedBlob"], err = sealedSeed(tp); err != nil {
		t.Fatal(err)
	}
	for name, args := range seeds {
		d := filepath.Join(dir, "fuzz", name)
		if name == "FuzzParseSealedBlob" {
			d = filepath.Join("testdata", "fuzz", name)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, a := range args {
			body += fmt.Sprintf("[]byte(%q)\n", a)
		}
		if err := os.WriteFile(filepath.Join(d, "swtpm"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func sealedSeed(tp *TPM) ([][]byte, error) {
	blob, err := tp.SealPCR(context.Background(), "fixture", []byte("not a secret: fuzz seed"))
	return [][]byte{blob}, err
}
