package sealed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/charclass"
)

// Blob format v1 (docs/spec/sealed-memory.md, "Sealed blob"):
//
//	version label  30 bytes  "clawea.dev/attester/sealed/v1\n"
//	kind length     1 byte   k, 1..maxKindLen
//	kind            k bytes  the sealer kind
//	nonce          12 bytes  random AES-GCM nonce
//	ciphertext     n+16      AES-256-GCM(secret) || tag, 1 <= n <= maxSecretSize
//
// The AEAD associated data is the header (version label, kind length, kind)
// followed by u16be(len(label)) || label.
const (
	blobVersionLabel = "clawea.dev/attester/sealed/v1\n"
	nonceSize        = 12
	tagSize          = 16
)

// Limits on sealed inputs.
const (
	// maxSecretSize bounds a sealed secret (keys and DEKs are far smaller).
	maxSecretSize = 64 << 10
	// maxLabelLen bounds a seal label.
	maxLabelLen = 255
	// maxKindLen bounds a sealer kind.
	maxKindLen = 64
	// MaxBlobSize bounds a sealed blob.
	MaxBlobSize = len(blobVersionLabel) + 1 + maxKindLen + nonceSize + maxSecretSize + tagSize
)

var (
	// errMalformedBlob is the class of blob parse errors.
	errMalformedBlob = errors.New("sealed: malformed blob")
	// errUnknownVersion is returned for a blob with a version label this
	// package does not know (or no version label at all).
	errUnknownVersion = fmt.Errorf("%w: unknown version", errMalformedBlob)
	// errTruncated is returned for a blob that ends early.
	errTruncated = fmt.Errorf("%w: truncated", errMalformedBlob)
	// errKindMismatch is returned when a blob was sealed by another kind of
	// sealer (for example a development blob given to a platform sealer).
	errKindMismatch = errors.New("sealed: blob was sealed by a different sealer kind")
	// errAuthFailed is returned when a blob does not authenticate: wrong
	// label, wrong key or platform, or tampered bytes.
	errAuthFailed = errors.New("sealed: blob authentication failed")
	// errInvalidLabel is returned for an empty, oversized or non-printable
	// label.
	errInvalidLabel = errors.New("sealed: invalid label")
	// errInvalidKind is returned for an empty, oversized or ill-formed kind.
	errInvalidKind = errors.New("sealed: invalid sealer kind")
)

// blob is a parsed v1 sealed blob. Its slices alias the parsed input.
type blob struct {
	kind       string
	nonce      []byte
	ciphertext []byte
}

// validKind reports whether k is 1..maxKindLen bytes of [a-z0-9._:/-].
func validKind(k string) bool {
	return len(k) != 0 && len(k) <= maxKindLen && kindChars.All(k)
}

// validLabel reports whether l is 1..maxLabelLen bytes of printable ASCII
// without spaces (0x21..0x7e).
func validLabel(l string) bool {
	return len(l) != 0 && len(l) <= maxLabelLen && labelChars.All(l)
}

var (
	kindChars  = charclass.Lower().Or(charclass.Digit(), charclass.Of("._:/-"))
	labelChars = charclass.Range(0x21, 0x7e)
)

// appendHeader appends the blob header for kind.
func appendHeader(dst []byte, kind string) []byte {
	dst = append(dst, blobVersionLabel...)
	dst = append(dst, byte(len(kind)))
	return append(dst, kind...)
}

// associatedData is the AEAD associated data for kind and label.
func associatedData(kind, label string) []byte {
	ad := appendHeader(make([]byte, 0, len(blobVersionLabel)+1+len(kind)+2+len(label)), kind)
	ad = binary.BigEndian.AppendUint16(ad, uint16(len(label)))
	return append(ad, label...)
}

// parseBlob parses a v1 blob strictly. On error it returns the zero blob.
func parseBlob(b []byte) (blob, error) {
	if len(b) > MaxBlobSize {
		return blob{}, fmt.Errorf("%w: %d bytes, limit %d", errMalformedBlob, len(b), MaxBlobSize)
	}
	if len(b) < len(blobVersionLabel) {
		if bytes.HasPrefix([]byte(blobVersionLabel), b) {
			return blob{}, errTruncated
		}
		return blob{}, errUnknownVersion
	}
	if string(b[:len(blobVersionLabel)]) != blobVersionLabel {
		return blob{}, errUnknownVersion
	}
	rest := b[len(blobVersionLabel):]
	if len(rest) < 1 {
		return blob{}, errTruncated
	}
	k := int(rest[0])
	rest = rest[1:]
	if k == 0 || k > maxKindLen {
		return blob{}, fmt.Errorf("%w: kind length %d", errMalformedBlob, k)
	}
	if len(rest) < k {
		return blob{}, errTruncated
	}
	kind := string(rest[:k])
	if !validKind(kind) {
		return blob{}, fmt.Errorf("%w: ill-formed kind", errMalformedBlob)
	}
	rest = rest[k:]
	if len(rest) < nonceSize+tagSize+1 {
		return blob{}, errTruncated
	}
	return blob{kind: kind, nonce: rest[:nonceSize], ciphertext: rest[nonceSize:]}, nil
}

// encode returns the wire form of bl.
func (bl blob) encode() []byte {
	out := appendHeader(make([]byte, 0, len(blobVersionLabel)+1+len(bl.kind)+len(bl.nonce)+len(bl.ciphertext)), bl.kind)
	out = append(out, bl.nonce...)
	return append(out, bl.ciphertext...)
}
