// Package didkey encodes and decodes did:key identifiers for Ed25519 public
// keys: "did:key:z" + base58btc(0xed 0x01 || 32-byte key), the multicodec
// ed25519-pub prefix as an unsigned varint.
//
// Both directions are strict: Parse accepts only the canonical form that
// Format produces, so a DID string names exactly one key and one key has
// exactly one DID string.
package didkey

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/clawea/attester/schema/charclass"
	"github.com/mr-tron/base58"
)

// prefix is the fixed prefix of every Ed25519 did:key this package accepts.
const prefix = "did:key:z"

// maxLen bounds the DID string before any decoding.
const maxLen = 128

var multicodecEd25519 = [2]byte{0xed, 0x01}

// errInvalid is returned (wrapped) for any string that is not a canonical
// Ed25519 did:key.
var errInvalid = errors.New("didkey: invalid did:key")

// Format returns the did:key for pub. It panics only on a wrong key length,
// which is a programming error.
func Format(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		panic("didkey: Format called with a key of the wrong length")
	}
	b := make([]byte, 0, 2+ed25519.PublicKeySize)
	b = append(b, multicodecEd25519[:]...)
	b = append(b, pub...)
	return prefix + base58.Encode(b)
}

// Parse returns the Ed25519 public key named by did.
func Parse(did string) (ed25519.PublicKey, error) {
	if len(did) > maxLen {
		return nil, fmt.Errorf("%w: %d characters, limit %d", errInvalid, len(did), maxLen)
	}
	if len(did) <= len(prefix) || did[:len(prefix)] != prefix {
		return nil, fmt.Errorf("%w: want prefix %q", errInvalid, prefix)
	}
	enc := did[len(prefix):]
	b, err := base58.Decode(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: base58btc: %v", errInvalid, err)
	}
	if len(b) != 2+ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: decoded %d bytes, want %d", errInvalid, len(b), 2+ed25519.PublicKeySize)
	}
	if b[0] != multicodecEd25519[0] || b[1] != multicodecEd25519[1] {
		return nil, fmt.Errorf("%w: multicodec 0x%02x%02x is not ed25519-pub (0xed01)", errInvalid, b[0], b[1])
	}
	// base58 has no padding, but leading '1's encode leading zero bytes:
	// insist on the canonical encoding so the mapping stays one-to-one.
	if base58.Encode(b) != enc {
		return nil, fmt.Errorf("%w: non-canonical base58btc", errInvalid)
	}
	return ed25519.PublicKey(b[2:]), nil
}

// ValidSyntax reports whether s has the DID syntax the protocol accepts for
// every DID it carries (agent, signer, attester, issuer): "did:key:" or
// "did:web:" followed by one or more of [A-Za-z0-9._%-]. It is the regular
// expression ^did:(key|web):[a-zA-Z0-9._%-]+$ of clawverify, and the one
// place this module states it. It does not decode the key; Parse does.
// Callers bound the length first where a limit applies.
func ValidSyntax(s string) bool {
	const key, web = "did:key:", "did:web:"
	var rest string
	switch {
	case strings.HasPrefix(s, key):
		rest = s[len(key):]
	case strings.HasPrefix(s, web):
		rest = s[len(web):]
	default:
		return false
	}
	return rest != "" && methodSpecificChars.All(rest)
}

var methodSpecificChars = charclass.Alnum().Or(charclass.Of("._%-"))
