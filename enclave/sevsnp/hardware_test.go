package sevsnp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-sev-guest/validate"
	"github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// The go-sev-guest module ships one report from real AMD hardware
// (verify/testdata/attestation.bin, a v2 Milan report with a debug policy)
// with the VCEK that signed it (vcek.testcer), and AMD's Milan VCEK and VLEK
// product chains (milan.testcer, milanvlek.testcer). No VLEK-signed hardware
// report is shipped. The files are read from the module cache at test time.

// hwTime is inside the sample VCEK's validity (2022-09-24 to 2029-09-24).
var hwTime = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

func goSevGuestTestdata(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/google/go-sev-guest").Output()
	if err != nil {
		t.Fatalf("locating go-sev-guest in the module cache: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "verify", "testdata")
	if _, err := os.Stat(filepath.Join(dir, "attestation.bin")); err != nil {
		t.Fatalf("go-sev-guest testdata: %v", err)
	}
	return dir
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	return testfile.Read(t, filepath.Join(dir, name))
}

func TestHardwareSampleVerifiesToAMDRoots(t *testing.T) {
	dir := goSevGuestTestdata(t)
	report := readFile(t, dir, "attestation.bin")
	vcek := readFile(t, dir, "vcek.testcer")

	ev, err := snpevidence.Build(report, nil, vcek, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	// Product from the VCEK certificate (v2 reports carry no CPUID).
	exts, err := kds.VcekCertificateExtensions(p.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(exts.ProductName, "Milan") {
		t.Fatalf("sample product %q", exts.ProductName)
	}
	a, _ := p.Attestation()
	// Offline, against the AMD roots embedded in go-sev-guest.
	if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: hwTime}); err != nil {
		t.Fatalf("real report does not verify: %v", err)
	}
	if err := checkSignature(p.Report, p.Leaf); err != nil {
		t.Fatalf("self-check on real report: %v", err)
	}
	rd := p.ReportData()
	smtDebug := abi.SnpPolicy{SMT: true, Debug: true}
	if err := validate.SnpAttestation(a, &validate.Options{ReportData: rd[:], GuestPolicy: smtDebug}); err != nil {
		t.Fatalf("validate: %v", err)
	}
	// The sample is a debug guest: a policy without DEBUG refuses it.
	if err := validate.SnpAttestation(a, &validate.Options{ReportData: rd[:], GuestPolicy: abi.SnpPolicy{SMT: true}}); err == nil {
		t.Fatal("debug policy accepted")
	}

	// The simulated roots must not verify hardware evidence.
	sim := trust.AMDRootCertsProduct(simroots.SEVSNPProductLine)
	if err := sim.FromKDSCertBytes(simroots.SEVSNPCertChainPEM()); err != nil {
		t.Fatal(err)
	}
	a, _ = p.Attestation()
	if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: hwTime,
		TrustedRoots: map[string][]*trust.AMDRootCerts{"Milan": {sim}}}); err == nil {
		t.Fatal("simulated roots verified a hardware report")
	}

	// Tampering with one signed byte breaks the AMD signature.
	for _, off := range []int{0x50, 0x90, 0x180} {
		bad := append([]byte(nil), report...)
		bad[off] ^= 0x80
		ev, err := snpevidence.Build(bad, nil, vcek, false)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := snpevidence.Parse(ev)
		a, _ := p.Attestation()
		if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: hwTime}); err == nil {
			t.Errorf("offset %#x: tampered hardware report verified", off)
		}
	}
}

func TestHardwareProductChainsAreAMDs(t *testing.T) {
	dir := goSevGuestTestdata(t)
	vcek := readFile(t, dir, "vcek.testcer")

	var milan trust.ProductCerts
	if err := milan.FromKDSCertBytes(readFile(t, dir, "milan.testcer")); err != nil {
		t.Fatal(err)
	}
	amd := trust.DefaultRootCerts["Milan"].ProductCerts
	if !milan.Ark.Equal(amd.Ark) || !milan.Ask.Equal(amd.Ask) {
		t.Fatal("milan.testcer is not the embedded AMD Milan chain")
	}
	ev, err := snpevidence.Build(readFile(t, dir, "attestation.bin"), nil, vcek, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := snpevidence.Parse(ev)
	if _, err := p.Leaf.Verify(*milan.X509Options(hwTime, abi.VcekReportSigner)); err != nil {
		t.Fatalf("sample vcek does not chain to milan.testcer: %v", err)
	}

	var vlek trust.ProductCerts
	if err := vlek.FromKDSCertBytes(readFile(t, dir, "milanvlek.testcer")); err != nil {
		t.Fatal(err)
	}
	if vlek.Asvk == nil || !vlek.Ark.Equal(amd.Ark) {
		t.Fatal("milanvlek.testcer: want an ASVK under the Milan ARK")
	}
	if err := vlek.Asvk.CheckSignatureFrom(vlek.Ark); err != nil {
		t.Fatalf("asvk not signed by the Milan ark: %v", err)
	}
}
