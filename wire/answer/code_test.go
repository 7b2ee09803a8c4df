package answer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCode: every refusal, wrapped or not, yields the reason code its
// message starts with; any other error yields "".
func TestCode(t *testing.T) {
	for _, r := range reasons {
		want, _, _ := strings.Cut(r.Error(), ": ")
		if !strings.HasPrefix(want, "ANSWER_") {
			t.Fatalf("%v: no reason code", r)
		}
		if got := Code(fmt.Errorf("%w: detail", r)); got != want {
			t.Errorf("Code(%v) = %q, want %q", r, got, want)
		}
	}
	if got := Code(errors.New("ANSWER_SEQUENCE: not one of ours")); got != "" {
		t.Errorf("foreign error: %q", got)
	}
	if got := Code(nil); got != "" {
		t.Errorf("nil: %q", got)
	}
	st := Statement{AnswerVersion: "0"}
	if _, err := st.Marshal(); Code(err) != "ANSWER_MALFORMED" {
		t.Errorf("Marshal: %v", err)
	}
}
