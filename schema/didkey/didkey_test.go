package didkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The conformance bundle's agent DID and the gateway signer.
var knownDIDs = []string{
	"did:key:z6MkneMkZqwqRiU5mJzSG3kDwzt9P8C59N4NGTfBLfSGE7c7",
	"did:key:z6MkfF4ykuxdK3Cea9xDqWgLLgMBvxcypy6Tv1K45Eahxy3m",
	"did:key:z6MkehRgf7yJbgaGfYsdoAsKdBPE3dj2CYhowQdcjqSJgvVd",
}

func TestRoundTrip(t *testing.T) {
	for _, did := range knownDIDs {
		pub, err := Parse(did)
		if err != nil {
			t.Fatalf("Parse(%q): %v", did, err)
		}
		if got := Format(pub); got != did {
			t.Fatalf("Format(Parse(%q)) = %q", did, got)
		}
	}
}

// TestKnownKey checks the multicodec prefix: every Ed25519 did:key starts
// with "z6Mk".
func TestKnownKey(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	did := Format(pub)
	if !strings.HasPrefix(did, "did:key:z6Mk") {
		t.Fatalf("Ed25519 did:key must start with z6Mk, got %q", did)
	}
	got, err := Parse(did)
	if err != nil || hex.EncodeToString(got) != hex.EncodeToString(pub) {
		t.Fatalf("Parse: %x, %v", got, err)
	}
}

func TestParseRejects(t *testing.T) {
	valid := knownDIDs[0]
	for _, s := range []string{
		"", "did:key:", "did:key:z", "did:web:example.com", "did:key:" + valid[8:][1:],
		"did:key:m" + valid[9:],       // multibase base64 prefix
		"DID:key:" + valid[8:],        // case
		valid + "1",                   // trailing byte
		valid[:len(valid)-1],          // truncated
		valid[:20] + "0" + valid[21:], // '0' is not base58
		valid[:20] + "l" + valid[21:], // 'l' is not base58
		"did:key:z" + "1" + valid[9:], // leading zero byte, wrong length
		"did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme", // secp256k1 multicodec
		valid + strings.Repeat("z", MaxLen),
		" " + valid, valid + "\n",
	} {
		if pub, err := Parse(s); !errors.Is(err, ErrInvalid) || pub != nil {
			t.Errorf("Parse(%q) = %x, %v; want ErrInvalid", s, pub, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, d := range knownDIDs {
		f.Add(d)
	}
	f.Add("did:key:z1")
	f.Add("did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := Parse(s)
		if err != nil {
			if pub != nil {
				t.Fatal("key returned with error")
			}
			return
		}
		if Format(pub) != s {
			t.Fatalf("Parse(%q) re-formats to %q", s, Format(pub))
		}
	})
}
