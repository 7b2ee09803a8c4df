// Command fixturegen writes the swtpm quote fixture
// (wire/tpmquote/testdata/swtpm_quote.json) and the swtpm fuzz seeds of
// wire/tpmquote and enclave/tpm from a freshly manufactured swtpm
// (internal/swtpmtest). It needs swtpm and swtpm_setup on PATH and exits
// non-zero without them. Every swtpm has new keys, so every run writes
// other bytes. Run through `go generate ./enclave/tpm`.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// quoteDir is wire/tpmquote's testdata, relative to enclave/tpm, where go
// generate runs this program (as rootsgen and vectorgen, it writes
// relative to its package).
const quoteDir = "../../wire/tpmquote/testdata"

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "fixturegen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	for _, tool := range []string{"swtpm", "swtpm_setup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH: the fixtures are made by a real swtpm (apt package swtpm-tools)", tool)
		}
	}
	sw, err := swtpmtest.Start()
	if err != nil {
		return fmt.Errorf("start swtpm: %w", err)
	}
	defer sw.Stop()
	tp, err := tpm.Open(ctx, tpm.Options{Address: sw.Addr, PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7, 16}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tp.Close()) }()

	const seed = "fixture"
	nonce := sha256.Sum256([]byte("nonce/" + seed))
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(nonce, key, []byte(seed))
	if err != nil {
		return err
	}
	ev, err := tp.Quote(ctx, rd)
	if err != nil {
		return err
	}
	ak, err := tpmquote.ParsePublic(tp.AKPublic())
	if err != nil {
		return err
	}
	v, err := tpmquote.Verify(ev, rd, tpmquote.VerifyOpts{TrustedAKNames: [][]byte{ak.Name()}, AllowSimulated: true})
	if err != nil {
		return err
	}
	evJSON, err := json.MarshalIndent(ev, "  ", "  ")
	if err != nil {
		return err
	}
	fx := testfixture.TPMQuoteFile{
		Comment:         "swtpm quote made by enclave/tpm/internal/fixturegen; simulated, EK certificate from a throwaway swtpm_localca",
		NonceBinding:    hex.EncodeToString(nonce[:]),
		Identity:        hex.EncodeToString(key),
		EvidenceContext: seed,
		AKName:          hex.EncodeToString(v.AKName),
		Evidence:        evJSON,
	}
	out, err := json.MarshalIndent(fx, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(quoteDir, "swtpm_quote.json"), append(out, '\n'), 0o644); err != nil {
		return err
	}
	sealed, err := tp.SealPCR(ctx, "fixture", []byte("not a secret: fuzz seed"))
	if err != nil {
		return err
	}
	seeds := map[string][][]byte{
		"FuzzParseAttest":     {ev.Blob},
		"FuzzParseSignature":  {ev.Signature},
		"FuzzParsePublic":     {ev.Aux[tpmquote.AuxAKPublic]},
		"FuzzParsePCRValues":  {ev.Aux[tpmquote.AuxPCRValues]},
		"FuzzVerify":          {ev.Blob, ev.Signature, ev.Aux[tpmquote.AuxAKPublic], ev.Aux[tpmquote.AuxPCRValues]},
		"FuzzParseSealedBlob": {sealed},
	}
	for name, args := range seeds {
		d := filepath.Join(quoteDir, "fuzz", name)
		if name == "FuzzParseSealedBlob" {
			d = filepath.Join("testdata", "fuzz", name)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		body := "go test fuzz v1\n"
		for _, a := range args {
			body += fmt.Sprintf("[]byte(%q)\n", a)
		}
		if err := os.WriteFile(filepath.Join(d, "swtpm"), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}
