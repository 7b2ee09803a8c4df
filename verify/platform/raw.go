package platform

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxquote"
)

// Raw evidence is evidence in the forms other tools write (a bare SEV-SNP
// report with its endorsement certificates, a TDX quote), checked without an
// attestation around it (docs/spec/verify-platform.md, "Raw evidence").

// maxRawCerts bounds the certificates of a raw chain file.
const maxRawCerts = 8

// Raw evidence formats, as VerifyRaw and packctl platform verify --format
// name them (with trusteeAzureSNP and trusteeAzureTDX).
const (
	rawSNPReport = "snp-report"
	rawTDXQuote  = "tdx-quote"
	rawNVIDIAGPU = "nvidia-gpu"
)

// VerifyRaw verifies raw evidence of format offline against the embedded
// vendor roots. format is "snp-report" (a SEV-SNP ATTESTATION_REPORT; certs
// holds the VCEK or VLEK that signed it, as verifySNPReport says),
// "tdx-quote" (a TDX quote carrying its PCK chain), or "az-snp-vtpm" or
// "az-tdx-vtpm" (Trustee's Azure vTPM evidence, which carries its VCEK or
// PCK chain), or "nvidia-gpu" (an NVIDIA GPU attestation report in hex, as
// nvtrust and Trustee write it; certs holds its chain, as
// verifyNVIDIARaw says). certs MUST be nil for the formats that carry their own. With
// a nonce the evidence must carry it (zero-padded to 64 bytes where it is
// REPORT_DATA); without one (nil) it is returned unchecked. Errors are as
// Verify's; an unknown format or unwanted certs wrap ErrBadOptions.
func VerifyRaw(format string, data, certs, nonce []byte, opts Options) (*Result, error) {
	switch format {
	case rawSNPReport:
		return verifySNPReport(data, certs, nonce, opts)
	case rawNVIDIAGPU:
		return verifyNVIDIARaw(data, certs, nonce, opts)
	case rawTDXQuote, trusteeAzureSNP, trusteeAzureTDX:
		if certs != nil {
			return nil, badOptions("%s evidence carries its own certificates", format)
		}
		if format == rawTDXQuote {
			return verifyTDXQuote(data, nonce, opts)
		}
		return verifyTrusteeAzure(format, data, nonce, opts)
	}
	return nil, badOptions("unknown raw evidence format %q", format)
}

// rawWant returns the REPORT_DATA a raw verification expects: the nonce,
// zero-padded to 64 bytes. Without a nonce (nil) REPORT_DATA is not
// compared and opts says so.
func rawWant(nonce []byte, opts *Options) ([64]byte, error) {
	var want [64]byte
	if nonce == nil {
		opts.anyReportData = true
		return want, nil
	}
	if len(nonce) == 0 || len(nonce) > len(want) {
		return want, badOptions("nonce is %d bytes, want 1 to %d", len(nonce), len(want))
	}
	copy(want[:], nonce)
	return want, nil
}

// verifySNPReport verifies a raw SEV-SNP ATTESTATION_REPORT (report, as the
// secure processor wrote it) offline against the embedded AMD roots of its
// product line. certs holds the VCEK or VLEK certificate that signed it (the
// report's SIGNING_KEY says which), DER or PEM, optionally followed by AMD's
// ASK or ASVK and ARK, each of which must be the embedded one. With a nonce,
// REPORT_DATA must equal it zero-padded to 64 bytes; without one (nil)
// REPORT_DATA is returned unchecked. Errors are as Verify's.
func verifySNPReport(report, certs, nonce []byte, opts Options) (*Result, error) {
	want, err := rawWant(nonce, &opts)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, cannotCheck(checkChain, fmt.Errorf("%w: the vcek or vlek certificate that signed the report", errMissingCollateral))
	}
	rs, err := rootsOrErr()
	if err != nil {
		return nil, err
	}
	leaf, err := snpLeaf(certs, rs)
	if err != nil {
		return nil, err
	}
	ev, err := snpevidence.Build(report, nil, leaf, false)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	return verifyRaw(ev, want, evidence.ReportData{}, opts)
}

