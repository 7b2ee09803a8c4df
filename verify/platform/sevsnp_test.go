package platform

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/teeclaims"
	"github.com/google/go-sev-guest/abi"
)

const sevModule = "github.com/google/go-sev-guest"

func TestSEVSimulatedAccepted(t *testing.T) {
	rd := testRD(t, "sev ok")
	meas := bytes.Repeat([]byte{0x5a}, 48)
	host := bytes.Repeat([]byte{0x11}, 32)
	ev := simSEV(t, sim.Options{Measurement: meas, HostData: host}, rd)
	res := verifySim(t, ev, rd)
	if !res.Simulated || res.Platform != evidence.PlatformSEVSNP || res.RootID != "sim-amd-ark-milan" {
		t.Fatalf("result %+v", res)
	}
	if !bytes.Equal(res.Measurement, meas) || !bytes.Equal(res.HostData, host) || res.ReportData != rd.Bytes() {
		t.Fatal("measurement, host data or report data not reported")
	}
	if res.TCB != "7308000000000003" || res.Debug || len(res.ChipID) != 64 {
		t.Fatalf("tcb %q debug %v chip id %d bytes", res.TCB, res.Debug, len(res.ChipID))
	}
	if res.Revocation != StatusSkipped || res.Collateral != statusNotApplicable {
		t.Fatalf("revocation %q collateral %q", res.Revocation, res.Collateral)
	}
	if res.SEVSNP.ProductLine != "Milan" || res.SEVSNP.Signer != "vcek" || res.SEVSNP.Firmware != "1.55.21" {
		t.Fatalf("claims %+v", res.SEVSNP)
	}
	// The TEE claims come from the check's own parse: what teeclaims
	// derives from the evidence.
	want, err := teeclaims.Derive(ev)
	if err != nil || !reflect.DeepEqual(res.TEEClaims, want) {
		t.Fatalf("tee claims %+v, teeclaims.Derive %+v, %v", res.TEEClaims, want, err)
	}
}

// Evidence signed by the simulation roots but claiming to be hardware is
// verified against AMD's roots only, and fails.
func TestSEVSimSignedClaimingReal(t *testing.T) {
	rd := testRD(t, "sev")
	ev := simSEV(t, sim.Options{}, rd)
	ev.Simulated = false
	for _, allow := range []bool{false, true} {
		opts := simOpts()
		opts.AllowSimulated = allow
		_, err := Verify(ev, rd, opts)
		wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
	}
}

func TestSEVWrongReportData(t *testing.T) {
	ev := simSEV(t, sim.Options{}, testRD(t, "a"))
	_, err := Verify(ev, testRD(t, "b"), simOpts())
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
}

func TestSEVMissingChain(t *testing.T) {
	rd := testRD(t, "sev")
	ev := simSEV(t, sim.Options{}, rd)
	ev.CertChain, ev.Aux = nil, nil
	_, err := Verify(ev, rd, simOpts())
	wantErr(t, err, ErrRejected, snpevidence.ErrMalformedEvidence, checkParse)
}

