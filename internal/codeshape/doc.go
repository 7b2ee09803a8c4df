// Package codeshape holds the test that keeps the module's functions short
// (STYLE.md item 24: a long function is a list of named steps): no non-test
// function outside hack/ and the test-data generators is longer than
// MaxLines lines. It also holds the ratchet on the number of exported
// names (STYLE.md item 25) and the bound on cmd/attester's size (issue 18).
// It has no code of its own.
package codeshape
