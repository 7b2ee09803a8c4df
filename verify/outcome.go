package verify

import "errors"

// Verdicts of a verification, one per exit code (docs/spec/verify-v1.md,
// "Exit codes"): packctl verify exits with ExitCode(verdict) and the
// verifier service reports both in an Outcome.
const (
	VerdictVerified    = "verified"
	VerdictUsage       = "usage"
	VerdictRejected    = "rejected"
	VerdictPolicy      = "policy-refused"
	VerdictCannotCheck = "cannot-check"
)

// ExitCode is the exit code of a verdict: 0 verified, 1 usage, 2
// rejected, 4 policy-refused, and 3 cannot-check (and any other string).
func ExitCode(verdict string) int {
	switch verdict {
	case VerdictVerified:
		return 0
	case VerdictUsage:
		return 1
	case VerdictRejected:
		return 2
	case VerdictPolicy:
		return 4
	}
	return 3
}

// verdict maps the error Verify returned to its verdict: nil is
// VerdictVerified, then the class (ErrUsage, ErrRejected, ErrPolicy); any
// other error, ErrCannotCheck included, is VerdictCannotCheck.
func verdict(err error) string {
	switch {
	case err == nil:
		return VerdictVerified
	case errors.Is(err, ErrUsage):
		return VerdictUsage
	case errors.Is(err, ErrRejected):
		return VerdictRejected
	case errors.Is(err, ErrPolicy):
		return VerdictPolicy
	}
	return VerdictCannotCheck
}

// Outcome is the machine-readable outcome of one verification: what
// `packctl verify --json` prints and what the verifier service returns.
// Exactly one of Result and Error is set, except for an error that is not
// an *Error (Error nil, Verdict and ExitCode still say what happened).
type Outcome struct {
	Verdict  string        `json:"verdict"`
	ExitCode int           `json:"exit_code"`
	Result   *Result       `json:"result,omitempty"`
	Error    *OutcomeError `json:"error,omitempty"`
}

// OutcomeError is the failed check of an Outcome.
type OutcomeError struct {
	Class string `json:"class"`
	Check string `json:"check"`
	Code  string `json:"poh_code,omitempty"`
	// Field is Error.Field: the policy member that refused the evidence.
	Field   string   `json:"policy_field,omitempty"`
	Message string   `json:"message"`
	Passed  []string `json:"passed"`
}

// NewOutcome returns the Outcome of Verify's (res, err).
func NewOutcome(res *Result, err error) *Outcome {
	v := verdict(err)
	out := &Outcome{Verdict: v, ExitCode: ExitCode(v)}
	if err == nil {
		out.Result = res
		return out
	}
	if ve, ok := errors.AsType[*Error](err); ok {
		out.Error = &OutcomeError{Class: out.Verdict, Check: ve.Check, Code: string(ve.Code), Field: ve.Field, Message: err.Error(), Passed: ve.Passed}
		if out.Error.Passed == nil {
			out.Error.Passed = []string{}
		}
	}
	return out
}
