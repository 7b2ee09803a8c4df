package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify/platform"
)

const azureDir = "../../verify/platform/testdata/"

// TestAzureRawFormats is the azure-* rows of the conformance table through
// the az-snp-vtpm and az-tdx-vtpm formats: each Trustee evidence file
// verifies with its nonce (README of the samples) and without one; a wrong
// nonce and a changed quote byte are refused, each by its own check
// (verify/platform's tests change the HCL report, the SEV-SNP report, the
// TD quote and the PCRs).
func TestAzureRawFormats(t *testing.T) {
	challenge := []byte("challenge")
	v2 := testfile.Hex(t, "982f5c6e45df0ed3f10b6f60b02f0c8390e281300f3805e2279c16168cd6ae9aa398f647caa2338748cd0fd9f5f819ef")
	at := time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		file, format string
		nonce        []byte
		userData     string // the user-data check line
	}{
		{"azure-snp-vtpm/evidence-v0.json", "az-snp-vtpm", challenge, "evidence version 0 leaves it zero"},
		{"azure-snp-vtpm/evidence-v1.json", "az-snp-vtpm", challenge, "evidence version 1 leaves it zero"},
		{"azure-snp-vtpm/evidence-v2.json", "az-snp-vtpm", v2, "ok         hcl runtime claims' user-data equals --nonce"},
		{"azure-tdx-vtpm/evidence-v0.json", "az-tdx-vtpm", challenge, "evidence version 0 leaves it zero"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data := testfile.Read(t, azureDir+tc.file)
			res, summary, checks, err := verifyAzureRaw(tc.format, data, tc.nonce, nil, at, nil)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(checks, "\n")
			if !strings.Contains(summary, tc.format) || !strings.Contains(text, tc.userData) ||
				!strings.Contains(text, "unchecked  revocation") || !bytes.Equal(res.Azure.QuoteNonce, tc.nonce) {
				t.Fatalf("%s\n%s", summary, text)
			}
			if _, _, checks, err = verifyAzureRaw(tc.format, data, nil, nil, at, nil); err != nil || !strings.Contains(strings.Join(checks, "\n"), "unchecked  vtpm quote nonce") {
				t.Fatalf("without a nonce: %v %q", err, checks)
			}
			refused := func(what string, data, nonce []byte, check string) {
				t.Helper()
				_, _, _, err := verifyAzureRaw(tc.format, data, nonce, nil, at, nil)
				pe, ok := errors.AsType[*platform.Error](err)
				if !errors.Is(err, platform.ErrRejected) || !ok || pe.Check != check {
					t.Fatalf("%s: got %v, want rejected by %s", what, err, check)
				}
			}
			refused("wrong nonce", data, []byte("wrong"), platform.CheckReportData)
			refused("changed quote signature", changeQuoteSignature(t, data), tc.nonce, "signature")
			if _, _, _, err := verifyAzureRaw(tc.format, data, tc.nonce, []byte("x"), at, nil); !errors.Is(err, platform.ErrBadOptions) {
				t.Fatalf("--certs: %v", err)
			}
		})
	}
}

// changeQuoteSignature changes one byte of the quote's signature in any of
// the evidence versions: the first number ending in 0-4 of a byte array
// (plus one stays a byte), or the first hex digit 0-e.
func changeQuoteSignature(t *testing.T, data []byte) []byte {
	t.Helper()
	out := bytes.Clone(data)
	i := bytes.Index(out, []byte(`"signature"`))
	if i < 0 {
		t.Fatal("no signature member")
	}
	rest := bytes.TrimLeft(out[i+len(`"signature"`):], " \t\r\n:")
	array := len(rest) > 0 && rest[0] == '['
	for j := i + len(`"signature"`); j+1 < len(out); j++ {
		c, next := out[j], out[j+1]
		switch {
		case array && c >= '0' && c <= '4' && (next == ',' || next == ']'):
			out[j] = c + 1
			return out
		case !array && (c >= '0' && c <= '8' || c >= 'a' && c <= 'e'):
			out[j] = c + 1
			return out
		}
	}
	t.Fatal("no digit to change")
	return nil
}
