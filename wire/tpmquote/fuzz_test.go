package tpmquote

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/wire/evidence"
)

// Every parser: no panic on any input, nothing returned with an error, and
// whatever is accepted re-encodes to the identical bytes. Seeds: a real swtpm
// quote in testdata/fuzz (written by enclave/tpm/internal/fixturegen)
// and software-signed evidence added here.

// total adapts an encoder that cannot fail to fuzzcheck.RoundTrip's encode.
func total[T any](encode func(T) []byte) func(T) ([]byte, error) {
	return func(v T) ([]byte, error) { return encode(v), nil }
}

func FuzzParseAttest(f *testing.F) {
	f.Add((&Attest{QualifiedSigner: []byte{0, 0xb}, ExtraData: []byte{1}, PCRs: []int{0, 23}, PCRDigest: []byte{2}}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, ParseAttest, total((*Attest).marshal))
	})
}

func FuzzParsePublic(f *testing.F) {
	f.Add((&Public{Type: algRSA, KeyBits: 2048, N: append([]byte{0x80}, make([]byte, 255)...)}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := fuzzcheck.RoundTrip(t, b, ParsePublic, total((*Public).Marshal))
		if ok {
			_, _ = p.CryptoPublicKey()
		}
	})
}

func FuzzParseSignature(f *testing.F) {
	f.Add((&signature{Alg: algRSASSA, Sig: []byte{1, 2, 3}}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, parseSignature, total((*signature).marshal))
	})
}

func FuzzParsePCRValues(f *testing.F) {
	f.Add(testPCRs().Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, ParsePCRValues, total(PCRValues.Marshal))
	})
}

// FuzzVerify feeds arbitrary evidence fields to Verify against the report
// data of the seeds. It must never panic, and whatever it accepts must
// re-encode to the exact bytes that were signed.
func FuzzVerify(f *testing.F) {
	rd := testRD(f, "rd")
	k := newSoftKey(f, AlgECC, AKRequiredAttributes)
	ev := k.evidence(f, rd, testPCRs(), nil)
	f.Add(ev.Blob, ev.Signature, ev.Aux[AuxAKPublic], ev.Aux[AuxPCRValues])
	fx, fxRD, _ := fixture(f)
	f.Fuzz(func(t *testing.T, blob, sig, ak, pcrs []byte) {
		for _, r := range []evidence.ReportData{rd, fxRD} {
			e := &evidence.Evidence{
				Platform:  evidence.PlatformTPM,
				Simulated: true,
				Format:    Format,
				Blob:      blob,
				Signature: sig,
				CertChain: fx.CertChain,
				Aux:       map[string][]byte{AuxAKPublic: ak, AuxPCRValues: pcrs},
			}
			v, err := Verify(e, r, VerifyOpts{AllowUntrustedAK: true, AllowSimulated: true})
			if err != nil {
				if v != nil {
					t.Fatal("data returned with an error")
				}
				continue
			}
			if !bytes.Equal(v.Attest.marshal(), blob) || !bytes.Equal(v.AKPublic.Marshal(), ak) || !bytes.Equal(v.PCRs.Marshal(), pcrs) {
				t.Fatal("accepted evidence does not re-encode")
			}
		}
	})
}
