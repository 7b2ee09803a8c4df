package verify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
)

func keyAttestation(t *testing.T, q measurer, challenge []byte) ([]byte, []byte) {
	t.Helper()
	recipient := bytes.Repeat([]byte{7}, 32)
	is := &attestation.Issuer{Key: attesterKey(), Quoter: q, Now: fixedNow, RecipientKey: recipient}
	jws, err := is.KeyAttestation(context.Background(), challenge)
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.LaunchMeasurement(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return jws, m
}

func TestVerifyKeyAttestation(t *testing.T) {
	challenge := []byte("fresh challenge from the pack author")
	for name, q := range map[string]measurer{"sev-snp": simSEV(t, sim.Options{}), "tdx": simTDX(t, fakeqe.Options{})} {
		t.Run(name, func(t *testing.T) {
			jws, m := keyAttestation(t, q, challenge)
			pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, Measurements: [][]byte{m}, TrustedAttesterDIDs: []string{did(attesterKey())}}
			opts := Options{Now: fixedNow}
			res, err := VerifyKeyAttestation(jws, challenge, pol, opts)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if res.AttesterDID != did(attesterKey()) || !bytes.Equal(res.RecipientX25519, bytes.Repeat([]byte{7}, 32)) || !res.Simulated {
				t.Fatalf("result %+v", res)
			}
			// Negative cases, each with its class.
			strict := *pol
			strict.AllowSimulated = false
			other := *pol
			other.Measurements = [][]byte{bytes.Repeat([]byte{1}, len(m))}
			untrusted := *pol
			untrusted.TrustedAttesterDIDs = []string{did(key(1))}
			tampered := bytes.Clone(jws)
			tampered[len(tampered)/2] ^= 1
			cases := []struct {
				name      string
				jws       []byte
				challenge []byte
				pol       *Policy
				class     error
			}{
				{"stale challenge", jws, []byte("another challenge"), pol, ErrRejected},
				{"tampered", tampered, challenge, pol, ErrRejected},
				{"simulated not allowed", jws, challenge, &strict, ErrPolicy},
				{"measurement", jws, challenge, &other, ErrPolicy},
				{"untrusted attester", jws, challenge, &untrusted, ErrPolicy},
				{"garbage", []byte("not a jws"), challenge, pol, ErrRejected},
				{"empty", nil, challenge, pol, ErrRejected},
			}
			for _, c := range cases {
				if res, err := VerifyKeyAttestation(c.jws, c.challenge, c.pol, opts); !errors.Is(err, c.class) || res != nil {
					t.Errorf("%s: %v, want %v", c.name, err, c.class)
				}
			}
			if _, err := VerifyKeyAttestation(jws, challenge, pol, Options{}); !errors.Is(err, ErrUsage) {
				t.Errorf("no clock: %v", err)
			}
		})
	}
}

// An execution attestation's evidence document is not a key attestation.
func TestVerifyKeyAttestationRefusesExecutionDocument(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	if _, err := VerifyKeyAttestation(f.ev, nil, f.simPolicy(), Options{Now: fixedNow}); !errors.Is(err, ErrRejected) {
		t.Fatalf("execution document accepted as key attestation: %v", err)
	}
}

// A key attestation the attester signed but of an evidence version this
// verifier does not know is refused as UNKNOWN_ENVELOPE_VERSION, as an
// execution attestation's document is, and one with a bad signature as
// SIGNATURE_INVALID.
func TestVerifyKeyAttestationCodes(t *testing.T) {
	challenge := []byte("fresh challenge from the pack author")
	q := simSEV(t, sim.Options{})
	jws, m := keyAttestation(t, q, challenge)
	pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, Measurements: [][]byte{m}, TrustedAttesterDIDs: []string{did(attesterKey())}}
	opts := Options{Now: fixedNow}

	seg := strings.Split(string(jws), ".")
	payload, err := b64u.Decode(seg[1])
	if err != nil {
		t.Fatal(err)
	}
	future := bytes.Replace(payload, []byte(`"evidence_version":"`), []byte(`"evidence_version":"9`), 1)
	if bytes.Equal(future, payload) {
		t.Fatal("the payload has no evidence_version to change")
	}
	input := seg[0] + "." + b64u.Encode(future)
	resigned := []byte(input + "." + b64u.Encode(ed25519.Sign(attesterKey(), []byte(input))))
	_, err = VerifyKeyAttestation(resigned, challenge, pol, opts)
	wantErr(t, err, ErrRejected, checkEvidenceDocument, poh.UnknownEnvelopeVersion)

	badSig := seg[0] + "." + seg[1] + "." + b64u.Encode(ed25519.Sign(key(1), []byte(seg[0]+"."+seg[1])))
	_, err = VerifyKeyAttestation([]byte(badSig), challenge, pol, opts)
	wantErr(t, err, ErrRejected, checkEvidenceDocument, poh.SignatureInvalid)
}
