// Package testjson encodes the JSON values tests build. Only tests import
// it (internal/layers enforces that).
package testjson

import (
	"encoding/json"
	"testing"
)

// Marshal is json.Marshal of v; a failure fails tb.
func Marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
