package tpmcred

import (
	"testing"
	"time"

	"github.com/clawea/attester/internal/fuzzcheck"
)

// Whatever the parsers accept re-encodes to the same bytes; on error they
// return nothing.

func FuzzParseChallenge(f *testing.F) {
	name := append([]byte{0, 0x0b}, make([]byte, 32)...)
	fuzzRoundTrip(f, &Challenge{AKName: name, EKName: name, CredentialBlob: []byte{1, 2}, EncryptedSecret: []byte{3}}, ParseChallenge)
}

func FuzzParseCertification(f *testing.F) {
	fuzzRoundTrip(f, &Certification{AKPublic: []byte{1}, EKCert: []byte{2}, EKIntermediates: [][]byte{{3}},
		ActivatedAt: time.Unix(1700000000, 0), ActivatedBy: "seed"}, ParseCertification)
}

// fuzzRoundTrip fuzzes parse from seed's encoding: an error comes with no
// value, and a parsed value encodes back to its input.
func fuzzRoundTrip[E any, P interface {
	*E
	Marshal() []byte
}](f *testing.F, seed P, parse func([]byte) (P, error)) {
	f.Add(seed.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, parse, func(p P) ([]byte, error) { return p.Marshal(), nil })
	})
}
