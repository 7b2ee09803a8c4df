package collateral

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/verify/trust"
)

// TestFetchVLEKCollateral: for a VLEK-signed report (AWS; Trustee's sample)
// the fetcher asks AMD's key server for the ASVK chain and the VLEK CRL,
// never for the leaf (the key server serves no VLEK), and the verifier
// reads the folder it fills. A CRL that AMD's ARK did not sign is ignored:
// revocation stays unchecked, never checked.
func TestFetchVLEKCollateral(t *testing.T) {
	dir := filepath.Join("..", "platform", "testdata", "trustee", "snp")
	report := testfile.Read(t, filepath.Join(dir, "test-vlek-report.bin"))
	vlek := testfile.Read(t, filepath.Join(dir, "test-vlek.der"))
	ev, err := snpevidence.Build(report, nil, vlek, false)
	if err != nil {
		t.Fatal(err)
	}
	items, err := Needs([]*evidence.Evidence{ev})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{kindSEVSNPChain: "/vlek/v1/Milan/cert_chain", kindSEVSNPCRL: "/vlek/v1/Milan/crl"}
	if len(items) != 2 {
		t.Fatalf("%d items, want the asvk chain and the crl: %+v", len(items), items)
	}
	capture := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	f, base := newFake(t)
	for _, it := range items {
		if it.URL != want[it.Kind] {
			t.Fatalf("%s: url %q, want %q", it.Kind, it.URL, want[it.Kind])
		}
		switch it.Kind {
		case kindSEVSNPChain:
			f.set(it.URL, fakeDoc{body: bytes.TrimSpace(trust.AskArkMilanVlekBytes)})
		case kindSEVSNPCRL:
			f.set(it.URL, fakeDoc{body: testfixture.SimSEVCRL(t, capture.Add(-day), capture.Add(7*day))})
		}
	}
	fe := testFetcher(base, nil)
	fe.Now = func() time.Time { return capture }
	out := t.TempDir()
	if _, err := fe.fetch(context.Background(), out, items); err != nil {
		t.Fatal(err)
	}
	if err := incomplete(check(out, items, capture, time.Hour)); err != nil {
		t.Fatal(err)
	}
	c, err := platform.LoadCollateralDir(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := platform.VerifyRaw("snp-report", report, vlek, nil, platform.Options{Now: fe.Now, Collateral: c, AllowUncheckedRevocation: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.SEVSNP.Signer != "vlek" || res.Revocation != platform.StatusSkipped {
		t.Fatalf("signer %s, revocation %s", res.SEVSNP.Signer, res.Revocation)
	}
}
