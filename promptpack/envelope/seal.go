package envelope

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// wrapInfo is the HPKE info for one recipient:
//
//	labelWrap || 0x00 || u8 len(pack_id) || pack_id || report_hash || key_id
func wrapInfo(ctx Context, id KeyID) []byte {
	b := make([]byte, 0, len(labelWrap)+1+1+len(ctx.PackID)+hashSize+keyIDSize)
	b = appendContext(b, labelWrap, ctx)
	return append(b, id[:]...)
}

// bodyAD is the body's AEAD associated data: the body label, a zero byte and
// the file's header bytes, from the magic to the end of the last stanza. It
// covers the format version, pack id, report hash and every recipient key id
// and wrapped key.
func bodyAD(header []byte) []byte {
	b := make([]byte, 0, len(labelBody)+1+len(header))
	b = append(b, labelBody...)
	b = append(b, 0)
	return append(b, header...)
}

func appendContext(b []byte, label string, ctx Context) []byte {
	b = append(b, label...)
	b = append(b, 0, byte(len(ctx.PackID)))
	b = append(b, ctx.PackID...)
	return append(b, ctx.ReportHash[:]...)
}

// wrapKey wraps dek to pk: the RFC 9180 single-shot SealBase output
// enc || ct with empty aad.
func wrapKey(pk hpke.PublicKey, info, dek []byte) ([]byte, error) {
	return hpke.Seal(pk, suiteKDF, suiteAEAD, info, dek)
}

// unwrapKey is the inverse of wrapKey.
func unwrapKey(sk hpke.PrivateKey, info, wrapped []byte) ([]byte, error) {
	return hpke.Open(sk, suiteKDF, suiteAEAD, info, wrapped)
}

func newGCM(dek []byte) (cipher.AEAD, error) {
	aead, _, err := newBodyCipher(dek)
	return aead, err
}

// newBodyCipher returns the body's AES-256-GCM and its AES block cipher
// (for the two-core path, pipeline.go).
func newBodyCipher(dek []byte) (cipher.AEAD, cipher.Block, error) {
	block, err := aes.NewCipher(dek)
	if err != nil {
		return nil, nil, err
	}
	aead, err := cipher.NewGCM(block)
	return aead, block, err
}

// Seal encrypts body for the recipients with the default limits.
func Seal(body []byte, ctx Context, recipients ...*PublicKey) (file []byte, m *Manifest, err error) {
	return Limits{}.seal(body, ctx, recipients...)
}

// seal encrypts body, bound to ctx, for one or more recipients (the attester
// and, optionally, a recovery key). It returns the envelope file and its
// manifest. The file is allocated once at its final size and the body is
// encrypted directly into it.
func (l Limits) seal(body []byte, ctx Context, recipients ...*PublicKey) (file []byte, m *Manifest, err error) {
	return l.appendSeal(nil, body, ctx, recipients...)
}

