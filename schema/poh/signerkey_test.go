package poh

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/clawea/attester/schema/pohjson"
)

// wrongPublic is a signer whose Public is not an ed25519.PublicKey but
// whose Sign would produce an Ed25519 signature.
type wrongPublic struct{ ed25519.PrivateKey }

func (w wrongPublic) Public() crypto.PublicKey { return []byte(w.PrivateKey[32:]) }

// failingSigner is an Ed25519 signer whose Sign fails.
type failingSigner struct{ ed25519.PrivateKey }

func (failingSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("device gone")
}

// TestSignRefusesNonEd25519Signers checks that Sign fails closed on a
// signing key that is not an Ed25519 key, instead of panicking or signing
// under a DID that names another key.
func TestSignRefusesNonEd25519Signers(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	payload := pohjson.NewObject(pohjson.M("a", pohjson.NewString("b")))
	for name, s := range map[string]crypto.Signer{
		"nil":               nil,
		"nil private key":   ed25519.PrivateKey(nil),
		"short private key": ed25519.PrivateKey{1},
		"ECDSA":             ec,
		"byte-slice public": wrongPublic{key},
	} {
		if _, err := SignerKey(s); !errors.Is(err, errNotEd25519) {
			t.Errorf("%s: SignerKey error %v", name, err)
		}
		if env, err := Sign(TypeGatewayReceipt, payload, s, time.Unix(0, 0)); env != nil || !errors.Is(err, errNotEd25519) {
			t.Errorf("%s: Sign returned %q, %v", name, env, err)
		}
	}
	if env, err := Sign(TypeGatewayReceipt, payload, failingSigner{key}, time.Unix(0, 0)); env != nil || err == nil {
		t.Errorf("failing signer: Sign returned %q, %v", env, err)
	}
	if pub, err := SignerKey(key); err != nil || !pub.Equal(key.Public()) {
		t.Errorf("ed25519.PrivateKey: %x, %v", pub, err)
	}
}
