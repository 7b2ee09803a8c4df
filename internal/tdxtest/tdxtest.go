// Package tdxtest locates go-tdx-guest's shipped test data in the module
// cache at test time. It is for tests only; nothing is copied into this
// repository.
package tdxtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/google/go-tdx-guest/verify"
)

// module is the module whose testdata the tests read.
const module = "github.com/google/go-tdx-guest"

// Quote samples under testing/testdata in the module.
const (
	SampleSPR   = "testing/testdata/tdx_prod_quote_SPR_E4.dat"
	SampleCOS   = "testing/testdata/ccel/cos-113-tdx-quote.dat"
	maxFileSize = 1 << 20
)

// Collateral is the PCS collateral go-tdx-guest ships for SampleSPR (the
// bodies of its sample responses; their issuer chains exist only as
// header values in its testing package).
type Collateral struct {
	TcbInfo, QeIdentity, PckCrl, RootCrl []byte
}

// ShippedCollateral reads the shipped collateral from the module cache.
func ShippedCollateral(t testing.TB) Collateral {
	t.Helper()
	return Collateral{
		TcbInfo:    Read(t, "testing/testdata/sample_tcbInfo_response"),
		QeIdentity: Read(t, "testing/testdata/sample_qeIdentity_response"),
		PckCrl:     Read(t, "testing/testdata/pckcrl"),
		RootCrl:    Read(t, "testing/testdata/rootcrl.der"),
	}
}

// At is the fixed verification clock of the tests of simulated TDX
// evidence (enclave/tdx/fakeqe's hierarchy and wire/tdxsimroots).
var At = time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC)

// TimeSet is go-tdx-guest's verification clock with every check at t.
func TimeSet(t time.Time) *verify.TimeSet {
	return &verify.TimeSet{PckCertChain: t, TcbInfo: t, QeIdentity: t, PckCrl: t, RootCaCrl: t}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// moduleDir returns the directory of the version of module (one this
// module requires) that this module selects.
func moduleDir(t testing.TB, module string) string {
	t.Helper()
	cmd := exec.Command(goTool(), "list", "-m", "-json", module)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -m %s: %v: %s", module, err, errb.String())
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	if m.Dir == "" {
		t.Fatalf("go list -m %s: module not in the module cache (run go mod download)", module)
	}
	return m.Dir
}

// Read returns the file rel under the go-tdx-guest module directory.
func Read(t testing.TB, rel string) []byte {
	t.Helper()
	return ReadModule(t, module, rel)
}

// ReadModule returns the file rel (at most 1 MiB) under the directory of
// module, any module this one requires (go-sev-guest's testdata too).
func ReadModule(t testing.TB, module, rel string) []byte {
	t.Helper()
	p := filepath.Join(moduleDir(t, module), filepath.FromSlash(rel))
	b, err := bounded.ReadFile(p, maxFileSize)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}

// Evidence returns the quote sample name (SampleSPR or SampleCOS, trailing
// device bytes dropped) as TDX evidence with its PCK chain, and the
// quote's REPORT_DATA.
func Evidence(t testing.TB, name string) (*evidence.Evidence, [64]byte) {
	t.Helper()
	raw := Read(t, name)
	n, err := tdxquote.Length(raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := tdxquote.Parse(raw[:n])
	if err != nil {
		t.Fatal(err)
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		t.Fatal(err)
	}
	return &evidence.Evidence{Platform: evidence.PlatformTDX, Format: tdxquote.Format, Blob: raw[:n], CertChain: chain}, q.Body.ReportData
}
