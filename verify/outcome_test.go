package verify

import (
	"errors"
	"testing"
)

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		err     error
		code    int
		verdict string
	}{
		{nil, 0, VerdictVerified},
		{&Error{Class: ErrUsage, Check: checkInput}, 1, VerdictUsage},
		{&Error{Class: ErrRejected, Check: checkEnvelope, Code: "SIGNATURE_INVALID", Passed: []string{"input"}}, 2, VerdictRejected},
		{&Error{Class: ErrPolicy, Check: "policy/measurement"}, 4, VerdictPolicy},
		{&Error{Class: ErrCannotCheck, Check: "platform/revocation"}, 3, VerdictCannotCheck},
		{errors.New("anything else"), 3, VerdictCannotCheck},
	} {
		o := NewOutcome(&Result{}, c.err)
		if o.ExitCode != c.code || o.Verdict != c.verdict || ExitCode(c.verdict) != c.code || verdict(c.err) != c.verdict {
			t.Fatalf("%v: %+v", c.err, o)
		}
		ve, isVE := errors.AsType[*Error](c.err)
		switch {
		case c.err == nil:
			if o.Result == nil || o.Error != nil {
				t.Fatalf("success: %+v", o)
			}
		case isVE:
			if o.Result != nil || o.Error == nil || o.Error.Check != ve.Check || o.Error.Class != c.verdict ||
				o.Error.Code != string(ve.Code) || o.Error.Passed == nil || o.Error.Message != c.err.Error() {
				t.Fatalf("%v: %+v", c.err, o.Error)
			}
		default:
			if o.Result != nil || o.Error != nil {
				t.Fatalf("%v: %+v", c.err, o)
			}
		}
	}
}