func TestSEVTampered(t *testing.T) {
	rd := testRD(t, "sev")
	good := simSEV(t, sim.Options{}, rd)
	for _, c := range []struct {
		name  string
		off   int
		check string
	}{
		{"guest svn (header)", 0x04, checkSignature},
		{"family id", 0x10, checkSignature},
		{"report data", 0x50, checkSignature},
		{"measurement", 0x90, checkSignature},
		{"host data", 0xC0, checkSignature},
		{"chip id", 0x1A0, checkSignature},
		{"signature r", 0x2A0, checkSignature},
		{"signature s", 0x2A0 + 0x48, checkSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := cloneEvidence(good)
			ev.Blob[c.off] ^= 0x01
			_, err := Verify(ev, rd, simOpts())
			wantErr(t, err, ErrRejected, nil, "")
		})
	}
	t.Run("leaf certificate signature", func(t *testing.T) {
		p, err := snpevidence.Parse(good)
		if err != nil {
			t.Fatal(err)
		}
		leaf := append([]byte(nil), p.Leaf.Raw...)
		leaf[len(leaf)-1] ^= 0x01
		ev, err := snpevidence.Build(good.Blob, nil, leaf, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(ev, rd, simOpts())
		wantErr(t, err, ErrRejected, nil, checkChain)
	})
	t.Run("leaf from another hierarchy", func(t *testing.T) {
		// The real AMD-issued VCEK of go-sev-guest's sample is a valid P-384
		// leaf, but it did not sign this report and does not chain to the
		// simulation roots.
		vcek := tdxtest.ReadModule(t, sevModule, "verify/testdata/vcek.testcer")
		ev, err := snpevidence.Build(good.Blob, nil, vcek, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Verify(ev, rd, simOpts())
		wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
	})
}

func TestSEVRevocation(t *testing.T) {
	rd := testRD(t, "sev")
	ev := simSEV(t, sim.Options{}, rd)
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	ask := simroots.SEVSNPRoots()[0].ASK
	day := 24 * time.Hour
	base := simOpts()
	base.AllowUncheckedRevocation = false

	t.Run("checked", func(t *testing.T) {
		opts := base
		opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day), big.NewInt(424242))}}
		res, err := Verify(ev, rd, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Revocation != StatusChecked {
			t.Fatalf("revocation %q", res.Revocation)
		}
	})
	for name, serial := range map[string]*big.Int{"ask revoked": ask.SerialNumber, "vcek revoked": p.Leaf.SerialNumber} {
		t.Run(name, func(t *testing.T) {
			opts := base
			opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{testfixture.SimSEVCRL(t, testNow.Add(-day), testNow.Add(day), serial)}}
			_, err := Verify(ev, rd, opts)
			wantErr(t, err, ErrRejected, ErrRevoked, checkRevocation)
		})
	}
	t.Run("expired crl", func(t *testing.T) {
		opts := base
		opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{testfixture.SimSEVCRL(t, testNow.Add(-3*day), testNow.Add(-day))}}
		_, err := Verify(ev, rd, opts)
		wantErr(t, err, ErrRejected, errCollateralExpired, checkRevocation)
	})
	t.Run("crl of another issuer is not used", func(t *testing.T) {
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		opts := base
		opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{testfixture.SignCRL(t, simroots.SEVSNPRoots()[0].ARK, other, testNow.Add(-day), testNow.Add(day))}}
		_, err = Verify(ev, rd, opts)
		wantErr(t, err, ErrCannotCheck, errMissingCollateral, checkRevocation)
	})
	t.Run("garbage crl", func(t *testing.T) {
		opts := base
		opts.Collateral = &Collateral{SEVSNPCRLs: [][]byte{[]byte("not a crl")}}
		_, err := Verify(ev, rd, opts)
		wantErr(t, err, ErrCannotCheck, nil, checkRevocation)
	})
}