// appendSeal is Seal appending the envelope file to dst (which must not
// overlap body), so that a caller sealing many packs can reuse one buffer;
// the result aliases dst's storage when it has room.
func (l Limits) appendSeal(dst, body []byte, ctx Context, recipients ...*PublicKey) (file []byte, m *Manifest, err error) {
	maxBody, err := l.maxBody()
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.validate(); err != nil {
		return nil, nil, err
	}
	if int64(len(body)) > maxBody {
		return nil, nil, fmt.Errorf("envelope: %w: body is %d bytes, limit %d", ErrTooLarge, len(body), maxBody)
	}
	switch {
	case len(recipients) == 0:
		return nil, nil, fmt.Errorf("envelope: %w: no recipients", errInvalidRecipients)
	case len(recipients) > maxRecipients:
		return nil, nil, fmt.Errorf("envelope: %w: %d recipients, limit %d", errTooManyRecipients, len(recipients), maxRecipients)
	}
	ids := make([]KeyID, len(recipients))
	for i, r := range recipients {
		if r == nil || r.pk == nil {
			return nil, nil, fmt.Errorf("envelope: %w: recipient %d is nil", errInvalidRecipients, i)
		}
		ids[i] = r.id
		for _, p := range ids[:i] {
			if p == r.id {
				return nil, nil, fmt.Errorf("envelope: %w: recipient %s given twice", errDuplicateKeyID, r.id)
			}
		}
	}

	dek := make([]byte, dekSize)
	defer clear(dek)
	rand.Read(dek)

	h := &Header{PackID: ctx.PackID, ReportHash: ctx.ReportHash, Recipients: make([]recipientStanza, len(recipients))}
	for i, r := range recipients {
		w, err := wrapKey(r.pk, wrapInfo(ctx, r.id), dek)
		if err != nil {
			return nil, nil, fmt.Errorf("envelope: wrapping key for recipient %s: %w", r.id, err)
		}
		h.Recipients[i] = recipientStanza{KeyID: r.id, Wrapped: w}
	}
	rand.Read(h.Nonce[:])

	aead, block, err := newBodyCipher(dek)
	if err != nil {
		return nil, nil, fmt.Errorf("envelope: body cipher: %w", err)
	}
	size := h.headerLen() + nonceSize + 8 + len(body) + tagSize
	head, tail := sliceForAppend(dst, size)
	if anyOverlap(tail, body) {
		return nil, nil, fmt.Errorf("envelope: %w: dst overlaps body", errBufferOverlap)
	}
	out := h.appendHeader(tail[:0])
	ad := bodyAD(out)
	out = append(out, h.Nonce[:]...)
	out = binary.BigEndian.AppendUint64(out, uint64(len(body)+tagSize))
	if len(body) < pipelineMin {
		out = aead.Seal(out, h.Nonce[:], body, ad)
		h.Ciphertext = out[len(out)-len(body)-tagSize:]
		return head, newManifest(out, h, sha256.Sum256(out)), nil
	}
	prefix := out
	out = out[:len(out)+len(body)+tagSize]
	h.Ciphertext = out[len(prefix):]
	sum := sealPipelined(aead, block, h.Nonce[:], ad, prefix, body, h.Ciphertext)
	return head, newManifest(out, h, sum), nil
}

// sliceForAppend extends in by n bytes, reusing its capacity when it can,
// and returns the whole slice and the n-byte tail.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}

// Verify checks that m describes file and returns the parsed header, in the
// order of spec section 8.3 steps 1 to 5: the size limit; the manifest's own
// values (format, algorithms); the file's size and SHA-256, before any byte
// of it is interpreted; parsing; then the pack id, report hash and recipient
// key ids against the parsed header. It needs no key and decrypts nothing.
func (l Limits) Verify(file []byte, m *Manifest) (*Header, error) {
	if err := l.checkRaw(file, m); err != nil {
		return nil, err
	}
	if sha256.Sum256(file) != m.CiphertextHash {
		return nil, errHashDiffers
	}
	return l.checkParsed(file, m)
}

// errHashDiffers is the failure of spec section 8.3 step 3's hash.
var errHashDiffers = fmt.Errorf("envelope: %w: ciphertext hash differs", ErrManifestMismatch)

// checkRaw is spec section 8.3 steps 1 and 2 and the size half of step 3.
func (l Limits) checkRaw(file []byte, m *Manifest) error {
	maxBody, err := l.maxBody()
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("envelope: %w: no manifest", ErrManifestMismatch)
	}
	if int64(len(file)) > maxFileSize(maxBody) {
		return fmt.Errorf("envelope: %w: file is %d bytes, limit %d", ErrTooLarge, len(file), maxFileSize(maxBody))
	}
	if err := m.validate(); err != nil {
		return err
	}
	if m.CiphertextSize != int64(len(file)) {
		return fmt.Errorf("envelope: %w: file is %d bytes, manifest says %d", ErrManifestMismatch, len(file), m.CiphertextSize)
	}
	return nil
}

// checkParsed is spec section 8.3 steps 4 and 5.
func (l Limits) checkParsed(file []byte, m *Manifest) (*Header, error) {
	h, err := l.parse(file)
	if err != nil {
		return nil, err
	}
	if !h.context().equal(Context{PackID: m.PackID, ReportHash: m.ReportHash}) {
		return nil, fmt.Errorf("envelope: %w: pack id or report hash differs", ErrManifestMismatch)
	}
	if len(m.RecipientKeyIDs) != len(h.Recipients) {
		return nil, fmt.Errorf("envelope: %w: recipient count differs", ErrManifestMismatch)
	}
	for i, s := range h.Recipients {
		if m.RecipientKeyIDs[i] != s.KeyID {
			return nil, fmt.Errorf("envelope: %w: recipient key id %d differs", ErrManifestMismatch, i)
		}
	}
	return h, nil
}

