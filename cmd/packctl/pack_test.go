package main

import (
	"fmt"
	"testing"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/sealed"
)

// TestPackExit pins the documented exit codes of the pack commands.
func TestPackExit(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&openclawsig.TemplateError{Name: "a.txt", Err: openclawsig.ErrTemplateUntrusted}, exitPolicy},
		{&openclawsig.TemplateError{Name: "a.txt", Err: openclawsig.ErrTemplateModified}, exitRejected},
		{fmt.Errorf("x: %w", promptpack.ErrUnknownRecipe), exitCannot},
		{fmt.Errorf("x: %w", envelope.ErrNoMatchingRecipient), exitCannot},
		{fmt.Errorf("x: %w", sealed.ErrLockFailed), exitCannot},
		{fmt.Errorf("x: %w", envelope.ErrAuthentication), exitRejected},
		{fmt.Errorf("x: %w", envelope.ErrManifestMismatch), exitRejected},
		{promptpack.ErrReportMismatch, exitRejected},
		{promptpack.ErrUnknownVersion, exitRejected},
	} {
		if got := packExit(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}
