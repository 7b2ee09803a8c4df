package platform

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// The Azure samples of the conformance set (testdata/azure-*, copied from
// Trustee with their NOTICE). Nonces are from the set's README.
var (
	azChallenge  = []byte("challenge")
	azV2Nonce, _ = hex.DecodeString("982f5c6e45df0ed3f10b6f60b02f0c8390e281300f3805e2279c16168cd6ae9aa398f647caa2338748cd0fd9f5f819ef")
)

func azFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	return testfile.Read(t, filepath.Join("testdata", dir, name))
}

// azOpts verifies real samples offline: no CRL or TDX collateral ships with
// them.
func azOpts() Options {
	return Options{Now: fixedNow, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
}

// bincodeQuote decodes quote.bin: Trustee's az-*-vtpm Quote in bincode
// (u64le-length signature and message, then a u64le count of 32-byte PCR
// values).
func bincodeQuote(t testing.TB, b []byte) (sig, msg []byte, pcrs [][]byte) {
	t.Helper()
	take := func(n uint64) []byte {
		if n > uint64(len(b)) {
			t.Fatal("bincode: short")
		}
		out := b[:n]
		b = b[n:]
		return out
	}
	u64 := func() uint64 { return binary.LittleEndian.Uint64(take(8)) }
	sig = take(u64())
	msg = take(u64())
	for n := u64(); n > 0; n-- {
		pcrs = append(pcrs, take(32))
	}
	if len(b) != 0 {
		t.Fatal("bincode: trailing bytes")
	}
	return sig, msg, pcrs
}

// quotePCRs keeps the values of the PCRs msg selects.
func quotePCRs(t testing.TB, msg []byte, all [][]byte) tpmquote.PCRValues {
	t.Helper()
	att, err := tpmquote.ParseAttest(msg)
	if err != nil {
		t.Fatal(err)
	}
	var out tpmquote.PCRValues
	for _, i := range att.PCRs {
		p := tpmquote.PCR{Index: i}
		copy(p.Value[:], all[i])
		out = append(out, p)
	}
	return out
}

func jsonQuote(t testing.TB, b []byte) (sig, msg []byte, pcrs [][]byte) {
	t.Helper()
	var q struct {
		Signature, Message string
		PCRs               []string
	}
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	for _, p := range q.PCRs {
		pcrs = append(pcrs, testfile.Hex(t, p))
	}
	return testfile.Hex(t, q.Signature), testfile.Hex(t, q.Message), pcrs
}

// azVCEK is the first certificate of vcek.pem; the test checks the others
// are the embedded Milan ASK and ARK.
func azVCEK(t testing.TB) []byte {
	t.Helper()
	rest := azFile(t, "azure-snp-vtpm", "vcek.pem")
	var ders [][]byte
	for {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		ders = append(ders, blk.Bytes)
	}
	if len(ders) != 3 {
		t.Fatalf("vcek.pem holds %d certificates", len(ders))
	}
	rs, err := rootsOrErr()
	if err != nil {
		t.Fatal(err)
	}
	milan := rs.amd["Milan"]
	if !bytes.Equal(ders[1], milan.certs.Ask.Raw) || !bytes.Equal(ders[2], milan.certs.Ark.Raw) {
		t.Fatal("vcek.pem's ask and ark are not the embedded milan ones")
	}
	return ders[0]
}

// azPieces builds the input from the binary samples of dir and a quote.
func azPieces(t testing.TB, dir, platform string, sig, msg []byte, pcrs [][]byte) *azureInput {
	in := &azureInput{platform: platform, hcl: azFile(t, dir, "hcl-report.bin"), sig: sig, attest: msg, pcrs: quotePCRs(t, msg, pcrs)}
	if platform == evidence.PlatformAzureSNP {
		in.vcek = azVCEK(t)
	} else {
		in.tdQuote = azFile(t, dir, "td-quote.bin")
	}
	return in
}

// TestAzureTrusteeSamples is the conformance table of the Azure samples
// through the library (cmd/packctl runs the same files through the binary).
func TestAzureTrusteeSamples(t *testing.T) {
	for _, tc := range []struct {
		dir, file, format string
		nonce             []byte
		version           int
		bound             bool
	}{
		{"azure-snp-vtpm", "evidence-v0.json", trusteeAzureSNP, azChallenge, 0, false},
		{"azure-snp-vtpm", "evidence-v1.json", trusteeAzureSNP, azChallenge, 1, false},
		{"azure-snp-vtpm", "evidence-v2.json", trusteeAzureSNP, azV2Nonce, 2, true},
		{"azure-tdx-vtpm", "evidence-v0.json", trusteeAzureTDX, azChallenge, 0, false},
	} {
		t.Run(tc.dir+"/"+tc.file, func(t *testing.T) {
			data := azFile(t, tc.dir, tc.file)
			res, err := verifyTrusteeAzure(tc.format, data, tc.nonce, azOpts())
			if err != nil {
				t.Fatal(err)
			}
			if res.Azure.TrusteeVersion != tc.version || res.Azure.UserDataBound != tc.bound || !bytes.Equal(res.Azure.QuoteNonce, tc.nonce) {
				t.Fatalf("version %d bound %v nonce %x", res.Azure.TrusteeVersion, res.Azure.UserDataBound, res.Azure.QuoteNonce)
			}
			if res.Simulated || res.RootID == "" || len(res.Azure.PCRs) == 0 || res.TEEClaims != nil {
				t.Fatalf("result %+v (an Azure result carries no TEE claims of its hardware report)", res)
			}
			// A wrong nonce is refused by the quote's nonce.
			_, err = verifyTrusteeAzure(tc.format, data, []byte("another nonce"), azOpts())
			wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
			// No nonce: verified, nonce unchecked.
			if _, err := verifyTrusteeAzure(tc.format, data, nil, azOpts()); err != nil {
				t.Fatal(err)
			}
			// The other platform's format is refused.
			other := map[string]string{trusteeAzureSNP: trusteeAzureTDX, trusteeAzureTDX: trusteeAzureSNP}[tc.format]
			_, err = verifyTrusteeAzure(other, data, tc.nonce, azOpts())
			wantErr(t, err, ErrRejected, nil, checkParse)
		})
	}
}

// TestAzureBinarySamples verifies the separate binary samples: the HCL
// report with each quote by its AK (quote.bin in bincode, tpm-quote-v1.json
// in hex), the SEV-SNP report with vcek.pem's VCEK, the TD report with
// td-quote.bin; tpm-quote.msg/.sig is by an AK of another VM.
func TestAzureBinarySamples(t *testing.T) {
	for _, tc := range []struct{ dir, platform string }{
		{"azure-snp-vtpm", evidence.PlatformAzureSNP},
		{"azure-tdx-vtpm", evidence.PlatformAzureTDX},
	} {
		sig, msg, pcrs := bincodeQuote(t, azFile(t, tc.dir, "quote.bin"))
		opts := azOpts()
		if _, err := verifyAzure(azPieces(t, tc.dir, tc.platform, sig, msg, pcrs), azureWant{nonce: azChallenge}, testNow, &opts); err != nil {
			t.Fatalf("%s quote.bin: %v", tc.dir, err)
		}
		sig, msg, pcrs = jsonQuote(t, azFile(t, tc.dir, "tpm-quote-v1.json"))
		if _, err := verifyAzure(azPieces(t, tc.dir, tc.platform, sig, msg, pcrs), azureWant{nonce: azChallenge}, testNow, &opts); err != nil {
			t.Fatalf("%s tpm-quote-v1.json: %v", tc.dir, err)
		}
	}
	_, _, pcrs := bincodeQuote(t, azFile(t, "azure-snp-vtpm", "quote.bin"))
	msg := azFile(t, "azure-snp-vtpm", "tpm-quote.msg")
	in := azPieces(t, "azure-snp-vtpm", evidence.PlatformAzureSNP, azFile(t, "azure-snp-vtpm", "tpm-quote.sig"), msg, pcrs)
	opts := azOpts()
	_, err := verifyAzure(in, azureWant{nonce: azChallenge}, testNow, &opts)
	wantErr(t, err, ErrRejected, nil, checkSignature)
}

// TestAzureTampered changes one thing at a time and expects its own
// reason.
func TestAzureTampered(t *testing.T) {
	base := func(dir, platform string) *azureInput {
		sig, msg, pcrs := bincodeQuote(t, azFile(t, dir, "quote.bin"))
		return azPieces(t, dir, platform, sig, msg, pcrs)
	}
	snp := func() *azureInput { return base("azure-snp-vtpm", evidence.PlatformAzureSNP) }
	tdx := func() *azureInput { return base("azure-tdx-vtpm", evidence.PlatformAzureTDX) }
	const claims = 1236 // offset of the runtime claims in an HCL report
	for _, tc := range []struct {
		name  string
		in    func() *azureInput
		edit  func(*azureInput)
		class error
		check string
	}{
		{"snp claims byte", snp, func(in *azureInput) { in.hcl[claims+40] ^= 1 }, ErrRejected, checkHCLBinding},
		{"snp ak byte", snp, func(in *azureInput) { in.hcl[claims+bytes.Index(in.hcl[claims:], []byte(`"n":"`))+20] ^= 1 }, ErrRejected, checkSignature},
		{"snp claims user-data", snp, func(in *azureInput) { in.hcl[len(in.hcl)-300] = '1' }, ErrRejected, checkHCLBinding},
		{"snp report byte", snp, func(in *azureInput) { in.hcl[32+0x90] ^= 1 }, ErrRejected, checkSignature},
		{"snp report vmpl", snp, func(in *azureInput) { in.hcl[32+0x30] = 1 }, ErrRejected, checkSignature},
		{"snp no vcek", snp, func(in *azureInput) { in.vcek = nil }, ErrCannotCheck, checkChain},
		{"snp quote byte", snp, func(in *azureInput) { in.attest[len(in.attest)-1] ^= 1 }, ErrRejected, checkSignature},
		{"snp pcr value", snp, func(in *azureInput) { in.pcrs[3].Value[0] ^= 1 }, ErrRejected, checkPCRs},
		{"snp pcr dropped", snp, func(in *azureInput) { in.pcrs = in.pcrs[1:] }, ErrRejected, checkPCRs},
		{"snp as tdx", snp, func(in *azureInput) { in.platform = evidence.PlatformAzureTDX }, ErrRejected, checkParse},
		{"snp simulated", snp, func(in *azureInput) { in.simulated = true }, ErrRejected, CheckSimulated},
		{"tdx claims user-data", tdx, func(in *azureInput) { in.hcl[len(in.hcl)-200] = '1' }, ErrRejected, checkHCLBinding},
		{"tdx td report data", tdx, func(in *azureInput) { in.hcl[32+128+40] ^= 1 }, ErrRejected, checkHCLBinding},
		{"tdx quote byte", tdx, func(in *azureInput) { in.tdQuote[48+200] ^= 1 }, ErrRejected, checkSignature},
		{"tdx quote trailing", tdx, func(in *azureInput) { in.tdQuote[len(in.tdQuote)-1] = 1 }, ErrRejected, checkParse},
		{"tdx pcr value", tdx, func(in *azureInput) { in.pcrs[0].Value[31] ^= 1 }, ErrRejected, checkPCRs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			in.hcl, in.attest, in.tdQuote = bytes.Clone(in.hcl), bytes.Clone(in.attest), bytes.Clone(in.tdQuote)
			tc.edit(in)
			opts := azOpts()
			_, err := verifyAzure(in, azureWant{nonce: azChallenge}, testNow, &opts)
			wantErr(t, err, tc.class, nil, tc.check)
		})
	}
}

