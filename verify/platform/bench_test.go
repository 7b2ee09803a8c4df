package platform

import (
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
	tdxabi "github.com/google/go-tdx-guest/abi"
	tdxverify "github.com/google/go-tdx-guest/verify"
)

// Benchmarks run Verify beside the vendor libraries called directly on the
// same input, in the same run. The direct calls do strictly less: no strict
// parse, no REPORT_DATA or binding checks, no result.

func benchSEV(b *testing.B, cache bool) {
	rd := testRD(b, "bench")
	ev := simSEV(b, sim.Options{}, rd)
	opts := simOpts()
	if cache {
		opts.CertCache = &CertCache{}
	}
	benchLoop(b, func() error {
		_, err := Verify(ev, rd, opts)
		return err
	})
}

func BenchmarkSEVSimVerify(b *testing.B)       { benchSEV(b, false) }
func BenchmarkSEVSimVerifyCached(b *testing.B) { benchSEV(b, true) }

// BenchmarkSEVSimGoSevGuestDirect is verify.SnpAttestation on the same
// simulated evidence with the simulation roots (parse included, as Verify's
// input is also raw evidence).
func BenchmarkSEVSimGoSevGuestDirect(b *testing.B) {
	rd := testRD(b, "bench")
	ev := simSEV(b, sim.Options{}, rd)
	r := simroots.SEVSNPRoots()[0]
	roots := map[string][]*trust.AMDRootCerts{"Milan": {{ProductLine: "Milan", ProductCerts: &trust.ProductCerts{Ark: r.ARK, Ask: r.ASK}}}}
	benchLoop(b, func() error {
		return snpAttestation(ev, &verify.Options{DisableCertFetching: true, Now: testNow, TrustedRoots: roots})
	})
}

// snpAttestation is verify.SnpAttestation on raw evidence, parse included.
func snpAttestation(ev *evidence.Evidence, opts *verify.Options) error {
	p, err := snpevidence.Parse(ev)
	if err != nil {
		return err
	}
	a, err := p.Attestation()
	if err != nil {
		return err
	}
	return verify.SnpAttestation(a, opts)
}

// benchLoop times f, which must not fail, with allocations reported.
func benchLoop(b *testing.B, f func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRealSEV(b *testing.B, cache bool) {
	ev, rd := realSEV(b)
	opts := Options{Now: fixedNow, AllowUncheckedRevocation: true}
	if cache {
		opts.CertCache = &CertCache{}
	}
	benchLoop(b, func() error {
		_, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
		return err
	})
}

func BenchmarkSEVRealVerify(b *testing.B)       { benchRealSEV(b, false) }
func BenchmarkSEVRealVerifyCached(b *testing.B) { benchRealSEV(b, true) }

func BenchmarkSEVRealGoSevGuestDirect(b *testing.B) {
	ev, _ := realSEV(b)
	benchLoop(b, func() error {
		return snpAttestation(ev, &verify.Options{DisableCertFetching: true, Now: testNow})
	})
}

func BenchmarkTDXSimVerify(b *testing.B) {
	rd := testRD(b, "bench")
	ev := simTDX(b, fakeqe.Options{}, rd)
	opts := simOpts()
	benchLoop(b, func() error {
		_, err := Verify(ev, rd, opts)
		return err
	})
}

func BenchmarkTDXSimGoTdxGuestDirect(b *testing.B) {
	rd := testRD(b, "bench")
	ev := simTDX(b, fakeqe.Options{}, rd)
	rs, err := roots()
	if err != nil {
		b.Fatal(err)
	}
	ts := &tdxverify.TimeSet{PckCertChain: testNow, TcbInfo: testNow, QeIdentity: testNow, PckCrl: testNow, RootCaCrl: testNow}
	benchLoop(b, func() error {
		q, err := tdxabi.QuoteToProto(ev.Blob)
		if err != nil {
			return err
		}
		return tdxverify.TdxQuote(q, &tdxverify.Options{TrustedRoots: rs.simPool, Now: ts})
	})
}

func BenchmarkTPMVerify(b *testing.B) {
	fx := loadTPMFixture(b)
	opts := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}}
	benchLoop(b, func() error {
		_, err := Verify(fx.Evidence, fx.ReportData, opts)
		return err
	})
}
