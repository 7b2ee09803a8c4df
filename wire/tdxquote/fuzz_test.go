package tdxquote_test

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/tdxquote"
)

// FuzzParse: Parse never panics; whatever it accepts re-encodes to the
// identical bytes, has that exact Length, and go-tdx-guest's parser (which
// panics on some malformed input) accepts and re-encodes it identically too.
func FuzzParse(f *testing.F) {
	// The committed corpus holds fake quotes; the real samples are read from
	// the module cache at run time, not copied.
	for _, name := range []string{tdxtest.SampleSPR, tdxtest.SampleCOS} {
		raw := tdxtest.Read(f, name)
		if n, err := tdxquote.Length(raw); err == nil {
			f.Add(raw[:n])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := tdxquote.Parse(b)
		if err != nil {
			if q != nil {
				t.Fatal("quote returned with error")
			}
			return
		}
		back, err := q.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed quote: %v", err)
		}
		if !bytes.Equal(back, b) {
			t.Fatal("Marshal(Parse(b)) != b")
		}
		if n, err := tdxquote.Length(b); err != nil || n != len(b) {
			t.Fatalf("Length = %d, %v; want %d", n, err, len(b))
		}
		checkAgainstLibrary(t, b, q)
	})
}

// FuzzParsePCKChain: never panics; whatever it accepts re-encodes to the
// input up to the optional trailing NUL.
func FuzzParsePCKChain(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		der, err := tdxquote.ParsePCKChain(b)
		if err != nil {
			if der != nil {
				t.Fatal("certificates returned with error")
			}
			return
		}
		enc := tdxquote.EncodePCKChain(der)
		if !bytes.Equal(enc, b) && !bytes.Equal(append(enc, 0), b) {
			t.Fatal("EncodePCKChain(ParsePCKChain(b)) != b")
		}
	})
}