func TestAzureTrusteeMalformed(t *testing.T) {
	v1 := azFile(t, "azure-snp-vtpm", "evidence-v1.json")
	for name, doc := range map[string][]byte{
		"unknown field": bytes.Replace(v1, []byte(`"version": 1`), []byte(`"version": 1, "x": 1`), 1),
		"not json":      []byte("{"),
		"empty":         []byte(`{}`),
	} {
		_, err := verifyTrusteeAzure(trusteeAzureSNP, doc, azChallenge, azOpts())
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	_, err := verifyTrusteeAzure(trusteeAzureSNP, bytes.Replace(v1, []byte(`"version": 1`), []byte(`"version": 3`), 1), azChallenge, azOpts())
	wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
	_, err = verifyTrusteeAzure("az-sev-vtpm", v1, azChallenge, azOpts())
	wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
	_, err = verifyTrusteeAzure(trusteeAzureSNP, v1, azChallenge, Options{})
	wantErr(t, err, ErrBadOptions, nil, checkOptions)
}

// FuzzTrusteeAzure: the Trustee evidence parser never panics and returns
// pieces only without an error; what it accepts, verification refuses or
// verifies without a panic.
func FuzzTrusteeAzure(f *testing.F) {
	f.Add(uint8(0), azFile(f, "azure-snp-vtpm", "evidence-v1.json"))
	f.Add(uint8(1), azFile(f, "azure-tdx-vtpm", "evidence-v0.json"))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		format := []string{trusteeAzureSNP, trusteeAzureTDX}[which%2]
		in, _, err := parseTrustee(format, data)
		if (err == nil) == (in == nil) {
			t.Fatalf("pieces %v with error %v", in, err)
		}
		if err != nil {
			return
		}
		res, err := verifyTrusteeAzure(format, data, azChallenge, azOpts())
		if (err == nil) == (res == nil) {
			t.Fatalf("result %v with error %v", res, err)
		}
	})
}
