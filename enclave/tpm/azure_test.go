package tpm

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/internal/fakeparavisor"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
)

func azureRD(t *testing.T, label string) evidence.ReportData {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(sha256.Sum256([]byte(label)), pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func azureVerifyOpts() platform.Options {
	return platform.Options{Now: time.Now, AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
}

// TestAzureFakeParavisor runs the producer against the fake paravisor (a
// real swtpm behind it): each quote writes the run binding to the user-data
// index, the paravisor regenerates the HCL report, and the result verifies
// with the verifier only for that binding.
func TestAzureFakeParavisor(t *testing.T) {
	for _, pl := range []string{evidence.PlatformAzureSNP, evidence.PlatformAzureTDX} {
		t.Run(pl, func(t *testing.T) {
			pv := fakeparavisor.Start(t, pl)
			ctx := context.Background()
			a, err := OpenAzure(ctx, "", Options{Address: pv.TPMAddr, AzureIMDS: pv.IMDS})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if a.Platform() != pl {
				t.Fatalf("platform %q", a.Platform())
			}
			var prev []byte
			for i, label := range []string{"run one", "run two"} {
				rd := azureRD(t, label)
				ev, err := a.Quote(ctx, rd)
				if err != nil {
					t.Fatal(err)
				}
				if !ev.Simulated || ev.Platform != pl || ev.Format != hclreport.Format {
					t.Fatalf("evidence %s %s simulated %v", ev.Platform, ev.Format, ev.Simulated)
				}
				if pv.Regenerations.Load() != int64(i+1) {
					t.Fatalf("%d regenerations after %d quotes", pv.Regenerations.Load(), i+1)
				}
				res, err := platform.Verify(ev, rd, azureVerifyOpts())
				if err != nil {
					t.Fatal(err)
				}
				if !res.Simulated || res.Azure == nil || res.Azure.UserData != rd.Bytes() || len(res.Azure.PCRs) != 24 {
					t.Fatalf("result %+v", res)
				}
				// Another run's binding is refused.
				_, err = platform.Verify(ev, azureRD(t, "another run"), azureVerifyOpts())
				if !errors.Is(err, platform.ErrReportData) {
					t.Fatalf("other binding: %v", err)
				}
				// Simulated evidence is refused by default.
				_, err = platform.Verify(ev, rd, platform.Options{Now: time.Now, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true})
				if !errors.Is(err, platform.ErrSimulated) {
					t.Fatalf("simulated: %v", err)
				}
				hcl := ev.Aux[hclreport.AuxReport]
				if string(hcl) == string(prev) {
					t.Fatal("hcl report not refreshed")
				}
				prev = hcl
			}
		})
	}
}

// TestAzureStaleHCLReport replays an HCL report from an earlier run with a
// fresh quote: the user data no longer matches and verification fails.
func TestAzureStaleHCLReport(t *testing.T) {
	pv := fakeparavisor.Start(t, evidence.PlatformAzureSNP)
	ctx := context.Background()
	a, err := OpenAzure(ctx, evidence.PlatformAzureSNP, Options{Address: pv.TPMAddr, AzureIMDS: pv.IMDS})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	old, err := a.Quote(ctx, azureRD(t, "old run"))
	if err != nil {
		t.Fatal(err)
	}
	rd := azureRD(t, "new run")
	ev, err := a.Quote(ctx, rd)
	if err != nil {
		t.Fatal(err)
	}
	ev.Aux[hclreport.AuxReport] = old.Aux[hclreport.AuxReport]
	_, err = platform.Verify(ev, rd, azureVerifyOpts())
	if !errors.Is(err, platform.ErrReportData) {
		t.Fatalf("stale hcl report: %v", err)
	}
}

// TestOpenAzureNotAzure: a plain TPM has no HCL report index.
func TestOpenAzureNotAzure(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	_, err := OpenAzure(context.Background(), "", Options{Address: in.Addr})
	if !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("got %v", err)
	}
	pv := fakeparavisor.Start(t, evidence.PlatformAzureTDX)
	_, err = OpenAzure(context.Background(), evidence.PlatformAzureSNP, Options{Address: pv.TPMAddr, AzureIMDS: pv.IMDS})
	if err == nil {
		t.Fatal("azure-tdx opened as azure-snp")
	}
}
