package platform

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// testNow is inside the validity of the simulated hierarchies, the real
// SEV-SNP sample's VCEK and both real TDX samples' PCK chains.
var testNow = time.Date(2026, time.June, 1, 0, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return testNow }

func testRD(t testing.TB, label string) evidence.ReportData {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(sha256.Sum256([]byte(label)), pub, []byte("verify/platform test"))
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// simOpts accepts simulated evidence without revocation or collateral data.
func simOpts() Options {
	return Options{Now: fixedNow, AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
}

// verifySim verifies ev for rd with simOpts; an error fails t.
func verifySim(t testing.TB, ev *evidence.Evidence, rd evidence.ReportData) *Result {
	t.Helper()
	res, err := Verify(ev, rd, simOpts())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func simSEV(t testing.TB, o sim.Options, rd evidence.ReportData) *evidence.Evidence {
	t.Helper()
	s, err := sim.New(o)
	return quote(t, s, err, rd)
}

func simTDX(t testing.TB, o fakeqe.Options, rd evidence.ReportData) *evidence.Evidence {
	t.Helper()
	s, err := tdx.NewSimulated(o)
	return quote(t, s, err, rd)
}

// quote returns q's evidence over rd; newErr is the error of making q.
func quote(t testing.TB, q enclave.Quoter, newErr error, rd evidence.ReportData) *evidence.Evidence {
	t.Helper()
	if newErr != nil {
		t.Fatal(newErr)
	}
	ev, err := q.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// loadTPMFixture reads the swtpm quote committed in wire/tpmquote.
func loadTPMFixture(t testing.TB) testfixture.TPMQuote { return testfixture.LoadTPMQuote(t) }

// wantErr asserts err has class and, when non-nil, the sentinel and check.
func wantErr(t testing.TB, err error, class, sentinel error, check string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want %v", class)
	}
	if !errors.Is(err, class) {
		t.Fatalf("error %v: want class %v", err, class)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %v: want %v", err, sentinel)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v is not an *Error", err)
	}
	if check != "" && e.Check != check {
		t.Fatalf("error %v: check %q, want %q", err, e.Check, check)
	}
	// Exactly one class.
	n := 0
	for _, c := range []error{ErrRejected, ErrCannotCheck, ErrPolicy, ErrBadOptions} {
		if errors.Is(err, c) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v wraps %d classes", err, n)
	}
	if want, known := wantCode(class, sentinel, check); known && e.Code != want {
		t.Fatalf("error %v: poh code %q, want %q", err, e.Code, want)
	}
	if e.Check == checkTPMAK && errors.Is(err, ErrUntrustedRoot) && !errors.Is(err, tpmquote.ErrUntrustedAK) {
		t.Fatalf("error %v: an untrusted tpm ak does not wrap tpmquote.ErrUntrustedAK", err)
	}
}

// wantCode is the PoH code docs/spec/verify-platform.md section 2 gives a
// failure, where the class, cause or check decides it.
func wantCode(class, sentinel error, check string) (poh.Code, bool) {
	switch {
	case class == ErrCannotCheck:
		return poh.DependencyNotConfigured, true
	case class != ErrRejected:
		return "", true
	case sentinel == ErrRevoked:
		return poh.Revoked, true
	case sentinel == errCollateralExpired:
		return poh.Expired, true
	case sentinel == ErrReportData:
		return poh.EvidenceMismatch, true
	case check == checkRoot || check == checkChain || check == checkSignature || check == checkQEReport:
		return poh.SignatureInvalid, true
	}
	return "", false
}

// optionsCase is a change to the verification options and the refusal it
// must cause.
type optionsCase struct {
	name         string
	change       func(*Options)
	class, cause error
	check        string
}

// refuseOptions verifies ev against rd under base changed by each case and
// requires that case's refusal.
func refuseOptions(t *testing.T, ev *evidence.Evidence, rd evidence.ReportData, base Options, cases []optionsCase) {
	t.Helper()
	for _, c := range cases {
		o := base
		c.change(&o)
		_, err := Verify(ev, rd, o)
		t.Run(c.name, func(t *testing.T) { wantErr(t, err, c.class, c.cause, c.check) })
	}
}

func cloneEvidence(ev *evidence.Evidence) *evidence.Evidence {
	c := *ev
	c.Blob = append([]byte(nil), ev.Blob...)
	c.Signature = append([]byte(nil), ev.Signature...)
	if ev.Signature == nil {
		c.Signature = nil
	}
	c.CertChain = nil
	for _, d := range ev.CertChain {
		c.CertChain = append(c.CertChain, append([]byte(nil), d...))
	}
	if ev.Aux != nil {
		c.Aux = map[string][]byte{}
		for k, v := range ev.Aux {
			c.Aux[k] = append([]byte(nil), v...)
		}
	}
	return &c
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// lastOf is the last of a boot chain's values of one kind (nil if none):
// what a TPM policy whose measurement matched checks.
func lastOf(vs [][]byte) []byte {
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1]
}