// verifyTDXQuote verifies a raw TDX quote (DCAP version 4, or version 5
// with a TD 1.0 or TD 1.5 body, with its PCK chain as certification data)
// offline against the embedded Intel SGX root. With a nonce, REPORT_DATA
// must equal it zero-padded to 64 bytes; without one (nil) REPORT_DATA is
// returned unchecked. Errors are as Verify's: another quote version or body
// type cannot be checked (ErrUnsupported), nor can TCB collateral for a
// version 5 quote.
func verifyTDXQuote(quote, nonce []byte, opts Options) (*Result, error) {
	want, err := rawWant(nonce, &opts)
	if err != nil {
		return nil, err
	}
	q, err := tdxquote.Parse(quote)
	if errors.Is(err, tdxquote.ErrUnsupported) {
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: %w", errUnsupported, err))
	}
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	ev := &evidence.Evidence{Platform: evidence.PlatformTDX, Format: tdxFormat, Blob: quote, CertChain: chain}
	if q.BodyType != 0 { // a version 5 quote
		ev.Format, opts.allowQuoteV5 = tdxFormatV5, true
	}
	return verifyRaw(ev, want, evidence.ReportData{}, opts)
}

// snpLeaf returns the one certificate of certs that is not an embedded AMD
// ARK, ASK or ASVK. A CA certificate that is not embedded is refused: the
// roots are pinned, never taken from the input.
func snpLeaf(certs []byte, rs *rootSet) ([]byte, error) {
	ders, err := splitCerts(certs)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	var leaf []byte
	for _, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, rejected(checkParse, fmt.Errorf("certificate: %v", err))
		}
		if rs.pinnedAMD(c) {
			continue
		}
		if c.IsCA {
			return nil, rejected(checkRoot, fmt.Errorf("%w: ca certificate %q is not an embedded amd ark, ask or asvk",
				ErrUntrustedRoot, c.Subject.CommonName))
		}
		if leaf != nil {
			return nil, rejected(checkParse, errors.New("more than one vcek or vlek certificate"))
		}
		leaf = der
	}
	if leaf == nil {
		return nil, cannotCheck(checkChain, fmt.Errorf("%w: no vcek or vlek certificate among the certificates", errMissingCollateral))
	}
	return leaf, nil
}

// pinnedAMD reports whether c is one of the embedded AMD certificates.
func (rs *rootSet) pinnedAMD(c *x509.Certificate) bool {
	for _, r := range rs.amd {
		for _, p := range []*x509.Certificate{r.certs.Ark, r.certs.Ask, r.certs.Asvk} {
			if p != nil && p.Equal(c) {
				return true
			}
		}
	}
	return false
}

// verifyNVIDIARaw is VerifyRaw for an NVIDIA GPU attestation report in hex
// with its certificate chain (certs: PEM, leaf first, or one DER
// certificate), checked as verifyNVIDIAReport does at opts.Now; the other
// options do not apply (the chain's revocation is not checked).
func verifyNVIDIARaw(data, certs, nonce []byte, opts Options) (*Result, error) {
	if opts.Now == nil {
		return nil, badOptions("options: Now is required")
	}
	report, err := hex.DecodeString(string(bytes.TrimSpace(data)))
	if err != nil {
		return nil, badOptions("nvidia-gpu report is not hex")
	}
	if certs == nil {
		return nil, badOptions("nvidia-gpu needs the gpu certificate chain")
	}
	chain, err := splitCerts(certs)
	if err != nil {
		return nil, badOptions("gpu certificate chain: %v", err)
	}
	return verifyNVIDIAReport(report, chain, nonce, opts.Now())
}

// splitCerts returns the DER certificates of b: one DER certificate, or PEM
// CERTIFICATE blocks and nothing else.
func splitCerts(b []byte) ([][]byte, error) {
	trimmed := bytes.TrimSpace(b)
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN")) {
		return [][]byte{b}, nil
	}
	var out [][]byte
	for rest := trimmed; len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, errors.New("certificates: text that is not pem")
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certificates: pem block %q is not a certificate", safetext.Clip(blk.Type, 32))
		}
		if len(out) == maxRawCerts {
			return nil, fmt.Errorf("certificates: more than %d", maxRawCerts)
		}
		out = append(out, blk.Bytes)
	}
	return out, nil
}
