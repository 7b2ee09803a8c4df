package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/google/go-tdx-guest/pcs"
	testcases "github.com/google/go-tdx-guest/testing"
)

func TestIntelRootIsGoTdxGuests(t *testing.T) {
	b := tdxtest.Read(t, "verify/trusted_root.pem")
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("module root is not pem")
	}
	sum := sha256.Sum256(blk.Bytes)
	if hex.EncodeToString(sum[:]) != intelSGXRootCASHA256 {
		t.Fatal("pinned intel root differs from go-tdx-guest's embedded root")
	}
	rs, err := roots()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rs.intel.Raw, blk.Bytes) {
		t.Fatal("loaded intel root differs")
	}
}

func TestTDXSimulatedAccepted(t *testing.T) {
	rd := testRD(t, "tdx ok")
	ev := simTDX(t, fakeqe.Options{}, rd)
	res := verifySim(t, ev, rd)
	td := fakeqe.DefaultTD()
	if !res.Simulated || res.RootID != "sim-intel-sgx-root" || res.Platform != evidence.PlatformTDX {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(res.Measurement, td.MRTD[:]) || res.ReportData != rd.Bytes() || res.Debug {
		t.Fatal("measurement, report data or debug wrong")
	}
	if res.TCB != hex.EncodeToString(td.TeeTcbSvn[:]) || res.TDX.Body.RTMR != td.RTMR {
		t.Fatalf("tcb %q", res.TCB)
	}
	if res.Collateral != StatusSkipped || res.Revocation != StatusSkipped || res.TCBStatus != "" {
		t.Fatalf("collateral %q revocation %q", res.Collateral, res.Revocation)
	}
}

// Evidence of the simulated TDX platform claiming to be hardware is
// checked against Intel's root only, and fails.
func TestTDXSimSignedClaimingReal(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	ev.Simulated = false
	_, err := Verify(ev, rd, simOpts())
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
}

func TestTDXWrongRootAndReportData(t *testing.T) {
	rd := testRD(t, "tdx")
	h, err := fakeqe.NewHierarchy("another hierarchy")
	if err != nil {
		t.Fatal(err)
	}
	ev := simTDX(t, fakeqe.Options{Hierarchy: h}, rd)
	_, err = Verify(ev, rd, simOpts())
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)

	ev = simTDX(t, fakeqe.Options{}, rd)
	_, err = Verify(ev, testRD(t, "other"), simOpts())
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
}

func TestTDXMissingOrInconsistentChain(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	bad := cloneEvidence(ev)
	bad.CertChain = nil
	_, err := Verify(bad, rd, simOpts())
	wantErr(t, err, ErrRejected, nil, checkParse)

	bad = cloneEvidence(ev)
	bad.CertChain[0], bad.CertChain[1] = bad.CertChain[1], bad.CertChain[0]
	_, err = Verify(bad, rd, simOpts())
	wantErr(t, err, ErrRejected, nil, checkParse)

	bad = cloneEvidence(ev)
	bad.Aux = map[string][]byte{"x": {1}}
	_, err = Verify(bad, rd, simOpts())
	wantErr(t, err, ErrRejected, nil, checkParse)
}

// TDX quote regions (tdxquote layout).
const (
	offHeader   = 0x08 // header: PCESVN bytes
	offBody     = 0x30 // after the 48-byte header: TEE_TCB_SVN
	offMRTD     = offBody + 0x88
	offRD       = offBody + 0x208
	offSig      = offBody + 0x248 + 4 // after the body and the signed-data length: quote signature
	offAK       = offSig + 64         // attestation key
	offQEReport = offAK + 64 + 6      // QE report
	offQESig    = offQEReport + 0x180 // after the 384-byte QE report
	offQEAuth   = offQESig + 64 + 2   // QE auth data
)

func TestTDXTampered(t *testing.T) {
	rd := testRD(t, "tdx")
	good := simTDX(t, fakeqe.Options{}, rd)
	for _, c := range []struct {
		name  string
		off   int
		check string
	}{
		{"header", offHeader, checkSignature},
		{"body tcb svn", offBody, checkSignature},
		{"body mrtd", offMRTD, checkSignature},
		{"body report data", offRD, checkSignature},
		{"quote signature", offSig + 3, checkSignature},
		{"attestation key", offAK + 5, ""},
		{"qe report", offQEReport + 0x30, checkQEReport},
		{"qe report data", offQEReport + 0x140, checkQEReport},
		{"qe report signature", offQESig + 7, checkQEReport},
		{"qe auth data", offQEAuth, checkQEReport},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := cloneEvidence(good)
			ev.Blob[c.off] ^= 0x01
			_, err := Verify(ev, rd, simOpts())
			wantErr(t, err, ErrRejected, nil, c.check)
		})
	}
	t.Run("pck leaf signature", func(t *testing.T) {
		q, err := tdxquote.Parse(good.Blob)
		if err != nil {
			t.Fatal(err)
		}
		chain := cloneEvidence(good).CertChain
		chain[0][len(chain[0])-1] ^= 0x01
		q.PCKChain = tdxquote.EncodePCKChain(chain)
		blob, err := q.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ev := cloneEvidence(good)
		ev.Blob, ev.CertChain = blob, chain
		_, err = Verify(ev, rd, simOpts())
		wantErr(t, err, ErrRejected, nil, checkChain)
	})
}