// Open checks file against the manifest m (Verify) and against the expected
// context want, in the step order of spec section 8.3, unwraps the DEK addressed to key and decrypts the body into
// dst, which must hold at least PlaintextLen bytes and must not overlap file.
// It returns the plaintext length. The DEK is zeroed before returning, and on
// failure nothing of the plaintext is left in dst.
//
// A file of pipelineMin bytes or more is hashed (step 3) on another core
// while steps 4 to 9 run; their outcome is reported, and the plaintext
// kept, only once the hash matched, so the errors and the output are those
// of the steps run one after the other (spec section 8.3).
//
// Errors: ErrManifestMismatch, ErrMalformed (and its reasons), ErrTooLarge,
// ErrContextMismatch, ErrNoMatchingRecipient (the key is not a recipient),
// ErrAuthentication (tampered file or wrong context), errShortBuffer,
// errBufferOverlap, errInvalidKey, errInvalidContext, errInvalidLimits.
func (l Limits) Open(file []byte, m *Manifest, key *PrivateKey, want Context, dst []byte) (n int, err error) {
	if key == nil || key.sk == nil || key.pub == nil {
		return 0, fmt.Errorf("envelope: %w: nil private key", errInvalidKey)
	}
	if err := want.validate(); err != nil {
		return 0, err
	}
	if err := l.checkRaw(file, m); err != nil {
		return 0, err
	}
	if len(file) < pipelineMin {
		if sha256.Sum256(file) != m.CiphertextHash {
			return 0, errHashDiffers
		}
		return l.openChecked(file, m, key, want, dst)
	}
	sum := make(chan [hashSize]byte, 1)
	go func() { sum <- sha256.Sum256(file) }()
	n, err = l.openChecked(file, m, key, want, dst)
	if <-sum != m.CiphertextHash {
		if err == nil {
			clear(dst[:n])
		}
		return 0, errHashDiffers
	}
	return n, err
}

// openChecked is spec section 8.3 steps 4 to 9, for a file whose size and
// hash match the manifest (or are being checked beside it, Open).
func (l Limits) openChecked(file []byte, m *Manifest, key *PrivateKey, want Context, dst []byte) (n int, err error) {
	h, err := l.checkParsed(file, m)
	if err != nil {
		return 0, err
	}
	if !h.context().equal(want) {
		return 0, fmt.Errorf("envelope: %w: envelope is for pack %q, expected %q (or the report hash differs)", ErrContextMismatch, h.PackID, want.PackID)
	}
	var st *recipientStanza
	for i := range h.Recipients {
		if h.Recipients[i].KeyID == key.pub.id {
			st = &h.Recipients[i]
			break
		}
	}
	if st == nil {
		return 0, fmt.Errorf("envelope: %w: key id %s", ErrNoMatchingRecipient, key.pub.id)
	}
	n = h.PlaintextLen()
	if len(dst) < n {
		return 0, fmt.Errorf("envelope: %w: need %d bytes, have %d", errShortBuffer, n, len(dst))
	}
	out := dst[:n]
	if anyOverlap(out, file) {
		return 0, fmt.Errorf("envelope: %w", errBufferOverlap)
	}

	dek, err := unwrapKey(key.sk, wrapInfo(h.context(), st.KeyID), st.Wrapped)
	if err != nil {
		return 0, fmt.Errorf("envelope: %w: wrapped key for %s does not open", ErrAuthentication, st.KeyID)
	}
	defer clear(dek)
	if len(dek) != dekSize {
		return 0, fmt.Errorf("envelope: %w: wrapped key has the wrong size", ErrAuthentication)
	}
	aead, err := newGCM(dek)
	if err != nil {
		return 0, fmt.Errorf("envelope: body cipher: %w", err)
	}
	if _, err := aead.Open(out[:0], h.Nonce[:], h.Ciphertext, bodyAD(file[:h.headerLen()])); err != nil {
		clear(out)
		return 0, fmt.Errorf("envelope: %w: body does not open", ErrAuthentication)
	}
	return n, nil
}

// anyOverlap reports whether x and y share memory.
func anyOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	xs := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	ys := uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	return xs <= ys+uintptr(len(y)-1) && ys <= xs+uintptr(len(x)-1)
}
