package platform

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/poh"
)

// Error classes. Every error Verify returns wraps exactly one of ErrRejected
// and ErrCannotCheck (or is ErrBadOptions); every error CheckPolicy returns
// wraps ErrPolicy. Callers branch with errors.Is on the class, and on the
// more specific sentinels below where they need to.
var (
	// ErrRejected means the evidence is bad: a signature, chain, root,
	// binding or format check failed, or the evidence is of a kind the
	// options refuse (simulated). Retrying with other collateral does not
	// help.
	ErrRejected = errors.New("platform: evidence rejected")
	// ErrCannotCheck means the verifier could not decide: an unsupported
	// platform or format, an unknown product line, or collateral or
	// revocation data that the options require but that was not supplied.
	ErrCannotCheck = errors.New("platform: evidence could not be checked")
	// ErrPolicy means verified evidence does not meet the relying party's
	// policy (CheckPolicy).
	ErrPolicy = errors.New("platform: policy not satisfied")
	// ErrBadOptions means the options or the expected report data are
	// unusable (a usage error, not a verdict on the evidence).
	ErrBadOptions = errors.New("platform: invalid options")
)

// Specific sentinels, wrapped together with a class.
var (
	// errUnsupported: unknown platform or format (class ErrCannotCheck).
	errUnsupported = errors.New("platform: unsupported platform or format")
	// ErrSimulated: simulated evidence without Options.AllowSimulated
	// (class ErrRejected).
	ErrSimulated = errors.New("platform: simulated evidence not allowed")
	// ErrReportData: REPORT_DATA (or TPM qualifying data) differs from the
	// expected value (class ErrRejected).
	ErrReportData = errors.New("platform: report data mismatch")
	// ErrUntrustedRoot: the chain ends in a root the verifier does not trust
	// for this evidence (class ErrRejected).
	ErrUntrustedRoot = errors.New("platform: untrusted root")
	// ErrRevoked: a certificate of the chain is on a supplied CRL (class
	// ErrRejected).
	ErrRevoked = errors.New("platform: certificate revoked")
	// errCollateralExpired: supplied collateral or CRL is past its next
	// update (class ErrRejected, as docs/spec/platform-tdx.md requires).
	errCollateralExpired = errors.New("platform: collateral expired")
	// errMissingCollateral: collateral or revocation data the options
	// require was not supplied (class ErrCannotCheck).
	errMissingCollateral = errors.New("platform: required collateral missing")
	// errInternal: a verification library panicked on the input; the panic
	// was recovered (class ErrRejected).
	errInternal = errors.New("platform: verifier panicked on malformed input")
)

// Check names, as they appear in Error.Check and docs/spec/verify-platform.md.
const (
	checkOptions    = "options"
	checkFormat     = "format"
	CheckSimulated  = "simulated"
	checkParse      = "parse"
	checkProduct    = "product"
	checkRoot       = "root"
	checkChain      = "chain"
	checkSignature  = "signature"
	checkQEReport   = "qe-report"
	checkBinding    = "endorsement-binding"
	checkRevocation = "revocation"
	checkCollateral = "collateral"
	CheckReportData = "report-data"
	checkTPMAK      = "tpm-ak"
	// Policy checks.
	CheckMeasurement = "measurement"
	CheckDebug       = "debug"
	CheckTCB         = "tcb"
	CheckTCBStatus   = "tcb-status"
	CheckTCBAdvisory = "tcb-advisory"
	CheckGuestPolicy = "guest-policy"
)

// Error is a verification or policy failure: its class (ErrRejected,
// ErrCannotCheck, ErrPolicy or ErrBadOptions), the check that failed, the
// PoH reason code the failure maps to (docs/spec/verify-platform.md
// section 2; empty where none does) and the cause. errors.Is sees the
// class, the code and the cause. Messages never contain key material.
//
// Package verify reports its own failures with this type too (verify.Error,
// with verify's classes); the fields below are set on those only.
type Error struct {
	Class error
	Check string
	Code  poh.Code
	// Field is the policy file member (docs/spec/verify-v1.md section 5)
	// that refused the evidence: set for class verify.ErrPolicy (empty when
	// no member decides: debug guests are always refused) and for an
	// untrusted TPM AK (class verify.ErrRejected). The message names the
	// value seen and the member too.
	Field string
	Err   error
	// Passed lists the checks of verify.Verify that had passed before the
	// failure.
	Passed []string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%v: %s", e.Class, e.Check)
	if e.Code != "" && !errors.Is(e.Err, e.Code) { // a nested *Error names the code itself
		s += ": " + string(e.Code)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the class, the code (if any) and the cause (if any).
func (e *Error) Unwrap() []error {
	out := []error{e.Class}
	if e.Code != "" {
		out = append(out, e.Code)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// rejected is an ErrRejected failure of check. Its PoH code: REVOKED,
// EXPIRED, EVIDENCE_MISMATCH for a REPORT_DATA mismatch, SIGNATURE_INVALID
// for a root, chain, signature or QE report failure, and none otherwise.
func rejected(check string, err error) error {
	var code poh.Code
	switch {
	case errors.Is(err, ErrRevoked):
		code = poh.Revoked
	case errors.Is(err, errCollateralExpired):
		code = poh.Expired
	case errors.Is(err, ErrReportData):
		code = poh.EvidenceMismatch
	case check == checkSignature || check == checkChain || check == checkRoot || check == checkQEReport:
		code = poh.SignatureInvalid
	}
	return &Error{Class: ErrRejected, Check: check, Code: code, Err: err}
}

func cannotCheck(check string, err error) error {
	return &Error{Class: ErrCannotCheck, Check: check, Code: poh.DependencyNotConfigured, Err: err}
}

func policyErr(check string, err error) error {
	return &Error{Class: ErrPolicy, Check: check, Err: err}
}

func badOptions(format string, args ...any) error {
	return &Error{Class: ErrBadOptions, Check: checkOptions, Err: fmt.Errorf(format, args...)}
}

// guard runs f, turning a panic in a verification library into an
// ErrRejected error for check. Inputs are parsed strictly before they reach
// such libraries; this is the last line of defence.
func guard(check string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = rejected(check, errInternal)
		}
	}()
	return f()
}
