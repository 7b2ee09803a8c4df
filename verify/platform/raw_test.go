package platform

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
)

// trustee reads a copy of one of Trustee's real platform samples
// (testdata/trustee/NOTICE).
func trustee(t testing.TB, name string) []byte {
	t.Helper()
	return testfile.Read(t, filepath.Join("testdata", "trustee", filepath.FromSlash(name)))
}

func at(s string) func() time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return func() time.Time { return t }
}

// TestSNPReportConformance holds the snp/ rows of the conformance table:
// each sample with its expected result and reason.
func TestSNPReportConformance(t *testing.T) {
	report := trustee(t, "snp/test-report.bin")
	vlekReport := trustee(t, "snp/test-vlek-report.bin")
	vcek := trustee(t, "snp/test-vcek.der")
	vlek := trustee(t, "snp/test-vlek.der")
	capture := Options{Now: at("2025-06-01T00:00:00Z"), AllowUncheckedRevocation: true}
	now := Options{Now: at("2026-11-26T00:00:00Z"), AllowUncheckedRevocation: true}

	flipped := bytes.Clone(report)
	flipped[0x90] ^= 1 // MEASUREMENT
	for _, tc := range []struct {
		name          string
		report, certs []byte
		nonce         []byte
		opts          Options
		class, cause  error
		check         string
	}{
		{name: "vcek report", report: report, certs: vcek, opts: now},
		{name: "vcek report pem", report: report, certs: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vcek}), opts: now},
		{name: "vcek report, its report data as nonce", report: report, certs: vcek, nonce: report[0x50:0x70], opts: now},
		{name: "vlek report at capture", report: vlekReport, certs: vlek, opts: capture},
		{name: "vlek report now (vlek expired)", report: vlekReport, certs: vlek, opts: now, class: ErrRejected, check: checkChain},
		{name: "changed byte", report: flipped, certs: vcek, opts: now, class: ErrRejected, check: checkSignature},
		{name: "wrong nonce", report: report, certs: vcek, nonce: []byte("challenge"), opts: now, class: ErrRejected, cause: ErrReportData, check: CheckReportData},
		{name: "vcek for the vlek report", report: vlekReport, certs: vcek, opts: capture, class: ErrRejected},
		{name: "no certificate", report: report, opts: now, class: ErrCannotCheck, cause: errMissingCollateral, check: checkChain},
		{name: "revocation required", report: report, certs: vcek, opts: Options{Now: now.Now}, class: ErrCannotCheck, cause: errMissingCollateral, check: checkRevocation},
		{name: "truncated", report: report[:1000], certs: vcek, opts: now, class: ErrRejected, check: checkParse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := verifySNPReport(tc.report, tc.certs, tc.nonce, tc.opts)
			if tc.class != nil {
				wantErr(t, err, tc.class, tc.cause, tc.check)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if res.RootID != "amd-ark-milan" || res.Revocation != StatusSkipped || !bytes.Equal(res.ReportData[:], tc.report[0x50:0x90]) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestSNPInvalidVCEKs: Trustee's two invalid VCEKs are each refused for
// what makes them invalid. Both are issued in the name of the Milan ASK but
// certify another chip (hwid 00 01 .. 3f) at another TCB, and neither
// signature verifies under the ASK. They differ in the hwid's encoding (the
// raw 64 bytes as the extension value, as AMD's KDS issues it, or a DER
// OCTET STRING around them) and in their TCB, and each error names its own.
func TestSNPInvalidVCEKs(t *testing.T) {
	report := trustee(t, "snp/test-report.bin")
	now := Options{Now: at("2026-11-26T00:00:00Z"), AllowUncheckedRevocation: true}
	rs, err := rootsOrErr()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{"snp/test-vcek-invalid-legacy.der", "vcek hwid is not the report's chip_id: chip_id c38427a30d4c7af9..., hwid 0001020304050607... (raw 64-byte value); " +
			"certificate tcb is not the report's reported_tcb: vcek a90a000000000003 (bl 3 tee 0 snp 10 ucode 169), report 7308000000000003 (bl 3 tee 0 snp 8 ucode 115)"},
		{"snp/test-vcek-invalid-new.der", "vcek hwid is not the report's chip_id: chip_id c38427a30d4c7af9..., hwid 0001020304050607... (der octet string); " +
			"certificate tcb is not the report's reported_tcb: vcek 1e00000000000000 (bl 0 tee 0 snp 0 ucode 30), report 7308000000000003 (bl 3 tee 0 snp 8 ucode 115)"},
	} {
		der := trustee(t, tc.file)
		_, err := verifySNPReport(report, der, nil, now)
		wantErr(t, err, ErrRejected, errHWIDMismatch, checkBinding)
		if !errors.Is(err, errTCBMismatch) {
			t.Errorf("%s: %v does not name the tcb", tc.file, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.file, err, tc.want)
		}
		// The third defect: the ASK did not sign it.
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckSignatureFrom(rs.amd["Milan"].certs.Ask); err == nil {
			t.Errorf("%s: signed by the milan ask", tc.file)
		}
	}
	// The valid VCEK's signature, for contrast.
	c, err := x509.ParseCertificate(trustee(t, "snp/test-vcek.der"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSignatureFrom(rs.amd["Milan"].certs.Ask); err != nil {
		t.Errorf("test-vcek.der: %v", err)
	}
}

// TestSNPReportCertsRefused: the roots are pinned; a CA certificate from
// the input that is not AMD's, or text that is not a certificate, is refused.
func TestSNPReportCertsRefused(t *testing.T) {
	report := trustee(t, "snp/test-report.bin")
	vcek := trustee(t, "snp/test-vcek.der")
	rs, err := roots()
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(ders ...[]byte) []byte {
		var b []byte
		for _, d := range ders {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
		}
		return b
	}
	opts := Options{Now: at("2026-11-26T00:00:00Z"), AllowUncheckedRevocation: true}
	milan := rs.amd["Milan"].certs
	// The full chain the key server serves verifies.
	if _, err := verifySNPReport(report, pemOf(vcek, milan.Ask.Raw, milan.Ark.Raw), nil, opts); err != nil {
		t.Fatalf("vcek, ask, ark: %v", err)
	}
	sim := rs.amdSim["Milan"].certs
	_, err = verifySNPReport(report, pemOf(vcek, sim.Ask.Raw), nil, opts)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
	_, err = verifySNPReport(report, pemOf(vcek, vcek), nil, opts)
	wantErr(t, err, ErrRejected, nil, checkParse)
	_, err = verifySNPReport(report, append(pemOf(vcek), "junk"...), nil, opts)
	wantErr(t, err, ErrRejected, nil, checkParse)
	_, err = verifySNPReport(report, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), nil, opts)
	wantErr(t, err, ErrRejected, nil, checkParse)
	_, err = verifySNPReport(report, vcek, make([]byte, 65), opts)
	if !errors.Is(err, ErrBadOptions) {
		t.Fatalf("65-byte nonce: %v", err)
	}
}

// FuzzSplitCerts: whatever splitCerts accepts as PEM re-encodes to blocks
// it splits to the same certificates; on error it returns nothing.
func FuzzSplitCerts(f *testing.F) {
	vcek, err := os.ReadFile(filepath.Join("testdata", "trustee", "snp", "test-vcek.der"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(vcek)
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vcek}))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ders, err := splitCerts(b)
		if err != nil {
			if ders != nil {
				t.Fatal("error with certificates")
			}
			return
		}
		if len(ders) == 0 || len(ders) > maxRawCerts {
			t.Fatalf("%d certificates", len(ders))
		}
		var again []byte
		for _, d := range ders {
			again = append(again, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
		}
		ders2, err := splitCerts(again)
		if err != nil || len(ders2) != len(ders) {
			t.Fatalf("re-encoded: %d certificates, %v", len(ders2), err)
		}
		for i := range ders {
			if !bytes.Equal(ders[i], ders2[i]) {
				t.Fatal("re-encoded certificate differs")
			}
		}
	})
}

