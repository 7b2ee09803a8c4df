package verify

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
)

// Error classes. Every error Verify returns is an *Error whose Class is
// exactly one of them; callers branch with errors.Is on the class.
var (
	// ErrUsage: the caller's inputs or options are unusable (no attestation,
	// no clock, contradictory options). Not a verdict on the evidence.
	ErrUsage = errors.New("verify: usage error")
	// ErrRejected: the evidence is bad (signature, hash, binding, chain,
	// root, revocation, format). Other collateral or policy does not help.
	ErrRejected = errors.New("verify: evidence rejected")
	// ErrCannotCheck: the verifier could not decide: collateral, revocation
	// data, roots or an input that a check or the policy needs is missing,
	// or a platform or format is not supported.
	ErrCannotCheck = errors.New("verify: could not check")
	// ErrPolicy: the evidence verified (or is simulated evidence, which is
	// never verified unless allowed) but the relying party's policy refuses
	// it.
	ErrPolicy = errors.New("verify: refused by policy")
)

// Check names, in the order Verify runs them (docs/spec/verify-v1.md,
// section 3). Platform and policy failures are reported as
// "platform/<check>" and "policy/<check>".
const (
	checkInput            = "input"
	checkEnvelope         = "envelope"
	checkPayload          = "payload"
	checkNonceBinding     = "nonce-binding"
	checkBundle           = "bundle"
	checkBundleLinkage    = "bundle-linkage"
	checkPromptCommit     = "prompt-commitments"
	checkEvidenceRef      = "evidence-ref"
	checkEvidenceDocument = "evidence-document"
	checkExecutionContext = "execution-context"
	checkModelIdentity    = "model-identity"
	checkPlatform         = "platform"
	checkReportData       = "report-data"
	checkRevocation       = "revocation"
	checkCollateral       = "collateral"
	checkTEEClaims        = "tee-claims"
	checkAuditLog         = "audit-log"
	checkToolCalls        = "tool-calls"
	checkReport           = "report"
	checkPolicy           = "policy"
)

// Policy check names (Error.Check is "policy/" + one of these). A refusal
// by verify/platform's policy check (platform.CheckPolicy) or of simulated
// evidence keeps that package's check name: "policy/" + platform.CheckSimulated,
// CheckMeasurement, CheckDebug, CheckTCB, CheckTCBStatus, CheckTCBAdvisory
// or CheckGuestPolicy.
const (
	PolicyAttester     = "attester"
	policyPromptHash   = "prompt-hash"
	policyReportHash   = "report-hash"
	policyGatePolicy   = "gate-policy"
	policyModel        = "model"
	policyAdmission    = "admission-policy"
	policySensitive    = "sensitive"
	policyTemplates    = "templates"
	policyRecipe       = "recipe"
	policyUnknownCheck = "platform"
)

// Error is a failed verification: the class (one of the four above), the
// check that failed, the PoH reason code where one applies (empty
// otherwise), the policy member that refused the evidence (Field), the
// cause, and the checks that had passed before it (Passed). errors.Is sees
// the class, the PoH code and the cause. Messages never contain key
// material. It is verify/platform's Error, so that one type carries a
// failure from the platform checks up: a platform failure is reported as an
// Error of this package's class that wraps the platform's Error.
type Error = platform.Error

func newErr(class error, check string, code poh.Code, format string, args ...any) *Error {
	return &Error{Class: class, Check: check, Code: code, Err: fmt.Errorf(format, args...)}
}

func rejected(check string, code poh.Code, format string, args ...any) *Error {
	return newErr(ErrRejected, check, code, format, args...)
}

func wrapRejected(check string, code poh.Code, err error) *Error {
	return &Error{Class: ErrRejected, Check: check, Code: code, Err: err}
}

// policyErr is a refusal by the policy member field; the message names the
// value seen and the member.
func policyErr(check, field string, format string, args ...any) *Error {
	e := newErr(ErrPolicy, checkPolicy+"/"+check, "", format, args...)
	e.Field = field
	return e
}

// platformPolicyErr turns a platform.CheckPolicy refusal of evidence[i]
// into a policy error that names the policy member that refused it.
func platformPolicyErr(i int, pr *platform.Result, err error) *Error {
	check := policyUnknownCheck
	if pe, ok := errors.AsType[*platform.Error](err); ok {
		check = pe.Check
	}
	field, note := platformPolicyMember[check], ""
	switch check {
	case platform.CheckTCB:
		if pr.Platform == evidence.PlatformSEVSNP || pr.Platform == evidence.PlatformAzureSNP {
			field = "min_sev_snp_tcb"
		}
	case platform.CheckGuestPolicy:
		note = "policy member min_sev_snp_tcb, or the fixed SEV-SNP guest policy: VMPL 0, no migration agent, no debug"
	case platform.CheckDebug:
		note = "debuggable guests are always refused; no policy member allows them"
	}
	if field != "" {
		note = "policy member " + field
	}
	if note != "" {
		err = fmt.Errorf("%w (%s)", err, note)
	}
	return &Error{Class: ErrPolicy, Check: checkPolicy + "/" + check, Field: field, Err: fmt.Errorf("evidence[%d]: %w", i, err)}
}

func usage(format string, args ...any) *Error {
	return newErr(ErrUsage, checkInput, "", format, args...)
}

// pohErr turns an error of package poh into a rejection that carries its
// reason code.
func pohErr(check string, err error) *Error {
	if pe, ok := errors.AsType[*poh.Error](err); ok {
		return &Error{Class: ErrRejected, Check: check, Code: pe.Code, Err: err}
	}
	return &Error{Class: ErrRejected, Check: check, Code: poh.MalformedEnvelope, Err: err}
}
