package sim_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sgtest "github.com/google/go-sev-guest/testing"
	"github.com/google/go-sev-guest/validate"
	"github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// verifyTime is a fixed instant inside the simulated certificates' validity.
var verifyTime = time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC)

var identity = ed25519.PublicKey(bytes.Repeat([]byte{7}, ed25519.PublicKeySize))

func reportData(t testing.TB, nonce byte) evidence.ReportData {
	t.Helper()
	rd, err := evidence.NewReportData([32]byte{nonce, 1, 2, 3}, identity, []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// quote is s's evidence for rd; a failure fails tb.
func quote(tb testing.TB, s *sim.Simulator, rd evidence.ReportData) *evidence.Evidence {
	tb.Helper()
	ev, err := s.Quote(context.Background(), rd)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

func newSim(t testing.TB, opts sim.Options) *sim.Simulator {
	t.Helper()
	s, err := sim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// simTrust is the verifier configuration that pins the simulated roots, built
// the way a verifier with AllowSimulated would: from the KDS-format PEM.
func simTrust(t testing.TB) map[string][]*trust.AMDRootCerts {
	t.Helper()
	r := trust.AMDRootCertsProduct(simroots.SEVSNPProductLine)
	if err := r.FromKDSCertBytes(simroots.SEVSNPCertChainPEM()); err != nil {
		t.Fatal(err)
	}
	return map[string][]*trust.AMDRootCerts{simroots.SEVSNPProductLine: {r}}
}

func simVerifyOptions(t testing.TB) *verify.Options {
	return &verify.Options{DisableCertFetching: true, Now: verifyTime, TrustedRoots: simTrust(t)}
}

// productionOptions are go-sev-guest's defaults (AMD's embedded roots) with
// the network switched off, so a rejection cannot come from a fetch.
func productionOptions() *verify.Options {
	o := verify.DefaultOptions()
	o.DisableCertFetching = true
	o.Getter = nil
	o.Now = verifyTime
	return o
}

func policyOptions(rd evidence.ReportData, measurement []byte) *validate.Options {
	b := rd.Bytes()
	vmpl := 0
	return &validate.Options{
		ReportData:  b[:],
		Measurement: measurement,
		GuestPolicy: abi.SnpPolicy{SMT: true}, // debug, migration agent: not allowed
		VMPL:        &vmpl,
	}
}

func TestSimEvidenceVerifiesWithSimRoots(t *testing.T) {
	meas := bytes.Repeat([]byte{0xab}, abi.MeasurementSize)
	s := newSim(t, sim.Options{Seed: []byte("machine-1"), Measurement: meas})
	rd := reportData(t, 1)
	ev := quote(t, s, rd)
	if !ev.Simulated || ev.Platform != evidence.PlatformSEVSNP || ev.Format != snpevidence.Format {
		t.Fatalf("evidence marking: simulated=%v platform=%q format=%q", ev.Simulated, ev.Platform, ev.Format)
	}
	if len(ev.Blob) != abi.ReportSize || len(ev.CertChain) != 3 {
		t.Fatalf("blob %d bytes, chain %d certs", len(ev.Blob), len(ev.CertChain))
	}
	a := testfixture.SEVAttestation(t, ev)
	if err := verify.SnpAttestation(a, simVerifyOptions(t)); err != nil {
		t.Fatalf("verify with simulated roots: %v", err)
	}
	if err := validate.SnpAttestation(a, policyOptions(rd, meas)); err != nil {
		t.Fatalf("validate: %v", err)
	}
	// Also with roots taken from SEVSNPRoots directly.
	r := simroots.SEVSNPRoots()[0]
	opts := &verify.Options{DisableCertFetching: true, Now: verifyTime, TrustedRoots: map[string][]*trust.AMDRootCerts{
		r.ProductLine: {{ProductLine: r.ProductLine, ProductCerts: &trust.ProductCerts{Ark: r.ARK, Ask: r.ASK}}},
	}}
	if err := verify.SnpAttestation(testfixture.SEVAttestation(t, ev), opts); err != nil {
		t.Fatalf("verify with SEVSNPRoots: %v", err)
	}
	// The leaf carries the TEST ONLY marker too.
	p, _ := snpevidence.Parse(ev)
	if !hasMarker(p.Leaf) || !hasMarker(p.Root) || !hasMarker(p.Intermediate) {
		t.Fatal("simulated certificates lack the test-only marker")
	}
}

func hasMarker(c *x509.Certificate) bool {
	if c == nil {
		return false
	}
	for _, n := range c.Subject.Names {
		if v, ok := n.Value.(string); ok && v == simroots.TestOnlyMarker {
			return true
		}
	}
	return false
}

func TestSimEvidenceRejectedByProductionRoots(t *testing.T) {
	ev := quote(t, newSim(t, sim.Options{}), reportData(t, 2))
	if err := verify.SnpAttestation(testfixture.SEVAttestation(t, ev), productionOptions()); err == nil {
		t.Fatal("production roots accepted simulated evidence")
	}
	// And with the network-capable defaults untouched but the chain present,
	// nothing is fetched and it still fails.
	o := verify.DefaultOptions()
	o.Now = verifyTime
	if err := verify.SnpAttestation(testfixture.SEVAttestation(t, ev), o); err == nil {
		t.Fatal("default options accepted simulated evidence")
	}
}

// verifiedQuote quotes rd on s, checks the report's signatures to the
// simulated roots, and returns it with s's launch measurement.
func verifiedQuote(t *testing.T, s *sim.Simulator, rd evidence.ReportData) (*spb.Attestation, []byte) {
	t.Helper()
	ev := quote(t, s, rd)
	a := testfixture.SEVAttestation(t, ev)
	if err := verify.SnpAttestation(a, simVerifyOptions(t)); err != nil {
		t.Fatal(err)
	}
	m, _ := s.LaunchMeasurement(context.Background())
	return a, m
}

func TestWrongReportDataFailsValidation(t *testing.T) {
	s := newSim(t, sim.Options{})
	a, m := verifiedQuote(t, s, reportData(t, 3))
	if err := validate.SnpAttestation(a, policyOptions(reportData(t, 4), m)); err == nil {
		t.Fatal("validation accepted a report over other report data")
	}
	other := bytes.Repeat([]byte{1}, abi.MeasurementSize)
	if err := validate.SnpAttestation(a, policyOptions(reportData(t, 3), other)); err == nil {
		t.Fatal("validation accepted another measurement")
	}
}

func TestDebugPolicyFailsValidation(t *testing.T) {
	s := newSim(t, sim.Options{Debug: true})
	rd := reportData(t, 5)
	a, m := verifiedQuote(t, s, rd)
	if err := validate.SnpAttestation(a, policyOptions(rd, m)); err == nil {
		t.Fatal("validation accepted a debuggable guest")
	}
}

func TestTamperedReportFailsSignature(t *testing.T) {
	ev := quote(t, newSim(t, sim.Options{}), reportData(t, 6))
	// Bytes in the signed region without structure (so parsing still
	// succeeds): REPORT_DATA, MEASUREMENT, HOST_DATA, CHIP_ID; and one byte
	// of the signature itself.
	for _, off := range []int{0x50, 0x8f, 0x90, 0xc0, 0x1a0, 0x2a0, 0x2a0 + 0x47} {
		bad := *ev
		bad.Blob = bytes.Clone(ev.Blob)
		bad.Blob[off] ^= 0x01
		if err := verify.SnpAttestation(testfixture.SEVAttestation(t, &bad), simVerifyOptions(t)); err == nil {
			t.Errorf("offset %#x: tampered report verified", off)
		}
	}
}

// replaceVCEK rebuilds ev with another VCEK certificate (and optionally
// re-signs the report with key).
func replaceVCEK(t *testing.T, ev *evidence.Evidence, vcekDER []byte, key *ecdsa.PrivateKey) *evidence.Evidence {
	t.Helper()
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	report := bytes.Clone(p.Report)
	if key != nil {
		d := sha512.Sum384(abi.SignedComponent(report))
		r, s, err := ecdsa.Sign(rand.Reader, key, d[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := abi.SetSignature(r, s, report); err != nil {
			t.Fatal(err)
		}
	}
	var entries []snpevidence.CertTableEntry
	for _, e := range p.CertTable {
		if e.GUID == snpevidence.GUIDVCEK {
			e.Data = vcekDER
		}
		entries = append(entries, e)
	}
	table, err := snpevidence.MarshalCertTable(entries)
	if err != nil {
		t.Fatal(err)
	}
	out, err := snpevidence.Build(report, table, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVCEKFromAnotherHierarchyFailsChain(t *testing.T) {
	ev := quote(t, newSim(t, sim.Options{}), reportData(t, 7))
	p, _ := snpevidence.Parse(ev)

	t.Run("go-sev-guest fake hierarchy", func(t *testing.T) {
		signer, err := sgtest.DefaultTestOnlyCertChain("Milan-B1", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		bad := replaceVCEK(t, ev, signer.Vcek.Raw, signer.Keys.Vcek)
		if err := verify.SnpAttestation(testfixture.SEVAttestation(t, bad), simVerifyOptions(t)); err == nil {
			t.Fatal("vcek of another hierarchy verified")
		}
		// Sanity: the same evidence verifies against its own hierarchy, so
		// the failure above is the chain, not the report.
		own := map[string][]*trust.AMDRootCerts{"Milan": {{ProductLine: "Milan", ProductCerts: &trust.ProductCerts{Ark: signer.Ark, Ask: signer.Ask}}}}
		if err := verify.SnpAttestation(testfixture.SEVAttestation(t, bad), &verify.Options{DisableCertFetching: true, Now: verifyTime, TrustedRoots: own}); err != nil {
			t.Fatalf("control: %v", err)
		}
	})

	t.Run("impostor ASK with the pinned name", func(t *testing.T) {
		rogue, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		parent := *p.Intermediate // same subject bytes as the pinned ASK
		parent.PublicKey = rogue.Public()
		tmpl := *p.Leaf
		tmpl.SerialNumber = big.NewInt(99)
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, &parent, p.Leaf.PublicKey, rogue)
		if err != nil {
			t.Fatal(err)
		}
		bad := replaceVCEK(t, ev, der, nil)
		if err := verify.SnpAttestation(testfixture.SEVAttestation(t, bad), simVerifyOptions(t)); err == nil {
			t.Fatal("vcek signed by an impostor ask verified")
		}
	})
}

func TestMissingChain(t *testing.T) {
	ev := quote(t, newSim(t, sim.Options{}), reportData(t, 8))
	bad := *ev
	bad.CertChain = nil
	bad.Aux = nil
	if _, err := snpevidence.Parse(&bad); !errors.Is(err, snpevidence.ErrMalformedEvidence) {
		t.Fatalf("Parse without chain = %v, want ErrMalformedEvidence", err)
	}
	// go-sev-guest offline, given a report with no VCEK, also refuses.
	a := testfixture.SEVAttestation(t, ev)
	a.CertificateChain = &spb.CertificateChain{}
	if err := verify.SnpAttestation(a, simVerifyOptions(t)); err == nil {
		t.Fatal("verified without a vcek")
	}
}

func TestQuotesAreFresh(t *testing.T) {
	s := newSim(t, sim.Options{})
	a := quote(t, s, reportData(t, 9))
	b := quote(t, s, reportData(t, 10))
	pa, _ := snpevidence.Parse(a)
	pb, _ := snpevidence.Parse(b)
	if pa.ReportData() == pb.ReportData() {
		t.Fatal("different report data gave the same REPORT_DATA")
	}
	want := reportData(t, 10).Bytes()
	if pb.ReportData() != want {
		t.Fatal("REPORT_DATA is not the requested value")
	}
	for _, ev := range []*evidence.Evidence{a, b} {
		if err := verify.SnpAttestation(testfixture.SEVAttestation(t, ev), simVerifyOptions(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQuoteRejectsZeroReportDataAndCanceledContext(t *testing.T) {
	s := newSim(t, sim.Options{})
	if _, err := s.Quote(context.Background(), evidence.ReportData{}); !errors.Is(err, evidence.ErrZeroReportData) {
		t.Fatalf("zero report data: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Quote(ctx, reportData(t, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	if _, err := s.SealingKey(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

func TestConcurrentQuotes(t *testing.T) {
	s := newSim(t, sim.Options{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Quote(context.Background(), reportData(t, byte(i+1)))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	for name, o := range map[string]sim.Options{
		"short measurement": {Measurement: []byte{1}},
		"long host data":    {HostData: make([]byte, 33)},
		"huge seed":         {Seed: make([]byte, sim.MaxSeedSize+1)},
	} {
		if _, err := sim.New(o); !errors.Is(err, sim.ErrBadOptions) {
			t.Errorf("%s: %v, want ErrBadOptions", name, err)
		}
	}
}

func TestCapabilities(t *testing.T) {
	ctx := context.Background()
	meas := bytes.Repeat([]byte{0x42}, abi.MeasurementSize)
	s := newSim(t, sim.Options{Measurement: meas})
	if s.Platform() != evidence.PlatformSEVSNP {
		t.Fatal(s.Platform())
	}
	m, err := s.LaunchMeasurement(ctx)
	if err != nil || !bytes.Equal(m, meas) {
		t.Fatalf("LaunchMeasurement = %x, %v", m, err)
	}
}

func TestSealingKey(t *testing.T) {
	ctx := context.Background()
	key := func(o sim.Options, label string) []byte {
		k, err := newSim(t, o).SealingKey(ctx, label)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 32 {
			t.Fatalf("key is %d bytes", len(k))
		}
		return k
	}
	base := key(sim.Options{Seed: []byte("a")}, "l")
	if !bytes.Equal(base, key(sim.Options{Seed: []byte("a")}, "l")) {
		t.Fatal("sealing key is not stable")
	}
	for name, k := range map[string][]byte{
		"label":       key(sim.Options{Seed: []byte("a")}, "m"),
		"seed":        key(sim.Options{Seed: []byte("b")}, "l"),
		"measurement": key(sim.Options{Seed: []byte("a"), Measurement: bytes.Repeat([]byte{1}, 48)}, "l"),
		"policy":      key(sim.Options{Seed: []byte("a"), Debug: true}, "l"),
	} {
		if bytes.Equal(k, base) {
			t.Errorf("changing the %s did not change the key", name)
		}
	}
	s := newSim(t, sim.Options{})
	for _, l := range []string{"", string(make([]byte, sim.MaxLabelSize+1))} {
		if _, err := s.SealingKey(ctx, l); !errors.Is(err, sim.ErrBadLabel) {
			t.Errorf("label of %d bytes: %v", len(l), err)
		}
	}
}

func BenchmarkSimQuote(b *testing.B) {
	s := newSim(b, sim.Options{})
	rd := reportData(b, 1)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Quote(ctx, rd); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifySimEvidence(b *testing.B) {
	s := newSim(b, sim.Options{})
	rd := reportData(b, 1)
	ev := quote(b, s, rd)
	m, _ := s.LaunchMeasurement(context.Background())
	opts := simVerifyOptions(b)
	pol := policyOptions(rd, m)
	for b.Loop() {
		a := testfixture.SEVAttestation(b, ev)
		if err := verify.SnpAttestation(a, opts); err != nil {
			b.Fatal(err)
		}
		if err := validate.SnpAttestation(a, pol); err != nil {
			b.Fatal(err)
		}
	}
}
