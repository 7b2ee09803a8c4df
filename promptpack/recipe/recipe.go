// Package recipe holds the contract shared by prompt recipes: code that
// knows one harness version's assembly rules and rebuilds its system prompt
// from harness data and resolved builder params carried in a prompt pack.
//
// There is no registry here: the caller (the attester, packctl) maps the
// recipe id and version named in a pack to an implementation it links in,
// and refuses any pair it does not know.
package recipe

import (
	"errors"
	"fmt"
)

// Recipe identifies a recipe implementation.
type Recipe interface {
	// ID is the recipe name carried in packs, e.g. "openclaw-sig".
	ID() string
	// Version is the recipe's rule version; a change of output for the
	// same inputs needs a new version.
	Version() string
}

// ErrUnknownRecipe is returned when a pack names a recipe id or version
// that the caller does not implement.
var ErrUnknownRecipe = errors.New("recipe: unknown recipe")

// Match returns r when its id and version equal the requested ones, and an
// error wrapping ErrUnknownRecipe otherwise. The comparison is exact.
func Match(r Recipe, id, version string) (Recipe, error) {
	if r == nil || r.ID() != id || r.Version() != version {
		return nil, fmt.Errorf("%w: %q version %q", ErrUnknownRecipe, id, version)
	}
	return r, nil
}
