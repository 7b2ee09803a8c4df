package earresult

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/b64u"
)

// TestKeyIDRFC8037Vector checks the thumbprint against RFC 8037 appendix
// A.3: the Ed25519 key of appendix A.2 has thumbprint
// kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k.
func TestKeyIDRFC8037Vector(t *testing.T) {
	x, err := b64u.Decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	kid, err := keyID(ed25519.PublicKey(x))
	if err != nil {
		t.Fatal(err)
	}
	if want := "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; kid != want {
		t.Fatalf("kid %s, want %s", kid, want)
	}
}

// TestSignedEARNamesItsKey: the EAR's protected header carries the kid,
// and the published set holds a key with that kid that verifies it.
func TestSignedEARNamesItsKey(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, signer := range map[string]crypto.Signer{"ed25519": edKey, "p256": ecKey} {
		t.Run(name, func(t *testing.T) {
			pub := signer.Public()
			tok, err := signEAR(testEAR(t), signer)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := jws.Parse(tok)
			if err != nil {
				t.Fatal(err)
			}
			kid := msg.Signatures()[0].ProtectedHeaders().KeyID()
			want, _ := keyID(pub)
			if kid == "" || kid != want {
				t.Fatalf("kid %q, want %q", kid, want)
			}
			setJSON, err := PublicKeySet(pub)
			if err != nil {
				t.Fatal(err)
			}
			set, err := jwk.Parse(setJSON)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := jws.Verify(tok, jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil {
				t.Fatalf("the published set does not verify the EAR: %v", err)
			}
			var raw map[string][]map[string]any
			if err := json.Unmarshal(setJSON, &raw); err != nil {
				t.Fatal(err)
			}
			k := raw["keys"][0]
			if k["kid"] != want || k["use"] != "sig" || k["alg"] == nil || k["d"] != nil {
				t.Fatalf("published key %v: want kid, use sig, alg and no private member", k)
			}
		})
	}
}

func TestPublicKeySetRefusesDuplicates(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := PublicKeySet(pub, pub); !errors.Is(err, errKey) {
		t.Fatalf("err %v, want errKey", err)
	}
	if _, err := PublicKeySet([]byte("not a key")); !errors.Is(err, errKey) {
		t.Fatalf("err %v, want errKey", err)
	}
}

func testEAR(t *testing.T) *ear.AttestationResult {
	t.Helper()
	ar := ear.NewAttestationResult(SubmodName, "test", verifierDeveloper)
	iat := time.Unix(1700000000, 0).Unix()
	ar.IssuedAt = &iat
	st := ear.TrustTierAffirming
	ar.Submods[SubmodName].Status = &st
	return ar
}

func TestVerify(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	set, _ := PublicKeySet(key.Public())
	tok, err := signEAR(testEAR(t), key)
	if err != nil {
		t.Fatal(err)
	}
	ar, kid, err := Verify(append(tok, '\n'), set)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := keyID(key.Public()); kid != want || *ar.Submods[SubmodName].Status != ear.TrustTierAffirming {
		t.Fatalf("kid %s status %v", kid, ar.Submods[SubmodName].Status)
	}
	otherTok, _ := signEAR(testEAR(t), other)
	noKid, _ := testEAR(t).Sign(jwa.EdDSA, key) // ear's own Sign: no kid
	parts := strings.Split(string(tok), ".")
	claims, _ := b64u.Decode(parts[1])
	forged := parts[0] + "." + b64u.Encode([]byte(strings.Replace(string(claims), `"affirming"`, `"contraindicated"`, 1))) + "." + parts[2]
	noAlgSet := []byte(strings.Replace(string(set), `"alg":"EdDSA",`, "", 1))
	for name, tc := range map[string]struct {
		tok, set []byte
		want     string
	}{
		"other key":    {otherTok, set, "not in the key set"},
		"no kid":       {noKid, set, "no kid"},
		"forged":       {[]byte(forged), set, "signature"},
		"garbage":      {[]byte("a.b.c"), set, "compact JWS"},
		"huge":         {make([]byte, maxEARBytes+1), set, "over"},
		"set no alg":   {tok, noAlgSet, "no kid or alg"},
		"set not json": {tok, []byte("{"), "key set"},
	} {
		if _, _, err := Verify(tc.tok, tc.set); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// signEAR signs ar with a Signer made for key.
func signEAR(ar *ear.AttestationResult, key crypto.Signer) ([]byte, error) {
	s, err := NewSigner(key)
	if err != nil {
		return nil, err
	}
	return s.Sign(ar)
}

// TestSignedEARHeader: the protected header is exactly alg, kid and typ
// (docs/spec/verifier-api.md section 7), for both algorithms, and the
// payload is the EAR's own JSON form.
func TestSignedEARHeader(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for alg, key := range map[string]crypto.Signer{"EdDSA": edKey, "ES256": ecKey} {
		ar := testEAR(t)
		tok, err := signEAR(ar, key)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(tok), ".")
		if len(parts) != 3 {
			t.Fatalf("%s: %d segments", alg, len(parts))
		}
		kid, _ := keyID(key.Public())
		if h, _ := b64u.Decode(parts[0]); string(h) != `{"alg":"`+alg+`","kid":"`+kid+`","typ":"JWT"}` {
			t.Errorf("%s: header %s", alg, h)
		}
		want, _ := ar.MarshalJSON()
		if p, _ := b64u.Decode(parts[1]); string(p) != string(want) {
			t.Errorf("%s: payload %s, want %s", alg, p, want)
		}
		if sig, _ := b64u.Decode(parts[2]); (alg == "ES256" && len(sig) != 64) || (alg == "EdDSA" && len(sig) != ed25519.SignatureSize) {
			t.Errorf("%s: signature of %d bytes", alg, len(sig))
		}
	}
}