// TestTDXQuoteConformance holds the tdx/ quote rows of the conformance
// table (the event-log rows are in eventlog_test.go).
// The version 5 sample has a TD 1.5 body: its TD 1.5 fields are returned,
// and it is refused inside attestation evidence, which carries version 4.
func TestTDXQuoteV5Fields(t *testing.T) {
	q5 := trustee(t, "tdx/tdx_quote_5.dat")
	opts := Options{Now: at("2026-11-26T00:00:00Z"), AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
	res, err := verifyTDXQuote(q5, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := res.TDX.Body
	if b.TeeTcbSvn2 != [16]byte(q5[54+0x248:]) || b.MRServiceTD != [48]byte(q5[54+0x258:]) || b.MRServiceTD == [48]byte{} {
		t.Errorf("td 1.5 fields: tee_tcb_svn2 %x, mrservicetd %x", b.TeeTcbSvn2, b.MRServiceTD)
	}
	q, err := tdxquote.Parse(q5)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{tdxFormat, tdxFormatV5} {
		ev := &evidence.Evidence{Platform: evidence.PlatformTDX, Format: f, Blob: q5, CertChain: chain}
		_, err := verifyRaw(ev, [64]byte{}, evidence.ReportData{}, opts)
		wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
	}
	// A version 4 quote announced as version 5.
	q4 := trustee(t, "tdx/tdx_quote_4.dat")
	q, err = tdxquote.Parse(q4)
	if err != nil {
		t.Fatal(err)
	}
	chain, err = tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		t.Fatal(err)
	}
	o := opts
	o.allowQuoteV5, o.anyReportData = true, true
	ev := &evidence.Evidence{Platform: evidence.PlatformTDX, Format: tdxFormatV5, Blob: q4, CertChain: chain}
	_, err = verifyRaw(ev, [64]byte{}, evidence.ReportData{}, o)
	wantErr(t, err, ErrRejected, nil, checkParse)
}

func TestTDXQuoteConformance(t *testing.T) {
	q4 := trustee(t, "tdx/tdx_quote_4.dat")
	opts := Options{Now: at("2026-11-26T00:00:00Z"), AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
	flipped := bytes.Clone(q4)
	flipped[48+136] ^= 1 // MRTD
	q5 := trustee(t, "tdx/tdx_quote_5.dat")
	flipped5 := bytes.Clone(q5)
	flipped5[54+136] ^= 1 // MRTD, after the body type and size
	flippedSvc5 := bytes.Clone(q5)
	flippedSvc5[54+0x288-1] ^= 1 // the last byte of MRSERVICETD
	flippedQE5 := bytes.Clone(q5)
	flippedQE5[54+0x288+4+128+6+20] ^= 1 // QE report MISCSELECT
	sgx5 := bytes.Clone(q5)
	sgx5[48] = 1 // body type 1: an SGX enclave report
	for _, tc := range []struct {
		name         string
		quote, nonce []byte
		opts         Options
		class, cause error
		check        string
	}{
		{name: "v4", quote: q4, opts: opts},
		{name: "v4, its report data as nonce", quote: q4, nonce: q4[568:632], opts: opts},
		{name: "v4 changed byte", quote: flipped, opts: opts, class: ErrRejected, check: checkSignature},
		{name: "v4 wrong nonce", quote: q4, nonce: []byte("challenge"), opts: opts, class: ErrRejected, cause: ErrReportData, check: CheckReportData},
		{name: "v4 truncated", quote: q4[:len(q4)-1], opts: opts, class: ErrRejected, check: checkParse},
		{name: "v4 collateral required", quote: q4, opts: Options{Now: opts.Now, AllowUncheckedRevocation: true}, class: ErrCannotCheck, cause: errMissingCollateral, check: checkCollateral},
		{name: "v5 td 1.5", quote: q5, opts: opts},
		{name: "v5, its report data as nonce", quote: q5, nonce: q5[574:638], opts: opts},
		{name: "v5 changed byte", quote: flipped5, opts: opts, class: ErrRejected, check: checkSignature},
		{name: "v5 changed mrservicetd", quote: flippedSvc5, opts: opts, class: ErrRejected, check: checkSignature},
		{name: "v5 changed qe report", quote: flippedQE5, opts: opts, class: ErrRejected, check: checkQEReport},
		{name: "v5 wrong nonce", quote: q5, nonce: []byte("challenge"), opts: opts, class: ErrRejected, cause: ErrReportData, check: CheckReportData},
		{name: "v5 truncated", quote: q5[:len(q5)-1], opts: opts, class: ErrRejected, check: checkParse},
		{name: "v5 sgx body type", quote: sgx5, opts: opts, class: ErrCannotCheck, cause: errUnsupported, check: checkFormat},
		{name: "v5 tcb collateral", quote: q5, opts: Options{Now: opts.Now, AllowUncheckedRevocation: true, Collateral: &Collateral{TDXTCBInfo: []byte("{}")}},
			class: ErrCannotCheck, cause: errUnsupported, check: checkCollateral},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := verifyTDXQuote(tc.quote, tc.nonce, tc.opts)
			if tc.class != nil {
				wantErr(t, err, tc.class, tc.cause, tc.check)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			rd := tc.quote[568:632]
			if tc.quote[0] == 5 {
				rd = tc.quote[574:638]
			}
			if res.RootID != "intel-sgx-root" || res.Collateral != StatusSkipped || !bytes.Equal(res.ReportData[:], rd) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestVerifyRawRefusesOptions: VerifyRaw refuses a format it does not know
// and certificates for a format that carries its own.
func TestVerifyRawRefusesOptions(t *testing.T) {
	opts := Options{Now: time.Now}
	for _, c := range []struct {
		format string
		certs  []byte
	}{{"snp", nil}, {"", nil}, {rawTDXQuote, []byte("x")}, {trusteeAzureSNP, []byte("x")}, {trusteeAzureTDX, []byte("x")}} {
		if _, err := VerifyRaw(c.format, []byte("data"), c.certs, nil, opts); !errors.Is(err, ErrBadOptions) {
			t.Errorf("format %q, certs %q: %v, want ErrBadOptions", c.format, c.certs, err)
		}
	}
}
