package detect

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/fakeparavisor"
	"github.com/clawea/attester/wire/evidence"
)

func noHardware(t *testing.T) {
	for _, p := range []string{"/dev/sev-guest", "/dev/tdx_guest", "/dev/tpmrm0", "/sys/kernel/config/tsm/report"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: this test expects a machine without confidential-computing devices", p)
		}
	}
}

func TestAutoNeverChoosesSimulated(t *testing.T) {
	noHardware(t)
	p, rep, err := Open(context.Background(), auto, Options{})
	if !errors.Is(err, enclave.ErrNotAvailable) || p != nil {
		t.Fatalf("Open(auto) = %v, %v; want ErrNotAvailable", p, err)
	}
	if len(rep.Attempts) != 4 || rep.Chosen != "" {
		t.Fatalf("report: %+v", rep)
	}
	for _, a := range rep.Attempts {
		if a.Platform == Simulated || a.OK || a.Reason == "" {
			t.Fatalf("attempt %+v", a)
		}
	}
	if !strings.Contains(rep.String(), "sev-snp: unavailable") {
		t.Fatalf("report text: %s", rep)
	}
}

func TestSimulatedExplicit(t *testing.T) {
	p, rep, err := Open(context.Background(), Simulated, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !rep.Simulated || rep.Chosen != Simulated || !strings.Contains(rep.String(), "SIMULATED") {
		t.Fatalf("report %+v", rep)
	}
	rd, err := evidence.NewReportData([32]byte{1}, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := p.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Simulated || ev.Platform != evidence.PlatformSEVSNP {
		t.Fatalf("evidence not marked simulated: %+v", ev.Platform)
	}
	if _, ok := Capability[enclave.SealingKeyer](p); !ok {
		t.Fatal("simulated platform lost its SealingKeyer capability")
	}
	if _, ok := Capability[enclave.Measurer](p); !ok {
		t.Fatal("simulated platform lost its Measurer capability")
	}
}

func TestUnknownPlatform(t *testing.T) {
	if _, _, err := Open(context.Background(), "sgx", Options{}); !errors.Is(err, errUnknownPlatform) {
		t.Fatalf("err = %v", err)
	}
}

func TestExplicitMissingDevice(t *testing.T) {
	noHardware(t)
	for _, n := range []string{sevSNP, tdxName, tpmName} {
		if _, _, err := Open(context.Background(), n, Options{}); !errors.Is(err, enclave.ErrNotAvailable) {
			t.Errorf("%s: err = %v, want ErrNotAvailable", n, err)
		}
	}
}

// TestAutoDetectsAzure: a vTPM with the HCL report index (the fake
// paravisor) and no SEV-SNP or TDX device is detected as an Azure
// confidential VM of the HCL report's kind; naming the other kind fails.
func TestAutoDetectsAzure(t *testing.T) {
	noHardware(t)
	pv := fakeparavisor.Start(t, evidence.PlatformAzureTDX)
	opts := Options{TPM: tpm.Options{Address: pv.TPMAddr, AzureIMDS: pv.IMDS, PCRs: []int{0, 7}}}
	p, rep, err := Open(context.Background(), auto, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if rep.Chosen != azureTDX || p.Platform() != azureTDX {
		t.Fatalf("report %s", rep)
	}
	opts.TPM.PCRs = nil
	if _, _, err := Open(context.Background(), azureSNP, opts); err == nil || errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("azure-snp on an azure-tdx vm: %v", err)
	}
}
