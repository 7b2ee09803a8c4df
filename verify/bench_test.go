package verify

import (
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/loadstat"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidencedoc"
)

// BenchmarkVerify is Verify end to end (envelope, evidence document,
// bundle, hardware evidence, audit log, report, policy) per simulated
// platform.
func BenchmarkVerify(b *testing.B) {
	for name, q := range map[string]func() measurer{
		"sev-snp": func() measurer { return simSEV(b, sim.Options{}) },
		"tdx":     func() measurer { return simTDX(b, fakeqe.Options{}) },
	} {
		b.Run(name, func(b *testing.B) {
			f := attest(b, q(), newRun(b))
			pol, opts := f.simPolicy(), f.opts()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Verify(f.att, f.ev, f.bundle, pol, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// sev-snp-cached is the verifier service's configuration: a CertCache
	// shared across requests (chains and endorsement certificates).
	// cpu-ms/op is the process CPU time per verification, which depends
	// less than ns/op on what else the machine runs; after the loop the
	// same evidence item through verify/platform alone, as often, gives
	// platform-cpu-ms/op and the ratio x-platform-cpu (the service's
	// figure, less HTTP and the EAR).
	b.Run("sev-snp-cached", func(b *testing.B) {
		f := attest(b, simSEV(b, sim.Options{}), newRun(b))
		pol, opts := f.simPolicy(), f.opts()
		opts.CertCache = &platform.CertCache{}
		b.ReportAllocs()
		cpu0 := loadstat.SelfCPU(b)
		for b.Loop() {
			if _, err := Verify(f.att, f.ev, f.bundle, pol, opts); err != nil {
				b.Fatal(err)
			}
		}
		cpu := loadstat.SelfCPU(b) - cpu0
		platformOnly := platformOf(b, f, opts.CertCache)
		cpu0 = loadstat.SelfCPU(b)
		for range b.N {
			if err := platformOnly(); err != nil {
				b.Fatal(err)
			}
		}
		base := loadstat.SelfCPU(b) - cpu0
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
		b.ReportMetric(ms(cpu), "cpu-ms/op")
		b.ReportMetric(ms(base), "platform-cpu-ms/op")
		b.ReportMetric(float64(cpu)/float64(base), "x-platform-cpu")
	})
}

// platformOf returns verify/platform.Verify of f's evidence item with the
// options Verify gives it under f.simPolicy.
func platformOf(b *testing.B, f *fixture, cache *platform.CertCache) func() error {
	key, err := evidencedoc.SignerKey(f.ev)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := evidencedoc.Parse(f.ev, key)
	if err != nil {
		b.Fatal(err)
	}
	rd, err := doc.ReportData()
	if err != nil {
		b.Fatal(err)
	}
	opts := platform.Options{Now: fixedNow, AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, CertCache: cache}
	return func() error { _, err := platform.Verify(doc.Items[0].Evidence, rd, opts); return err }
}
