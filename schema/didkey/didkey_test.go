package didkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"regexp"
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
		valid + strings.Repeat("z", maxLen),
		" " + valid, valid + "\n",
	} {
		if pub, err := Parse(s); !errors.Is(err, errInvalid) || pub != nil {
			t.Errorf("Parse(%q) = %x, %v; want errInvalid", s, pub, err)
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

// didSyntax is clawverify's DID expression, which ValidSyntax implements.
var didSyntax = regexp.MustCompile(`^did:(key|web):[a-zA-Z0-9._%-]+$`)

func TestValidSyntax(t *testing.T) {
	for s, want := range map[string]bool{
		"did:key:z6Mk":           true,
		"did:web:example.com":    true,
		"did:web:a%3A8443":       true,
		"did:key:":               false,
		"did:web:":               false,
		"did:foo:x":              false,
		"DID:key:x":              false,
		"did:key:x\n":            false,
		"did:key:x y":            false,
		"did:key:x/y":            false,
		"did:web:ex.com:path":    false,
		" did:key:z":             false,
		"did:key:zé":             false,
		"did:pkh:eip155:1:0xabc": false,
	} {
		if got := ValidSyntax(s); got != want || got != didSyntax.MatchString(s) {
			t.Errorf("ValidSyntax(%q) = %v, want %v (regexp %v)", s, got, want, didSyntax.MatchString(s))
		}
	}
}

func FuzzValidSyntax(f *testing.F) {
	f.Add("did:key:z6Mk")
	f.Add("did:web:a\n")
	f.Fuzz(func(t *testing.T, s string) {
		if ValidSyntax(s) != didSyntax.MatchString(s) {
			t.Fatalf("ValidSyntax(%q) = %v, regexp says %v", s, ValidSyntax(s), didSyntax.MatchString(s))
		}
	})
}
