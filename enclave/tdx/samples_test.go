package tdx

// Tests over the REAL Intel TDX quotes and PCS collateral shipped in
// go-tdx-guest's module (testing/testdata), read from the module cache at
// test time.
//
// Finding, stated plainly: the TDX collateral shipped there (TCB info, QE
// identity) EXPIRED in July 2023 (tcbInfo nextUpdate 2023-07-18, QE identity
// nextUpdate 2023-07-08). Verification with that collateral therefore fails
// at any current clock; TestRealSampleCollateralExpired asserts the expiry
// error. At a fixed clock inside its validity (2023-07-01) the collateral's
// chains, CRLs and expiry checks pass, but the sample quote's TEE_TCB_SVN
// matches no TCB level in the shipped TCB info, so full collateral
// verification of the sample never succeeds (go-tdx-guest's own tests
// expect the same). Signatures and the PCK chain of the samples verify
// offline to the embedded Intel root.

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/pcs"
	pb "github.com/google/go-tdx-guest/proto/tdx"
	testcases "github.com/google/go-tdx-guest/testing"
	"github.com/google/go-tdx-guest/verify"
)

var (
	// insideValidity is inside the validity of the shipped collateral.
	insideValidity = time.Date(2023, time.July, 1, 1, 0, 0, 0, time.UTC)
	// afterExpiry is after both collateral nextUpdate dates.
	afterExpiry = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)
)