func TestSEVCertCache(t *testing.T) {
	rd := testRD(t, "sev")
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache := &CertCache{MaxEntries: 2}
	opts := simOpts()
	opts.CertCache = cache
	var first *Result
	for i := range 3 {
		ev, err := s.Quote(t.Context(), rd)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Verify(ev, rd, opts)
		if err != nil {
			t.Fatalf("quote %d: %v", i, err)
		}
		if first == nil {
			first = res
		} else if res.RootID != first.RootID || !bytes.Equal(res.ChipID, first.ChipID) || res.Revocation != first.Revocation {
			t.Fatal("cached verification reports differently")
		}
	}
	if cache.size() != 1 || cache.hits() != 2 {
		t.Fatalf("cache len %d hits %d, want 1 and 2", cache.size(), cache.hits())
	}
	// A warm cache still verifies every report's signature and binding.
	ev, err := s.Quote(t.Context(), rd)
	if err != nil {
		t.Fatal(err)
	}
	bad := cloneEvidence(ev)
	bad.Blob[0x90] ^= 1
	_, err = Verify(bad, rd, opts)
	wantErr(t, err, ErrRejected, nil, checkSignature)
	_, err = Verify(ev, testRD(t, "other"), opts)
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
	// Outside the chain's validity the entry is not used, and the chain
	// itself fails.
	late := opts
	late.Now = func() time.Time { return time.Date(2051, 1, 1, 0, 0, 0, 0, time.UTC) }
	_, err = Verify(ev, rd, late)
	wantErr(t, err, ErrRejected, nil, "")
	// The simulation entry is never used for evidence claiming to be real.
	real := cloneEvidence(ev)
	real.Simulated = false
	_, err = Verify(real, rd, opts)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
	// Revocation options are re-applied on a hit.
	strict := opts
	strict.AllowUncheckedRevocation = false
	_, err = Verify(ev, rd, strict)
	wantErr(t, err, ErrCannotCheck, errMissingCollateral, checkRevocation)
	// Capacity is bounded.
	for i := range 4 {
		other, err := sim.New(sim.Options{Seed: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := other.Quote(t.Context(), rd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ev, rd, opts); err != nil {
			t.Fatal(err)
		}
	}
	if cache.size() != 2 {
		t.Fatalf("cache len %d, want 2", cache.size())
	}
}

// realSEV returns go-sev-guest's real Milan hardware report (a v2 report of
// a debug guest) with the VCEK that signed it, and its REPORT_DATA.
func realSEV(t testing.TB) (*evidence.Evidence, [64]byte) {
	t.Helper()
	report := tdxtest.ReadModule(t, sevModule, "verify/testdata/attestation.bin")
	vcek := tdxtest.ReadModule(t, sevModule, "verify/testdata/vcek.testcer")
	ev, err := snpevidence.Build(report, nil, vcek, false)
	if err != nil {
		t.Fatal(err)
	}
	var rd [64]byte
	copy(rd[:], report[0x50:0x90])
	return ev, rd
}

func TestSEVRealSampleToAMDRoots(t *testing.T) {
	ev, rd := realSEV(t)
	opts := Options{Now: fixedNow, AllowUncheckedRevocation: true}
	res, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
	if err != nil {
		t.Fatalf("real report rejected: %v", err)
	}
	if res.Simulated || res.RootID != "amd-ark-milan" || !res.Debug || res.Revocation != StatusSkipped {
		t.Fatalf("result %+v", res)
	}
	if res.SEVSNP.Version != 2 || res.SEVSNP.ProductLine != "Milan" {
		t.Fatalf("claims %+v", res.SEVSNP)
	}
	// The sample is a debug guest: policy refuses it unless debug is allowed.
	err = CheckPolicy(res, Policy{Measurements: [][]byte{res.Measurement}})
	wantErr(t, err, ErrPolicy, nil, CheckDebug)
	if err := CheckPolicy(res, Policy{Measurements: [][]byte{res.Measurement}, AllowDebug: true}); err != nil {
		t.Fatalf("policy: %v", err)
	}

	// Cached and direct verification agree.
	opts.CertCache = &CertCache{}
	for range 2 {
		if _, err := verifyRaw(ev, rd, evidence.ReportData{}, opts); err != nil {
			t.Fatal(err)
		}
	}
	if opts.CertCache.hits() != 1 {
		t.Fatalf("hits %d", opts.CertCache.hits())
	}
}

func TestSEVRealSampleNegative(t *testing.T) {
	ev, rd := realSEV(t)
	opts := Options{Now: fixedNow, AllowUncheckedRevocation: true}
	t.Run("wrong report data", func(t *testing.T) {
		other := rd
		other[0] ^= 1
		_, err := verifyRaw(ev, other, evidence.ReportData{}, opts)
		wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)
	})
	t.Run("tampered", func(t *testing.T) {
		for _, off := range []int{0x08, 0x50, 0x90, 0x180, 0x2A0} {
			bad := cloneEvidence(ev)
			bad.Blob[off] ^= 0x80
			_, err := verifyRaw(bad, rd, evidence.ReportData{}, opts)
			wantErr(t, err, ErrRejected, nil, "")
		}
	})
	t.Run("marked simulated", func(t *testing.T) {
		sim := cloneEvidence(ev)
		sim.Simulated = true
		o := opts
		o.AllowSimulated = true
		_, err := verifyRaw(sim, rd, evidence.ReportData{}, o)
		wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkRoot)
	})
	t.Run("expired vcek", func(t *testing.T) {
		o := opts
		o.Now = func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) }
		_, err := verifyRaw(ev, rd, evidence.ReportData{}, o)
		wantErr(t, err, ErrRejected, nil, checkChain)
	})
	t.Run("vlek signer without vlek", func(t *testing.T) {
		// Claiming a VLEK signed the report (SIGNER_INFO) with the VCEK as
		// leaf: the chain is checked against the ASVK and fails.
		bad := cloneEvidence(ev)
		bad.Blob[0x48] = byte(abi.VlekReportSigner) << 2
		_, err := verifyRaw(bad, rd, evidence.ReportData{}, opts)
		wantErr(t, err, ErrRejected, nil, "")
	})
}
