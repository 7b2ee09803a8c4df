package envelope

import (
	"bytes"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"
)

// TestSuiteAndBindingAttack: a sender who holds the attester's public key
// and the DEK writes a file that parses as v1 but wraps the DEK with
// another HPKE suite (KDF or AEAD: the wrapped key keeps its 80 bytes), or
// with an HPKE info or body associated data that leaves out part of the
// binding (the key id, the format version, the label), or wraps it to
// another key under the attester's key id. There is no
// negotiation (section 3): each is refused as an authentication failure,
// and no plaintext is released. The same construction with the spec's
// suite and bindings opens, so the test can tell.
func TestSuiteAndBindingAttack(t *testing.T) {
	k, other := mustKey(t), mustKey(t)
	ctx := testContext("pack-suite")
	body := []byte("a small secret prompt pack body")
	goodInfo := wrapInfo(ctx, k.pub.id)
	cases := []struct {
		name string
		kdf  hpke.KDF
		aead hpke.AEAD
		info []byte
		ad   func(header []byte) []byte
		want error      // nil: opens
		to   *PublicKey // the key the DEK is wrapped to; nil: the attester's
	}{
		{"spec suite and bindings", suiteKDF, suiteAEAD, goodInfo, bodyAD, nil, nil},
		{"KDF HKDF-SHA512", hpke.HKDFSHA512(), suiteAEAD, goodInfo, bodyAD, ErrAuthentication, nil},
		{"KDF HKDF-SHA384", hpke.HKDFSHA384(), suiteAEAD, goodInfo, bodyAD, ErrAuthentication, nil},
		{"AEAD AES-128-GCM", suiteKDF, hpke.AES128GCM(), goodInfo, bodyAD, ErrAuthentication, nil},
		{"AEAD ChaCha20-Poly1305", suiteKDF, hpke.ChaCha20Poly1305(), goodInfo, bodyAD, ErrAuthentication, nil},
		{"info without the key id", suiteKDF, suiteAEAD, goodInfo[:len(goodInfo)-keyIDSize], bodyAD, ErrAuthentication, nil},
		{"info of another version", suiteKDF, suiteAEAD, bytes.Replace(goodInfo, []byte("/v1/"), []byte("/v2/"), 1), bodyAD, ErrAuthentication, nil},
		{"empty info", suiteKDF, suiteAEAD, nil, bodyAD, ErrAuthentication, nil},
		{"body AD without its label", suiteKDF, suiteAEAD, goodInfo, func(h []byte) []byte { return bytes.Clone(h) }, ErrAuthentication, nil},
		{"body AD without the magic", suiteKDF, suiteAEAD, goodInfo, func(h []byte) []byte { return bodyAD(h[len(magic):]) }, ErrAuthentication, nil},
		{"empty body AD", suiteKDF, suiteAEAD, goodInfo, func([]byte) []byte { return nil }, ErrAuthentication, nil},
		// The attester's key id on a key wrapped to another key.
		{"wrapped to another key", suiteKDF, suiteAEAD, goodInfo, bodyAD, ErrAuthentication, other.Public()},
	}
	for _, tc := range cases {
		dek := make([]byte, dekSize)
		rand.Read(dek)
		to := k.Public()
		if tc.to != nil {
			to = tc.to
		}
		wrapped, err := hpke.Seal(to.pk, tc.kdf, tc.aead, tc.info, dek)
		if err != nil || len(wrapped) != wrappedSize {
			t.Fatalf("%s: wrap: %v (%d bytes)", tc.name, err, len(wrapped))
		}
		h := &Header{PackID: ctx.PackID, ReportHash: ctx.ReportHash, Recipients: []recipientStanza{{KeyID: k.pub.id, Wrapped: wrapped}}}
		rand.Read(h.Nonce[:])
		file := h.appendHeader(nil)
		ad := tc.ad(file)
		file = append(file, h.Nonce[:]...)
		file = binary.BigEndian.AppendUint64(file, uint64(len(body)+tagSize))
		aead, err := newGCM(dek)
		if err != nil {
			t.Fatal(err)
		}
		file = aead.Seal(file, h.Nonce[:], body, ad)
		h.Ciphertext = file[len(file)-len(body)-tagSize:]
		m := newManifest(file, h, sha256.Sum256(file))

		dst := make([]byte, len(body))
		n, err := openDefault(file, m, k, ctx, dst)
		if tc.want == nil {
			if err != nil || !bytes.Equal(dst[:n], body) {
				t.Fatalf("%s: the control does not open: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.Equal(dst, make([]byte, len(dst))) {
			t.Errorf("%s: plaintext left in dst", tc.name)
		}
	}
}
