package envelope

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// File layout (all integers big-endian):
//
//	magic          "clawea.dev/promptpack/v1\n"
//	header_len     uint32, bytes from pack_id_len to the end of the last stanza
//	pack_id_len    uint8, 1..maxPackIDLen
//	pack_id        pack_id_len bytes
//	report_hash    32 bytes
//	n_recipients   uint8, 1..maxRecipients
//	n x stanza:    key_id (32) || wrapped_len uint16 (= 80) || wrapped (enc || ct)
//	nonce          12 bytes
//	ct_len         uint64, 16..MaxBodySize+16
//	ct             ct_len bytes, AES-256-GCM ciphertext || tag
const (
	stanzaSize      = keyIDSize + 2 + wrappedSize
	maxHeaderFields = 1 + maxPackIDLen + hashSize + 1 + maxRecipients*stanzaSize
	maxHeaderSize   = len(magic) + 4 + maxHeaderFields
)

// recipientStanza is one recipient's wrapped DEK.
type recipientStanza struct {
	KeyID KeyID
	// Wrapped is the RFC 9180 single-shot output enc || ct (80 bytes).
	Wrapped []byte
}

// Header is a parsed envelope file. Parse returns only values that re-encode
// to the exact bytes parsed. Slices alias the parsed input.
type Header struct {
	PackID     string
	ReportHash [hashSize]byte
	Recipients []recipientStanza
	Nonce      [nonceSize]byte
	// Ciphertext is the body's AES-256-GCM ciphertext including the tag.
	Ciphertext []byte
}

// context returns the context the header names.
func (h *Header) context() Context { return Context{PackID: h.PackID, ReportHash: h.ReportHash} }

// keyIDs returns the recipient key ids in file order.
func (h *Header) keyIDs() []KeyID {
	ids := make([]KeyID, len(h.Recipients))
	for i, s := range h.Recipients {
		ids[i] = s.KeyID
	}
	return ids
}

// PlaintextLen returns the size of the body plaintext.
func (h *Header) PlaintextLen() int { return len(h.Ciphertext) - tagSize }

func (h *Header) headerFieldsLen() int {
	return 1 + len(h.PackID) + hashSize + 1 + len(h.Recipients)*stanzaSize
}

// headerLen returns the size of the header bytes, magic to last stanza.
func (h *Header) headerLen() int { return len(magic) + 4 + h.headerFieldsLen() }

// encodedLen returns the file size of h.
func (h *Header) encodedLen() int {
	return h.headerLen() + nonceSize + 8 + len(h.Ciphertext)
}

// validate checks everything Parse checks, for values built in memory.
func (h *Header) validate(maxBody int64) error {
	if !validPackID(h.PackID) {
		return &parseError{Field: "pack_id", Err: errBadLength}
	}
	if len(h.Recipients) == 0 {
		return &parseError{Field: "n_recipients", Err: errBadLength}
	}
	if len(h.Recipients) > maxRecipients {
		return &parseError{Field: "n_recipients", Err: errTooManyRecipients}
	}
	for i, s := range h.Recipients {
		if len(s.Wrapped) != wrappedSize {
			return &parseError{Field: "wrapped_len", Err: errBadLength}
		}
		for _, p := range h.Recipients[:i] {
			if p.KeyID == s.KeyID {
				return &parseError{Field: "key_id", Err: errDuplicateKeyID}
			}
		}
	}
	if len(h.Ciphertext) < tagSize || int64(len(h.Ciphertext)-tagSize) > maxBody {
		return &parseError{Field: "ct_len", Err: errBadLength}
	}
	return nil
}

// appendHeader appends everything up to and excluding the nonce.
func (h *Header) appendHeader(b []byte) []byte {
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint32(b, uint32(h.headerFieldsLen()))
	b = append(b, byte(len(h.PackID)))
	b = append(b, h.PackID...)
	b = append(b, h.ReportHash[:]...)
	b = append(b, byte(len(h.Recipients)))
	for _, s := range h.Recipients {
		b = append(b, s.KeyID[:]...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(s.Wrapped)))
		b = append(b, s.Wrapped...)
	}
	return b
}

// MarshalBinary encodes the complete envelope file. It fails with a
// *parseError for any value Parse would reject.
func (h *Header) MarshalBinary() ([]byte, error) {
	if err := h.validate(defaultMaxBodySize); err != nil {
		return nil, err
	}
	b := make([]byte, 0, h.encodedLen())
	b = h.appendHeader(b)
	b = append(b, h.Nonce[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(h.Ciphertext)))
	return append(b, h.Ciphertext...), nil
}

// parse parses an envelope file with the default limits.
func parse(file []byte) (*Header, error) { return Limits{}.parse(file) }

