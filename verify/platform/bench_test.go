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
		opts.CertCache = NewCertCache(0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Verify(ev, rd, opts); err != nil {
			b.Fatal(err)
		}
	}
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
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := snpevidence.Parse(ev)
		if err != nil {
			b.Fatal(err)
		}
		a, err := p.Attestation()
		if err != nil {
			b.Fatal(err)
		}
		if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: testNow, TrustedRoots: roots}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRealSEV(b *testing.B, cache bool) {
	ev, rd := realSEV(b)
	opts := Options{Now: fixedNow, AllowUncheckedRevocation: true}
	if cache {
		opts.CertCache = NewCertCache(0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := verifyRaw(ev, rd, evidence.ReportData{}, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSEVRealVerify(b *testing.B)       { benchRealSEV(b, false) }
func BenchmarkSEVRealVerifyCached(b *testing.B) { benchRealSEV(b, true) }

func BenchmarkSEVRealGoSevGuestDirect(b *testing.B) {
	ev, _ := realSEV(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := snpevidence.Parse(ev)
		if err != nil {
			b.Fatal(err)
		}
		a, err := p.Attestation()
		if err != nil {
			b.Fatal(err)
		}
		if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: testNow}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTDXSimVerify(b *testing.B) {
	rd := testRD(b, "bench")
	ev := simTDX(b, fakeqe.Options{}, rd)
	opts := simOpts()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Verify(ev, rd, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTDXSimGoTdxGuestDirect(b *testing.B) {
	rd := testRD(b, "bench")
	ev := simTDX(b, fakeqe.Options{}, rd)
	rs, err := roots()
	if err != nil {
		b.Fatal(err)
	}
	ts := &tdxverify.TimeSet{PckCertChain: testNow, TcbInfo: testNow, QeIdentity: testNow, PckCrl: testNow, RootCaCrl: testNow}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		q, err := tdxabi.QuoteToProto(ev.Blob)
		if err != nil {
			b.Fatal(err)
		}
		if err := tdxverify.TdxQuote(q, &tdxverify.Options{TrustedRoots: rs.simPool, Now: ts}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTPMVerify(b *testing.B) {
	fx := loadTPMFixture(b)
	opts := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Verify(fx.Evidence, fx.ReportData, opts); err != nil {
			b.Fatal(err)
		}
	}
}
