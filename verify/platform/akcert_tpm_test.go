package platform

import (
	"context"
	"crypto"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// openQuote opens the TPM opts names (closed when t ends) and quotes rd.
func openQuote(t *testing.T, opts tpm.Options, rd evidence.ReportData) (*tpm.TPM, *evidence.Evidence) {
	t.Helper()
	tp, err := tpm.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	ev, err := tp.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	return tp, ev
}

// TestTPMGCEAKEndToEnd: the tpm backend with GCEAK quotes with the AK the
// NV template makes and carries its certificate; the verifier trusts the AK
// through that certificate alone.
func TestTPMGCEAKEndToEnd(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	ca := newAKCA(t)
	if err := in.ProvisionGCEAK(func(pub crypto.PublicKey) ([]byte, error) { return ca.issue(t, pub, time.Now().Add(time.Hour)), nil }); err != nil {
		t.Fatal(err)
	}
	rd := testRD(t, "gce ak")
	_, ev := openQuote(t, tpm.Options{Address: in.Addr, GCEAK: true}, rd)
	if len(ev.Aux[tpmquote.AuxAKCert]) == 0 {
		t.Fatal("no ak_cert in the evidence")
	}
	pool := newPool(ca)
	res, err := Verify(ev, rd, Options{Now: time.Now, AllowSimulated: true, TPMAKCARoots: pool})
	if err != nil {
		t.Fatal(err)
	}
	if res.TPM.AKProvenance != akCertified || !strings.HasPrefix(res.RootID, rootIDSimTPMAKCert) {
		t.Fatalf("provenance %s root %s", res.TPM.AKProvenance, res.RootID)
	}
	// Without a trusted AK CA, the same evidence has no trusted AK.
	_, err = Verify(ev, rd, Options{Now: time.Now, AllowSimulated: true})
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	// A TPM without the GCE indices cannot open with GCEAK.
	plain := swtpmtest.StartForTest(t)
	if _, err := tpm.Open(context.Background(), tpm.Options{Address: plain.Addr, GCEAK: true}); err == nil || !strings.Contains(err.Error(), "gce ak template") {
		t.Fatalf("no gce indices: %v", err)
	}
}
