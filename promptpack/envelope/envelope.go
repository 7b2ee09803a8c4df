// Package envelope implements the prompt-pack envelope, format v1: the binary
// file prompt_pack.enc and its hash-only manifest prompt_pack_manifest.json.
//
// The pack body is encrypted once with AES-256-GCM under a random 32-byte data
// encryption key (DEK). The DEK is wrapped for each recipient with HPKE
// (RFC 9180) base mode, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 /
// AES-256-GCM, in the single-shot wire form enc || ct, so that any RFC 9180
// implementation can open it. The format version, pack id, report hash and
// recipient key id(s) are bound into both the HPKE info and the body's AEAD
// associated data, so a wrapped key or a body moved into another pack fails
// to open.
//
// The normative specification is docs/spec/promptpack-envelope-v1.md.
//
// The envelope provides confidentiality and context binding. It does not
// authenticate the sender: anyone holding a recipient's public key can make an
// envelope for it. Authenticity of the contents comes from the report hash
// check the attester performs after opening.
package envelope

import (
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/charclass"
)

// Format identifiers and domain-separation labels. Each label is used for
// exactly one purpose.
const (
	// FormatVersion names the format. It appears, followed by a line feed, in
	// the first bytes of every envelope file and in the manifest.
	FormatVersion = "clawea.dev/promptpack/v1"

	labelBody  = FormatVersion + "/body"  // body AEAD associated data
	labelWrap  = FormatVersion + "/wrap"  // HPKE info of each wrapped DEK
	labelKeyID = FormatVersion + "/keyid" // recipient key id

	magic = FormatVersion + "\n"
)

// Limits of format v1.
const (
	// maxRecipients is the largest number of recipient stanzas in a file.
	maxRecipients = 16
	// maxPackIDLen is the longest pack id, in bytes.
	maxPackIDLen = 128
	// defaultMaxBodySize is the default and largest accepted plaintext size.
	defaultMaxBodySize = 64 << 20
	// maxManifestSize is the largest accepted manifest, in bytes.
	maxManifestSize = 16 << 10
)

// Sizes of the fixed-length fields.
const (
	dekSize     = 32
	hashSize    = 32
	keyIDSize   = 32
	nonceSize   = 12
	tagSize     = 16
	encSize     = 32                     // X25519 public key
	wrappedSize = encSize + dekSize + 16 // enc || AES-256-GCM(DEK)
)

var (
	// ErrMalformed means the envelope file or manifest does not follow the
	// format. Parse errors of the binary file are *parseError values that
	// also match a more specific sentinel below.
	ErrMalformed = errors.New("malformed envelope")
	// errUnknownVersion means the file or manifest names a format version
	// other than FormatVersion.
	errUnknownVersion = errors.New("unknown envelope version")
	// errTrailingData means bytes follow the end of the body ciphertext.
	errTrailingData = errors.New("trailing data")
	// errBadLength means a length field is out of range or exceeds the input.
	errBadLength = errors.New("bad length")
	// errDuplicateKeyID means two recipient stanzas carry the same key id.
	errDuplicateKeyID = errors.New("duplicate recipient key id")
	// errTooManyRecipients means more than maxRecipients recipients.
	errTooManyRecipients = errors.New("too many recipients")
	// errUnknownAlgorithm means the manifest names an algorithm other than
	// the ones format v1 fixes.
	errUnknownAlgorithm = errors.New("unknown algorithm")
	// ErrTooLarge means an input exceeds a size limit.
	ErrTooLarge = errors.New("input too large")

	// ErrManifestMismatch means the manifest does not describe the file
	// (size, hash, pack id, report hash or recipient key ids differ).
	ErrManifestMismatch = errors.New("manifest does not match envelope")
	// ErrContextMismatch means the file's pack id or report hash is not the
	// one the caller expects.
	ErrContextMismatch = errors.New("envelope context mismatch")
	// ErrNoMatchingRecipient means no stanza is addressed to the key.
	ErrNoMatchingRecipient = errors.New("no recipient stanza matches the key")
	// ErrAuthentication means a wrapped key or the body failed to
	// authenticate: the file was tampered with or bound to another context.
	ErrAuthentication = errors.New("envelope authentication failed")

	// errInvalidKey means a key or key encoding is not acceptable.
	errInvalidKey = errors.New("invalid key")
	// errInvalidContext means a Context is not acceptable (bad pack id).
	errInvalidContext = errors.New("invalid envelope context")
	// errInvalidRecipients means the recipient list given to Seal is empty or
	// contains a nil key.
	errInvalidRecipients = errors.New("invalid recipients")
	// errInvalidLimits means a Limits value is out of range.
	errInvalidLimits = errors.New("invalid limits")
	// errShortBuffer means the destination is smaller than PlaintextLen.
	errShortBuffer = errors.New("destination buffer too small")
	// errBufferOverlap means the destination overlaps the envelope bytes.
	errBufferOverlap = errors.New("destination buffer overlaps input")
)

// parseError reports where and why an envelope file was rejected. It matches
// ErrMalformed and its Err (one of the sentinels above) with errors.Is.
type parseError struct {
	Offset int    // byte offset of the offending field
	Field  string // name of the offending field
	Err    error  // a sentinel: errUnknownVersion, errBadLength, ...
}

func (e *parseError) Error() string {
	return fmt.Sprintf("envelope: malformed file at offset %d (%s): %v", e.Offset, e.Field, e.Err)
}

// Unwrap returns ErrMalformed and the specific reason.
func (e *parseError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// Context is what an envelope is bound to. The attester opens an envelope
// only for the context it expects.
type Context struct {
	// PackID identifies the pack: 1 to maxPackIDLen bytes of
	// A-Z a-z 0-9 '-' '.' '_' ':'.
	PackID string
	// ReportHash is the SHA-256 of the SystemPromptReport (JCS) committed
	// for this pack.
	ReportHash [hashSize]byte
}

func (c Context) validate() error {
	if !validPackID(c.PackID) {
		return fmt.Errorf("envelope: %w: pack id must be 1 to %d bytes of [A-Za-z0-9._:-]", errInvalidContext, maxPackIDLen)
	}
	return nil
}

func (c Context) equal(o Context) bool {
	return c.PackID == o.PackID && subtle.ConstantTimeCompare(c.ReportHash[:], o.ReportHash[:]) == 1
}

func validPackID(s string) bool {
	return len(s) >= 1 && len(s) <= maxPackIDLen && packIDChars.All(s)
}

var packIDChars = charclass.Alnum().Or(charclass.Of("-._:"))

// Limits bounds the inputs Seal, Parse, Verify and Open accept. The zero value
// applies the defaults; limits may only be lowered.
type Limits struct {
	// MaxBodySize is the largest plaintext, in bytes. Zero means
	// defaultMaxBodySize; negative values and values above the default are
	// rejected with errInvalidLimits.
	MaxBodySize int64
}

func (l Limits) maxBody() (int64, error) {
	switch {
	case l.MaxBodySize == 0:
		return defaultMaxBodySize, nil
	case l.MaxBodySize < 0 || l.MaxBodySize > defaultMaxBodySize:
		return 0, fmt.Errorf("envelope: %w: MaxBodySize must be between 1 and %d", errInvalidLimits, defaultMaxBodySize)
	}
	return l.MaxBodySize, nil
}

// maxFileSize is the largest file accepted for a body limit.
func maxFileSize(maxBody int64) int64 {
	return int64(maxHeaderSize) + nonceSize + 8 + maxBody + tagSize
}
