package recipe

import (
	"errors"
	"testing"
)

type fake struct{ id, version string }

func (f fake) ID() string      { return f.id }
func (f fake) Version() string { return f.version }

func TestMatch(t *testing.T) {
	r := fake{"x", "1"}
	if got, err := Match(r, "x", "1"); err != nil || got != Recipe(r) {
		t.Fatalf("Match = %v, %v", got, err)
	}
	for _, tc := range [][2]string{{"x", "2"}, {"y", "1"}, {"X", "1"}, {"", ""}} {
		if got, err := Match(r, tc[0], tc[1]); !errors.Is(err, ErrUnknownRecipe) || got != nil {
			t.Errorf("Match(%q, %q) = %v, %v", tc[0], tc[1], got, err)
		}
	}
	if _, err := Match(nil, "x", "1"); !errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("Match(nil) = %v", err)
	}
}
