package envelope

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/clawea/attester/schema/b64u"
)

// Text encodings of keys: a version prefix followed by the base64url (no
// padding) encoding of the 32-byte RFC 9180 serialization.
const (
	publicKeyPrefix  = "clawea-promptpack-v1-pub:"
	PrivateKeyPrefix = "clawea-promptpack-v1-priv:"
)

// The one HPKE suite of format v1.
var (
	suiteKEM  = hpke.DHKEM(ecdh.X25519())
	suiteKDF  = hpke.HKDFSHA256()
	suiteAEAD = hpke.AES256GCM()
)

// KeyID identifies a recipient public key: SHA-256 over the key-id label, a
// zero byte and the 32-byte public key.
type KeyID [keyIDSize]byte

// String returns the base64url (no padding) encoding of the key id.
func (id KeyID) String() string { return b64u.Encode(id[:]) }

func computeKeyID(pub []byte) KeyID {
	h := sha256.New()
	h.Write([]byte(labelKeyID))
	h.Write([]byte{0})
	h.Write(pub)
	var id KeyID
	h.Sum(id[:0])
	return id
}

// PublicKey is a recipient's X25519 public key.
type PublicKey struct {
	pk hpke.PublicKey
	id KeyID
}

// newPublicKey returns the public key for its 32-byte RFC 9180
// serialization. It rejects non-canonical encodings and low-order points.
func newPublicKey(raw []byte) (*PublicKey, error) {
	if len(raw) != encSize {
		return nil, fmt.Errorf("envelope: %w: public key must be %d bytes", errInvalidKey, encSize)
	}
	if !canonicalX25519(raw) {
		return nil, fmt.Errorf("envelope: %w: non-canonical public key", errInvalidKey)
	}
	pub, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("envelope: %w: bad public key", errInvalidKey)
	}
	if lowOrder(pub) {
		return nil, fmt.Errorf("envelope: %w: low-order public key", errInvalidKey)
	}
	pk, err := hpke.NewDHKEMPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("envelope: %w: bad public key", errInvalidKey)
	}
	return &PublicKey{pk: pk, id: computeKeyID(raw)}, nil
}

// canonicalX25519 reports whether u is a reduced little-endian field element
// with the top bit clear, so that each key has exactly one encoding and one
// key id.
func canonicalX25519(u []byte) bool {
	if u[31]&0x80 != 0 {
		return false
	}
	// u >= 2^255-19 only if u = 0x7fff...ff{ed..ff}.
	if u[31] != 0x7f || u[0] < 0xed {
		return true
	}
	for _, b := range u[1:31] {
		if b != 0xff {
			return true
		}
	}
	return false
}

// lowOrder reports whether pub is a point of small order: the X25519 of any
// clamped scalar with such a point is zero, which crypto/ecdh reports as an
// error.
func lowOrder(pub *ecdh.PublicKey) bool {
	var probe [32]byte
	probe[0] = 0x2a
	probe[31] = 0x40
	sk, err := ecdh.X25519().NewPrivateKey(probe[:])
	if err != nil {
		return true
	}
	_, err = sk.ECDH(pub)
	return err != nil
}

// ParsePublicKey parses the text form "clawea-promptpack-v1-pub:" + b64u(32 bytes).
func ParsePublicKey(s string) (*PublicKey, error) {
	rest, ok := strings.CutPrefix(s, publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("envelope: %w: public key must start with %q", errInvalidKey, publicKeyPrefix)
	}
	var raw [encSize]byte
	if b64u.DecodeTo(raw[:], []byte(rest)) != nil {
		return nil, fmt.Errorf("envelope: %w: malformed public key %q", errInvalidKey, s)
	}
	return newPublicKey(raw[:])
}

// Bytes returns the 32-byte RFC 9180 serialization.
func (k *PublicKey) Bytes() []byte { return k.pk.Bytes() }

// KeyID returns the key's id.
func (k *PublicKey) KeyID() KeyID { return k.id }

// String returns the text form.
func (k *PublicKey) String() string { return publicKeyPrefix + b64u.Encode(k.pk.Bytes()) }

// MarshalText returns the text form.
func (k *PublicKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Equal reports whether k and o are the same key.
func (k *PublicKey) Equal(o *PublicKey) bool {
	return k != nil && o != nil && k.id == o.id
}

// PrivateKey is a recipient's X25519 private key. It never prints its key
// material: String, Format and GoString show only the key id. It deliberately
// implements no encoding interface (encoding.TextMarshaler, json.Marshaler)
// so that loggers and encoders cannot serialize it by accident.
type PrivateKey struct {
	sk  hpke.PrivateKey
	pub *PublicKey
}

// GenerateKey returns a new random private key.
func GenerateKey() (*PrivateKey, error) {
	sk, err := suiteKEM.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("envelope: generating key: %w", err)
	}
	return newPrivateKey(sk)
}