func sampleQuote(t testing.TB, name string) (*pb.QuoteV4, []byte) {
	t.Helper()
	raw := tdxtest.Read(t, name)
	n, err := tdxquote.Length(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tdxquote.Parse(raw[:n]); err != nil {
		t.Fatal(err)
	}
	q, err := abi.QuoteToProto(raw[:n])
	if err != nil {
		t.Fatal(err)
	}
	pq, ok := q.(*pb.QuoteV4)
	if !ok {
		t.Fatalf("sample is %T", q)
	}
	return pq, raw[:n]
}

func TestRealSamplesVerifyOffline(t *testing.T) {
	// Clocks inside each sample's PCK chain validity (the COS sample's PCK
	// leaf is valid from 2024-07-02).
	clocks := map[string][]time.Time{
		tdxtest.SampleSPR: {insideValidity, tdxtest.At},
		tdxtest.SampleCOS: {tdxtest.At},
	}
	for _, name := range []string{tdxtest.SampleSPR, tdxtest.SampleCOS} {
		t.Run(name, func(t *testing.T) {
			for _, clock := range clocks[name] {
				q, _ := sampleQuote(t, name)
				// TrustedRoots nil: go-tdx-guest's embedded Intel SGX Root CA.
				if err := verify.TdxQuote(q, &verify.Options{Now: tdxtest.TimeSet(clock)}); err != nil {
					t.Fatalf("at %s: real quote rejected by the Intel root: %v", clock, err)
				}
			}
			q, raw := sampleQuote(t, name)
			pool, err := tdxsimroots.CertPool()
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.TdxQuote(q, &verify.Options{TrustedRoots: pool, Now: tdxtest.TimeSet(tdxtest.At)}); err == nil {
				t.Fatal("real Intel quote accepted under the simulation root")
			}
			bad := append([]byte(nil), raw...)
			bad[0x30+0x88] ^= 1 // a byte of MRTD, after the 48-byte header
			bq, err := abi.QuoteToProto(bad)
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.TdxQuote(bq, &verify.Options{Now: tdxtest.TimeSet(tdxtest.At)}); !errors.Is(err, verify.ErrHashVerificationFail) {
				t.Fatalf("tampered real quote: %v, want ErrHashVerificationFail", err)
			}
		})
	}
}

// collateralGetter serves the shipped PCS responses offline. The bodies are
// read from the module cache; the issuer-chain headers exist only as Go
// values in go-tdx-guest's testing package.
func collateralGetter(t testing.TB) *testcases.Getter {
	t.Helper()
	c := tdxtest.ShippedCollateral(t)
	return &testcases.Getter{Responses: map[string]testcases.HTTPResponse{
		pcs.QeIdentityURL():            {Header: testcases.QeIdentityHeader, Body: c.QeIdentity},
		pcs.TcbInfoURL("50806f000000"): {Header: testcases.TcbInfoHeader, Body: c.TcbInfo},
		pcs.PckCrlURL("platform"):      {Header: testcases.PckCrlHeader, Body: c.PckCrl},
		"https://certificates.trustedservices.intel.com/IntelSGXRootCA.der": {Body: c.RootCrl},
	}}
}

func collateralOptions(t testing.TB, now *verify.TimeSet) *verify.Options {
	return &verify.Options{GetCollateral: true, CheckRevocations: true, Getter: collateralGetter(t), Now: now}
}

// verifyWithCollateral runs verify.TdxQuote with the shipped collateral and
// then returns go-tdx-guest's collateral check error. verify.TdxQuote wraps
// that error with %v (so errors.Is cannot see it);
// SupportedTcbLevelsFromCollateral returns it unwrapped, using the
// collateral the first call fetched into opts.
//
//lint:ignore ST1008 both errors are results under test, returned side by side
func verifyWithCollateral(t testing.TB, q *pb.QuoteV4, opts *verify.Options) (quoteErr, collateralErr error, qeLevel pcs.TcbLevel) {
	t.Helper()
	quoteErr = verify.TdxQuote(q, opts)
	_, qeLevel, collateralErr = verify.SupportedTcbLevelsFromCollateral(q, opts)
	return quoteErr, collateralErr, qeLevel
}

func TestRealSampleCollateralExpired(t *testing.T) {
	c := tdxtest.ShippedCollateral(t)
	var info pcs.TdxTcbInfo
	if err := json.Unmarshal(c.TcbInfo, &info); err != nil {
		t.Fatal(err)
	}
	var qeid pcs.QeIdentity
	if err := json.Unmarshal(c.QeIdentity, &qeid); err != nil {
		t.Fatal(err)
	}
	t.Logf("shipped collateral: tcbInfo nextUpdate %s, QE identity nextUpdate %s: EXPIRED",
		info.TcbInfo.NextUpdate.Format(time.RFC3339), qeid.EnclaveIdentity.NextUpdate.Format(time.RFC3339))
	if !info.TcbInfo.NextUpdate.Before(afterExpiry) || !qeid.EnclaveIdentity.NextUpdate.Before(afterExpiry) {
		t.Fatal("shipped collateral is not expired at the test clock: update this test")
	}

	for _, c := range []struct {
		name string
		now  *verify.TimeSet
		want error
	}{
		{"fixed clock after expiry", tdxtest.TimeSet(afterExpiry), verify.ErrTcbInfoExpired},
		{"tcb info valid, qe identity expired", &verify.TimeSet{
			PckCertChain: insideValidity, TcbInfo: insideValidity, QeIdentity: afterExpiry,
			PckCrl: insideValidity, RootCaCrl: insideValidity,
		}, verify.ErrQeIdentityExpired},
		// nil: go-tdx-guest's default, the wall clock, which is past 2023.
		{"wall clock", nil, verify.ErrTcbInfoExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := sampleQuote(t, tdxtest.SampleSPR)
			quoteErr, collErr, _ := verifyWithCollateral(t, q, collateralOptions(t, c.now))
			if quoteErr == nil {
				t.Fatal("expired collateral accepted")
			}
			if !errors.Is(collErr, c.want) {
				t.Fatalf("collateral error %v, want %v", collErr, c.want)
			}
		})
	}
}

func TestRealSampleCollateralInsideValidity(t *testing.T) {
	q, _ := sampleQuote(t, tdxtest.SampleSPR)
	quoteErr, collErr, qeLevel := verifyWithCollateral(t, q, collateralOptions(t, tdxtest.TimeSet(insideValidity)))
	for _, expired := range []error{verify.ErrTcbInfoExpired, verify.ErrQeIdentityExpired, verify.ErrPCKCrlExpired, verify.ErrRootCaCrlExpired} {
		if errors.Is(collErr, expired) {
			t.Fatalf("collateral expired inside its validity: %v", collErr)
		}
	}
	// The collateral passed its presence and expiry checks and was used:
	// the QE identity yields a TCB level for the QE's ISVSVN.
	if qeLevel.TcbStatus == "" {
		t.Fatalf("no QE TCB level from valid collateral: %v", collErr)
	}
	// The sample's TEE_TCB_SVN matches no TDX TCB level of the shipped TCB
	// info (upstream's own expectation), so full verification fails even here.
	if quoteErr == nil {
		t.Fatal("expected the TCB level mismatch go-tdx-guest documents for this sample")
	}
	if collErr == nil {
		t.Fatal("expected no matching TDX TCB level")
	}
}
