package verify

import (
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/verify/platform"
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
	b.Run("sev-snp-cached", func(b *testing.B) {
		f := attest(b, simSEV(b, sim.Options{}), newRun(b))
		pol, opts := f.simPolicy(), f.opts()
		opts.CertCache = &platform.CertCache{}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Verify(f.att, f.ev, f.bundle, pol, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