func newPrivateKey(sk hpke.PrivateKey) (*PrivateKey, error) {
	pub, err := newPublicKey(sk.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	return &PrivateKey{sk: sk, pub: pub}, nil
}

// ParsePrivateKey parses the text form PrivateKeyPrefix + b64u(32 bytes). The
// 32 bytes must be the canonical (clamped) RFC 9180 serialization. Errors
// never quote the input.
func ParsePrivateKey(text []byte) (*PrivateKey, error) {
	bad := fmt.Errorf("envelope: %w: malformed private key", errInvalidKey)
	if len(text) != len(PrivateKeyPrefix)+b64u.EncodedLen(dekSize) || string(text[:len(PrivateKeyPrefix)]) != PrivateKeyPrefix {
		return nil, bad
	}
	var raw [32]byte
	defer clear(raw[:])
	// Canonical b64u only: one text per key.
	if b64u.DecodeTo(raw[:], text[len(PrivateKeyPrefix):]) != nil {
		return nil, bad
	}
	sk, err := suiteKEM.NewPrivateKey(raw[:])
	if err != nil {
		return nil, bad
	}
	ser, err := sk.Bytes()
	if err != nil {
		return nil, bad
	}
	defer clear(ser)
	if subtle.ConstantTimeCompare(ser, raw[:]) != 1 {
		return nil, fmt.Errorf("envelope: %w: non-canonical private key", errInvalidKey)
	}
	k, err := newPrivateKey(sk)
	if err != nil {
		return nil, bad
	}
	return k, nil
}

// keyFileText returns the key text of a key file (section 5.3 of the
// spec): the text form, optionally followed by exactly one line feed.
// Anything else (CR, a second LF, spaces, a BOM) stays in the text, where
// the key parsers reject it. A file longer than the text form plus one byte
// is refused without looking at its bytes.
func keyFileText(b []byte, prefix string) ([]byte, bool) {
	textLen := len(prefix) + b64u.EncodedLen(encSize)
	if len(b) > textLen+1 {
		return nil, false
	}
	if len(b) == textLen+1 {
		if b[textLen] != '\n' {
			return nil, false
		}
		b = b[:textLen]
	}
	return b, true
}

// ParsePrivateKeyFile parses the bytes of a private key file: the text form
// (ParsePrivateKey) optionally followed by one line feed, and nothing else
// (no CR, no other whitespace). Errors never quote the input.
func ParsePrivateKeyFile(b []byte) (*PrivateKey, error) {
	text, ok := keyFileText(b, PrivateKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("envelope: %w: malformed private key file", errInvalidKey)
	}
	return ParsePrivateKey(text)
}

// parsePublicKeyFile parses the bytes of a public key file: the text form
// (ParsePublicKey) optionally followed by one line feed, and nothing else.
func parsePublicKeyFile(b []byte) (*PublicKey, error) {
	text, ok := keyFileText(b, publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("envelope: %w: malformed public key file", errInvalidKey)
	}
	return ParsePublicKey(string(text))
}

// AppendSecretKeyFile appends the private key file form (the text form and
// one line feed) to dst. The result is secret, as for AppendSecretText.
func (k *PrivateKey) AppendSecretKeyFile(dst []byte) ([]byte, error) {
	dst, err := k.AppendSecretText(dst)
	if err != nil {
		return nil, err
	}
	return append(dst, '\n'), nil
}

// AppendSecretText appends the private key's text form to dst and returns
// the extended slice. The result is secret: write it only to sealed memory
// or sealed storage.
func (k *PrivateKey) AppendSecretText(dst []byte) ([]byte, error) {
	raw, err := k.sk.Bytes()
	if err != nil {
		return nil, fmt.Errorf("envelope: %w: cannot serialize private key", errInvalidKey)
	}
	defer clear(raw)
	dst = append(dst, PrivateKeyPrefix...)
	return b64u.AppendEncode(dst, raw), nil
}

// Public returns the public key.
func (k *PrivateKey) Public() *PublicKey { return k.pub }

// keyID returns the id of the public key.
func (k *PrivateKey) keyID() KeyID { return k.pub.id }

// String describes the key without its key material.
func (k *PrivateKey) String() string {
	if k == nil || k.pub == nil {
		return "envelope.PrivateKey(nil)"
	}
	return "envelope.PrivateKey(key id " + k.pub.id.String() + ")"
}

// GoString describes the key without its key material.
func (k *PrivateKey) GoString() string { return k.String() }

// Format prints String for every verb, so that no fmt verb (%x, %#v, %+v)
// can reach the key material.
func (k *PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }
