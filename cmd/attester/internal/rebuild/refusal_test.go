package rebuild

import (
	"errors"
	"fmt"
	"testing"

	"github.com/clawea/attester/promptpack/recipe/openclawsig"
)

// TestRefusalTable: every code round-trips to its sentinel, every template
// kind to a TemplateError with the name, and an unknown code is a worker
// failure, not a refusal.
func TestRefusalTable(t *testing.T) {
	seen := map[string]bool{}
	for _, rf := range refusals {
		if seen[rf.code] {
			t.Fatalf("duplicate code %s", rf.code)
		}
		seen[rf.code] = true
		rep := refusalReply(fmt.Errorf("layer: %w", rf.err))
		if rep.Code != rf.code {
			// An earlier entry may match a sentinel that wraps another;
			// the table must be ordered so that this does not happen.
			t.Errorf("%v: code %s, want %s", rf.err, rep.Code, rf.code)
		}
		if err := refusalError(rep); !errors.Is(err, rf.err) {
			t.Errorf("%s: %v", rf.code, err)
		}
	}
	for _, k := range templateKinds {
		rep := refusalReply(fmt.Errorf("x: %w", &openclawsig.TemplateError{Name: "soul.txt", Err: k.err}))
		var te *openclawsig.TemplateError
		if err := refusalError(rep); !errors.As(err, &te) || te.Name != "soul.txt" || !errors.Is(err, k.err) {
			t.Errorf("%s: %v", k.code, err)
		}
	}
	if err := refusalError(refusalReply(errors.New("something else"))); !errors.Is(err, ErrInvalidPack) {
		t.Errorf("unknown error: %v", err)
	}
	for _, rep := range []reply{{Code: "nope"}, {Code: "template", TemplateKind: "nope"}} {
		if err := refusalError(rep); !errors.Is(err, ErrWorker) {
			t.Errorf("%+v: %v", rep, err)
		}
	}
}
