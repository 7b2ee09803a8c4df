// Package fuzzcheck holds the property every strict parser's fuzz target
// checks (STYLE.md 4): on an error nothing is returned, and whatever is
// accepted encodes back to the identical bytes. Only tests import it
// (internal/layers enforces that).
package fuzzcheck

import (
	"bytes"
	"reflect"
	"testing"
)

// RoundTrip parses in with parse and fails tb when parse returns a value
// with an error, or accepts in and encode does not give in back exactly.
// It returns the parsed value and whether in was accepted, for checks of
// its own that a target adds. encode may fail only on values parse did not
// return (a failure here fails tb).
func RoundTrip[T any](tb testing.TB, in []byte, parse func([]byte) (T, error), encode func(T) ([]byte, error)) (T, bool) {
	tb.Helper()
	var zero T
	v, err := parse(in)
	if err != nil {
		if !reflect.ValueOf(&v).Elem().IsZero() {
			tb.Fatalf("a value returned with the error %v", err)
		}
		return zero, false
	}
	out, err := encode(v)
	if err != nil {
		tb.Fatalf("an accepted input does not encode: %v", err)
	}
	if !bytes.Equal(out, in) {
		tb.Fatalf("an accepted input encodes to other bytes:\n in  %x\n out %x", in, out)
	}
	return v, true
}
