package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
)

// TestRefusalTable: every code round-trips to its sentinel, every template
// kind to a TemplateError with the name, and an unknown code is a worker
// failure, not a refusal.
func TestRefusalTable(t *testing.T) {
	seen := map[string]bool{}
	for _, rf := range workerRefusals {
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
	for _, k := range workerTemplateKinds {
		rep := refusalReply(fmt.Errorf("x: %w", &openclawsig.TemplateError{Name: "soul.txt", Err: k.err}))
		var te *openclawsig.TemplateError
		if err := refusalError(rep); !errors.As(err, &te) || te.Name != "soul.txt" || !errors.Is(err, k.err) {
			t.Errorf("%s: %v", k.code, err)
		}
	}
	if err := refusalError(refusalReply(errors.New("something else"))); !errors.Is(err, errRebuildInvalidPack) {
		t.Errorf("unknown error: %v", err)
	}
	for _, rep := range []workerReply{{Code: "nope"}, {Code: "template", TemplateKind: "nope"}} {
		if err := refusalError(rep); !errors.Is(err, errRebuildWorker) {
			t.Errorf("%+v: %v", rep, err)
		}
	}
}

// TestAdmissionRefusals: an admission refusal round-trips as a
// *admission.RuleError with its rule and input (before any params sentinel
// it may wrap), an uncheckable pack as admission.ErrUnreadable, and a reply
// with an unknown rule or an oversized or unprintable input is a worker
// failure.
func TestAdmissionRefusals(t *testing.T) {
	in := &admission.RuleError{Rule: "BOOTSTRAP_CONTENT_NOT_PINNED", Input: "bootstrap:AGENTS.md"}
	var re *admission.RuleError
	if err := refusalError(refusalReply(fmt.Errorf("x: %w", in))); !errors.As(err, &re) || *re != *in || !errors.Is(err, admission.ErrRefused) {
		t.Fatalf("rule error: %v", err)
	}
	// An input name with control characters (from the pack) still comes
	// back as the rule, with the characters replaced.
	ctl := &admission.RuleError{Rule: "BOOTSTRAP_PATH_NOT_ALLOWED", Input: "bootstrap:A\nB.md"}
	if err := refusalError(refusalReply(ctl)); !errors.As(err, &re) || re.Input != "bootstrap:A?B.md" {
		t.Fatalf("control characters: %v", err)
	}
	unreadable := fmt.Errorf("%w: %w", admission.ErrUnreadable, openclawsig.ErrInvalidParams)
	if rep := refusalReply(unreadable); rep.Code != "admission_uncheckable" {
		t.Fatalf("uncheckable: %+v", rep)
	}
	if err := refusalError(workerReply{Code: "admission_uncheckable"}); !errors.Is(err, admission.ErrUnreadable) {
		t.Fatalf("uncheckable: %v", err)
	}
	for _, rep := range []workerReply{
		{Code: "admission", Rule: "NOT_A_RULE", Input: "runtime"},
		{Code: "admission", Rule: "RUNTIME_FAIL_MODE_NOT_DENY", Input: strings.Repeat("a", maxAdmissionInput+1)},
		{Code: "admission", Rule: "RUNTIME_FAIL_MODE_NOT_DENY", Input: "a\nb"},
	} {
		if err := refusalError(rep); !errors.Is(err, errRebuildWorker) {
			t.Errorf("%+v: %v", rep, err)
		}
	}
}
