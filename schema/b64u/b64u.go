// Package b64u implements the "b64u" encoding used by every PoH and clawea
// document: base64url (RFC 4648 section 5) without padding.
//
// Decoding is strict: padding, characters outside the URL-safe alphabet,
// whitespace (including the CR and LF that encoding/base64 silently skips),
// impossible lengths and non-zero trailing bits are all refused, so every
// accepted string has exactly one byte sequence and re-encodes to itself.
package b64u

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

var enc = base64.RawURLEncoding.Strict()

// errMalformed is returned (wrapped) for any string that is not canonical b64u.
var errMalformed = errors.New("b64u: malformed")

// Encode returns the b64u encoding of b.
func Encode(b []byte) string { return enc.EncodeToString(b) }

// AppendEncode appends the b64u encoding of b to dst and returns the
// extended slice; it does not allocate when dst has room.
func AppendEncode(dst, b []byte) []byte { return enc.AppendEncode(dst, b) }

// EncodedLen returns the length of the b64u encoding of n bytes.
func EncodedLen(n int) int { return enc.EncodedLen(n) }

// SHA256 returns b64u(SHA-256(b)), the 43-character hash form used everywhere.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return Encode(sum[:])
}

// alphabet marks the 64 bytes of the base64url alphabet; a table because
// Decode scans every byte of every evidence blob (a constant, not state).
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var alphabetSet = func() (t [256]bool) {
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = true
	}
	return t
}()

func inAlphabet(c byte) bool { return alphabetSet[c] }

// Decode decodes canonical b64u, given as a string or as bytes (decoded in
// place, without a string copy of them).
func Decode[T string | []byte](s T) ([]byte, error) {
	if b, ok := decodeFast(s); ok {
		return b, nil
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !inAlphabet(c) {
			if c == '=' {
				return nil, fmt.Errorf("%w: padding at offset %d", errMalformed, i)
			}
			return nil, fmt.Errorf("%w: byte 0x%02x at offset %d is outside the base64url alphabet", errMalformed, c, i)
		}
	}
	if len(s)%4 == 1 {
		return nil, fmt.Errorf("%w: impossible length %d", errMalformed, len(s))
	}
	// With the alphabet and length checked, the only failure left is
	// non-zero trailing bits.
	return nil, fmt.Errorf("%w: non-canonical trailing bits", errMalformed)
}

// decodeFast is encoding/base64's strict decoding of s when s has no CR or
// LF. encoding/base64 refuses every byte outside the alphabet but CR and LF
// (which it skips), impossible lengths and, strict, non-zero trailing bits;
// so without CR and LF (found by IndexByte, much faster than Decode's scan),
// its success is our success. A failure goes Decode's slow way for a
// precise error.
func decodeFast[T string | []byte](s T) ([]byte, bool) {
	switch v := any(s).(type) {
	case string:
		if strings.IndexByte(v, '\n') < 0 && strings.IndexByte(v, '\r') < 0 {
			b, err := enc.DecodeString(v)
			return b, err == nil
		}
	case []byte:
		if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
			b := make([]byte, enc.DecodedLen(len(v)))
			n, err := enc.Decode(b, v)
			return b[:n], err == nil
		}
	}
	return nil, false
}

// DecodeTo decodes the canonical b64u src of exactly len(dst) bytes into
// dst without allocating, for secrets that must stay in the caller's
// buffer. Its errors never quote src. On error dst is zeroed.
func DecodeTo(dst, src []byte) error {
	// encoding/base64 skips CR and LF; the length check refuses padding
	// and any other length, and the strict decoder the rest.
	bad := len(src) != enc.EncodedLen(len(dst)) || bytes.IndexByte(src, '\n') >= 0 || bytes.IndexByte(src, '\r') >= 0
	if !bad {
		n, err := enc.Decode(dst, src)
		bad = err != nil || n != len(dst)
	}
	if bad {
		clear(dst)
		return fmt.Errorf("%w: not %d bytes in canonical form", errMalformed, len(dst))
	}
	return nil
}

// hashLast holds the characters that may end a b64u SHA-256 digest: 256
// bits are 42 characters and 4 bits, so the last character's two low bits
// are zero.
const hashLast = "AEIMQUYcgkosw048"

// ValidHash reports whether DecodeHash accepts s, without allocating: 43
// characters of the alphabet, the last one from hashLast.
func ValidHash(s string) bool {
	if len(s) != 43 || strings.IndexByte(hashLast, s[42]) < 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !inAlphabet(s[i]) {
			return false
		}
	}
	return true
}

// DecodeHash decodes a b64u SHA-256 digest: exactly 43 characters, 32 bytes.
func DecodeHash(s string) ([32]byte, error) {
	var out [32]byte
	if len(s) != 43 {
		return out, fmt.Errorf("%w: hash is %d characters, want 43", errMalformed, len(s))
	}
	b, err := Decode(s)
	if err != nil {
		return out, err
	}
	copy(out[:], b)
	return out, nil
}
