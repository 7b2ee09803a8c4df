package verify

import "errors"

// Exit codes of a verification (docs/spec/verify-v1.md, "Exit codes"):
// packctl verify exits with them and the verifier service reports them in
// Outcome.ExitCode.
const (
	ExitVerified    = 0
	ExitUsage       = 1
	ExitRejected    = 2
	ExitCannotCheck = 3
	ExitPolicy      = 4
)

// Verdicts, one per exit code.
const (
	VerdictVerified    = "verified"
	VerdictUsage       = "usage"
	VerdictRejected    = "rejected"
	VerdictPolicy      = "policy-refused"
	VerdictCannotCheck = "cannot-check"
)

// ExitCode maps the error Verify returned to its exit code: nil is
// ExitVerified, then the class (ErrUsage, ErrRejected, ErrPolicy); any
// other error, ErrCannotCheck included, is ExitCannotCheck.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitVerified
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrRejected):
		return ExitRejected
	case errors.Is(err, ErrPolicy):
		return ExitPolicy
	}
	return ExitCannotCheck
}

// Verdict names the exit code of err.
func Verdict(err error) string {
	switch ExitCode(err) {
	case ExitVerified:
		return VerdictVerified
	case ExitUsage:
		return VerdictUsage
	case ExitRejected:
		return VerdictRejected
	case ExitPolicy:
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
	out := &Outcome{Verdict: Verdict(err), ExitCode: ExitCode(err)}
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