var realTDXSamples = []string{tdxtest.SampleSPR, tdxtest.SampleCOS}

func TestTDXRealSamplesToIntelRoot(t *testing.T) {
	for _, name := range realTDXSamples {
		t.Run(name, func(t *testing.T) {
			ev, rd := tdxtest.Evidence(t, name)
			opts := Options{Now: fixedNow, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
			res, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
			if err != nil {
				t.Fatalf("real quote rejected: %v", err)
			}
			if res.Simulated || res.RootID != "intel-sgx-root" || res.Collateral != StatusSkipped {
				t.Fatalf("result %+v", res)
			}
			// Negative: report data, tampering, simulation roots.
			other := rd
			other[63] ^= 1
			_, err = verifyRaw(ev, other, evidence.ReportData{}, opts)
			wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
			for _, off := range []int{offHeader, offMRTD, offSig + 1, offQEReport + 0x30, offQESig + 1} {
				bad := cloneEvidence(ev)
				bad.Blob[off] ^= 1
				_, err := verifyRaw(bad, rd, evidence.ReportData{}, opts)
				wantErr(t, err, ErrRejected, nil, "")
			}
			sim := cloneEvidence(ev)
			sim.Simulated = true
			o := opts
			o.AllowSimulated = true
			_, err = verifyRaw(sim, rd, evidence.ReportData{}, o)
			wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
		})
	}
}

// shippedCollateral is go-tdx-guest's sample PCS collateral: bodies from the
// module's testdata, issuer chains from its testing package (they exist
// there only as header values).
func shippedCollateral(t testing.TB) *Collateral {
	t.Helper()
	chain := func(h map[string][]string, phrase string) []byte {
		s, err := url.QueryUnescape(h[phrase][0])
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	c := tdxtest.ShippedCollateral(t)
	return &Collateral{
		TDXTCBInfo:               c.TcbInfo,
		TDXTCBInfoIssuerChain:    chain(testcases.TcbInfoHeader, pcs.TcbInfoIssuerChainPhrase),
		TDXQEIdentity:            c.QeIdentity,
		TDXQEIdentityIssuerChain: chain(testcases.QeIdentityHeader, pcs.SgxQeIdentityIssuerChainPhrase),
		TDXPCKCRL:                c.PckCrl,
		TDXPCKCRLIssuerChain:     chain(testcases.PckCrlHeader, pcs.SgxPckCrlIssuerChainPhrase),
		TDXRootCRL:               c.RootCrl,
	}
}

// The collateral shipped with go-tdx-guest expired in July 2023 (TCB info
// nextUpdate 2023-07-18, QE identity 2023-07-08): verification with it is
// rejected as expired, at a fixed clock and at the wall clock.
func TestTDXShippedCollateralExpired(t *testing.T) {
	ev, rd := tdxtest.Evidence(t, realTDXSamples[0])
	for name, now := range map[string]func() time.Time{
		"fixed 2024": func() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) },
		"wall clock": time.Now,
		"test clock": fixedNow,
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{Now: now, Collateral: shippedCollateral(t)}
			_, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
			wantErr(t, err, ErrRejected, errCollateralExpired, checkCollateral)
		})
	}
}

func TestTDXShippedCollateralInsideValidity(t *testing.T) {
	// Inside its validity the collateral is used, but the sample's
	// TEE_TCB_SVN matches no TCB level in it (go-tdx-guest documents this),
	// so it is rejected for that, not for expiry.
	ev, rd := tdxtest.Evidence(t, realTDXSamples[0])
	opts := Options{Now: func() time.Time { return time.Date(2023, 7, 1, 1, 0, 0, 0, time.UTC) }, Collateral: shippedCollateral(t)}
	_, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
	wantErr(t, err, ErrRejected, nil, checkCollateral)
	if errorsIs(err, errCollateralExpired) {
		t.Fatalf("collateral reported expired inside its validity: %v", err)
	}
}

func TestTDXPartialCollateral(t *testing.T) {
	ev, rd := tdxtest.Evidence(t, realTDXSamples[0])
	c := shippedCollateral(t)
	c.TDXQEIdentity = nil
	_, err := verifyRaw(ev, rd, evidence.ReportData{}, Options{Now: fixedNow, Collateral: c})
	wantErr(t, err, ErrCannotCheck, errMissingCollateral, checkCollateral)
}