// Describe parses an envelope file with the default limits and returns
// its manifest (what the sealer writes beside it: the file's pack id,
// report hash, size, hash and recipient key ids) and the length of the
// plaintext it holds. It decrypts nothing: it is for inspecting a file,
// and proves nothing about who made it.
func Describe(file []byte) (m *Manifest, plaintextLen int, err error) {
	h, err := parse(file)
	if err != nil {
		return nil, 0, err
	}
	return newManifest(file, h, sha256.Sum256(file)), h.PlaintextLen(), nil
}

// plaintextLen returns the body plaintext size of an envelope file, so that
// a caller can allocate (sealed) memory before Open.
func plaintextLen(file []byte) (int, error) {
	h, err := parse(file)
	if err != nil {
		return 0, err
	}
	return h.PlaintextLen(), nil
}

// parse parses an envelope file strictly. Errors are *parseError values
// (matching ErrMalformed) or match ErrTooLarge or errInvalidLimits.
func (l Limits) parse(file []byte) (*Header, error) {
	maxBody, err := l.maxBody()
	if err != nil {
		return nil, err
	}
	if int64(len(file)) > maxFileSize(maxBody) {
		return nil, fmt.Errorf("envelope: %w: file is %d bytes, limit %d (body limit %d)", ErrTooLarge, len(file), maxFileSize(maxBody), maxBody)
	}
	r := reader{b: file}
	if m := r.take(len(magic)); m == nil || string(m) != magic {
		return nil, &parseError{Offset: 0, Field: "magic", Err: errUnknownVersion}
	}
	hl, ok := r.uint32()
	if !ok {
		return nil, r.fail("header_len", errBadLength)
	}
	if hl > maxHeaderFields || int(hl) > r.remaining() {
		return nil, &parseError{Offset: len(magic), Field: "header_len", Err: errBadLength}
	}
	hdrEnd := r.off + int(hl)

	h := &Header{}
	pl, ok := r.uint8()
	if !ok {
		return nil, r.fail("pack_id_len", errBadLength)
	}
	pid := r.take(int(pl))
	if pid == nil || !validPackID(string(pid)) {
		return nil, r.fail("pack_id", errBadLength)
	}
	h.PackID = string(pid)
	rh := r.take(hashSize)
	if rh == nil {
		return nil, r.fail("report_hash", errBadLength)
	}
	copy(h.ReportHash[:], rh)
	n, ok := r.uint8()
	if !ok || n == 0 {
		return nil, r.fail("n_recipients", errBadLength)
	}
	if n > maxRecipients {
		return nil, r.fail("n_recipients", errTooManyRecipients)
	}
	h.Recipients = make([]recipientStanza, 0, n)
	for range n {
		kid := r.take(keyIDSize)
		if kid == nil {
			return nil, r.fail("key_id", errBadLength)
		}
		var s recipientStanza
		copy(s.KeyID[:], kid)
		for _, p := range h.Recipients {
			if p.KeyID == s.KeyID {
				return nil, r.fail("key_id", errDuplicateKeyID)
			}
		}
		wl, ok := r.uint16()
		if !ok || wl != wrappedSize {
			return nil, r.fail("wrapped_len", errBadLength)
		}
		if s.Wrapped = r.take(int(wl)); s.Wrapped == nil {
			return nil, r.fail("wrapped", errBadLength)
		}
		h.Recipients = append(h.Recipients, s)
	}
	if r.off != hdrEnd {
		return nil, &parseError{Offset: len(magic), Field: "header_len", Err: errBadLength}
	}

	nonce := r.take(nonceSize)
	if nonce == nil {
		return nil, r.fail("nonce", errBadLength)
	}
	copy(h.Nonce[:], nonce)
	cl, ok := r.uint64()
	if !ok || cl < tagSize || cl-tagSize > uint64(maxBody) {
		return nil, r.fail("ct_len", errBadLength)
	}
	if cl > uint64(r.remaining()) {
		return nil, &parseError{Offset: r.off, Field: "ct", Err: errBadLength}
	}
	h.Ciphertext = r.take(int(cl))
	if r.remaining() != 0 {
		return nil, &parseError{Offset: r.off, Field: "ct", Err: errTrailingData}
	}
	return h, nil
}

// reader consumes b front to back; take returns nil when short.
type reader struct {
	b    []byte
	off  int
	last int // offset of the field read last, reported by fail
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) take(n int) []byte {
	r.last = r.off
	if n < 0 || n > r.remaining() {
		return nil
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s
}

func (r *reader) fail(field string, err error) error {
	return &parseError{Offset: r.last, Field: field, Err: err}
}

func (r *reader) uint8() (uint8, bool) {
	b := r.take(1)
	if b == nil {
		return 0, false
	}
	return b[0], true
}

func (r *reader) uint16() (uint16, bool) {
	b := r.take(2)
	if b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint16(b), true
}

func (r *reader) uint32() (uint32, bool) {
	b := r.take(4)
	if b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

func (r *reader) uint64() (uint64, bool) {
	b := r.take(8)
	if b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}