func TestTDXCollateralAgainstSimulatedQuote(t *testing.T) {
	// Intel-signed collateral does not verify under the simulation root.
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	opts := simOpts()
	opts.Collateral = shippedCollateral(t)
	_, err := Verify(ev, rd, opts)
	wantErr(t, err, ErrRejected, nil, checkCollateral)
}

func TestLoadCollateralDir(t *testing.T) {
	dir := t.TempDir()
	c := shippedCollateral(t)
	crl := testfixture.SimSEVCRL(t, testNow.Add(-time.Hour), testNow.Add(time.Hour))
	for name, b := range map[string][]byte{
		fileTDXTCBInfo: c.TDXTCBInfo, fileTDXTCBInfoChain: c.TDXTCBInfoIssuerChain,
		fileTDXQEIdentity: c.TDXQEIdentity, fileTDXQEIdentityChain: c.TDXQEIdentityIssuerChain,
		fileTDXPCKCRL: c.TDXPCKCRL, fileTDXPCKCRLIssuerChain: c.TDXPCKCRLIssuerChain,
		fileTDXRootCRL: c.TDXRootCRL, dirSEVSNPCRLs + "/milan.crl": crl,
	} {
		testfile.Write(t, dir, name, b)
	}
	got, err := LoadCollateralDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.TDXTCBInfo, c.TDXTCBInfo) || !bytes.Equal(got.TDXRootCRL, c.TDXRootCRL) ||
		len(got.SEVSNPCRLs) != 1 || !bytes.Equal(got.SEVSNPCRLs[0], crl) {
		t.Fatal("collateral not loaded")
	}
	empty, err := LoadCollateralDir(t.TempDir())
	if err != nil || empty.tdxAny() || len(empty.SEVSNPCRLs) != 0 {
		t.Fatalf("empty dir: %v", err)
	}
	big := t.TempDir()
	testfile.Write(t, big, fileTDXTCBInfo, make([]byte, MaxCollateralFile+1))
	if _, err := LoadCollateralDir(big); err == nil {
		t.Fatal("oversized collateral accepted")
	}
}

// TestTDXCertificationChainNames: the hand-written PCK chain check (the
// only one a version 5 quote gets) refuses a chain whose names are not
// Intel's PCK certificate and CA, or that is signed with another algorithm,
// before anything else, even under a trusted root.
func TestTDXCertificationChainNames(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tmpl := func(cn string, serial int64, ca bool, alg x509.SignatureAlgorithm) *x509.Certificate {
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			IsCA: ca, BasicConstraintsValid: true, SignatureAlgorithm: alg,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
	}
	rootKey, interKey, leafKey := key(), key(), key()
	rootTmpl := tmpl("Intel SGX Root CA", 1, true, x509.ECDSAWithSHA256)
	root := testcert.Create(t, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	pool := x509.NewCertPool()
	pool.AddCert(root)
	chain := func(leafCN, interCN string, leafAlg x509.SignatureAlgorithm) [][]byte {
		inter := testcert.Create(t, tmpl(interCN, 2, true, x509.ECDSAWithSHA256), root, &interKey.PublicKey, rootKey)
		leaf := testcert.Create(t, tmpl(leafCN, 3, false, leafAlg), inter, &leafKey.PublicKey, interKey)
		return [][]byte{leaf.Raw, inter.Raw, root.Raw}
	}
	q := &tdxquote.Quote{}
	for _, c := range []struct {
		name  string
		chain [][]byte
		want  string
	}{
		{"intel names", chain("Intel SGX PCK Certificate", "Intel SGX PCK Platform CA", x509.ECDSAWithSHA256), "qe report signature does not verify under the pck key"},
		{"processor ca", chain("Intel SGX PCK Certificate", "Intel SGX PCK Processor CA", x509.ECDSAWithSHA256), "qe report signature does not verify under the pck key"},
		{"other leaf name", chain("Some Certificate", "Intel SGX PCK Platform CA", x509.ECDSAWithSHA256), `pck chain names "Some Certificate" issued by "Intel SGX PCK Platform CA", not an intel sgx pck certificate and ca`},
		{"other ca name", chain("Intel SGX PCK Certificate", "Some CA", x509.ECDSAWithSHA256), `pck chain names "Intel SGX PCK Certificate" issued by "Some CA", not an intel sgx pck certificate and ca`},
		{"sha-384 signature", chain("Intel SGX PCK Certificate", "Intel SGX PCK Platform CA", x509.ECDSAWithSHA384), `pck chain certificate "Intel SGX PCK Certificate" is signed with ECDSA-SHA384, not ecdsa with sha-256`},
	} {
		err := checkTDXCertification(q, c.chain, pool, now)
		var e *Error
		if !errors.As(err, &e) || e.Err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
