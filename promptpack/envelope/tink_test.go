package envelope

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/tink-crypto/tink-go/v2/hybrid"
	tinkhpke "github.com/tink-crypto/tink-go/v2/hybrid/hpke"
	"github.com/tink-crypto/tink-go/v2/insecuresecretdataaccess"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/secretdata"
)

// tinkParams is our suite in tink, with the NO_PREFIX ("RAW") output variant:
// tink's ciphertext is then exactly the RFC 9180 enc || ct.
func tinkParams(t *testing.T) *tinkhpke.Parameters {
	t.Helper()
	p, err := tinkhpke.NewParameters(tinkhpke.ParametersOpts{
		KEMID:   tinkhpke.DHKEM_X25519_HKDF_SHA256,
		KDFID:   tinkhpke.HKDFSHA256,
		AEADID:  tinkhpke.AES256GCM,
		Variant: tinkhpke.VariantNoPrefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tinkHandle(t *testing.T, k interface{}) *keyset.Handle {
	t.Helper()
	km := keyset.NewManager()
	var id uint32
	var err error
	switch k := k.(type) {
	case *tinkhpke.PublicKey:
		id, err = km.AddKey(k)
	case *tinkhpke.PrivateKey:
		id, err = km.AddKey(k)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := km.SetPrimary(id); err != nil {
		t.Fatal(err)
	}
	h, err := km.Handle()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTinkInterop: a wrap made by crypto/hpke (wrapKey) opens with tink's
// HPKE, and a tink HPKE ciphertext opens with unwrapKey, for our info; whole
// envelopes whose wrapped keys tink made open with Open.
func TestTinkInterop(t *testing.T) {
	ours := mustKey(t)
	ctx := testContext("pack-tink")
	info := wrapInfo(ctx, ours.keyID())
	dek := bytes.Repeat([]byte{7}, dekSize)

	// Our private key as a tink key.
	tinkPub, err := tinkhpke.NewPublicKey(ours.Public().Bytes(), 0, tinkParams(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ours.sk.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	tinkPriv, err := tinkhpke.NewPrivateKeyFromPublicKey(secretdata.NewBytesFromData(raw, insecuresecretdataaccess.Token{}), tinkPub)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := hybrid.NewHybridDecrypt(tinkHandle(t, tinkPriv))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := hybrid.NewHybridEncrypt(tinkHandle(t, tinkPub))
	if err != nil {
		t.Fatal(err)
	}

	// crypto/hpke -> tink.
	w, err := wrapKey(ours.Public().pk, info, dek)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dec.Decrypt(w, info)
	if err != nil || !bytes.Equal(got, dek) {
		t.Fatalf("tink cannot open a crypto/hpke wrap: %v", err)
	}
	if _, err := dec.Decrypt(w, wrapInfo(testContext("other"), ours.keyID())); err == nil {
		t.Fatal("tink opened under another context")
	}

	// tink -> crypto/hpke.
	tw, err := enc.Encrypt(dek, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(tw) != wrappedSize {
		t.Fatalf("tink wrap is %d bytes, want %d", len(tw), wrappedSize)
	}
	got, err = unwrapKey(ours.sk, info, tw)
	if err != nil || !bytes.Equal(got, dek) {
		t.Fatalf("crypto/hpke cannot open a tink wrap: %v", err)
	}

	// A whole envelope whose stanza tink wrapped (a sealer in another
	// language does the same): the tink stanza replaces ours, and the body is
	// re-sealed under the new header by the test with the known DEK.
	file, _ := mustSeal(t, []byte("pack body"), ctx, ours.Public())
	h, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	h.Recipients[0].Wrapped = tw
	hdr := h.appendHeader(nil)
	gcm, err := newGCM(dek)
	if err != nil {
		t.Fatal(err)
	}
	h.Ciphertext = gcm.Seal(nil, h.Nonce[:], []byte("pack body"), bodyAD(hdr))
	f2, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 9)
	if _, err := openDefault(f2, newManifest(f2, h, sha256.Sum256(f2)), ours, ctx, dst); err != nil || string(dst) != "pack body" {
		t.Fatalf("envelope with a tink-made stanza: %v", err)
	}

	// A tink-generated key (RAW template) as the recipient of Seal.
	kh, err := keyset.NewHandle(hybrid.DHKEM_X25519_HKDF_SHA256_HKDF_SHA256_AES_256_GCM_Raw_Key_Template())
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kh.Primary()
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := entry.Key().(*tinkhpke.PrivateKey)
	if !ok {
		t.Fatalf("tink key is %T", entry.Key())
	}
	pk, err := tk.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := newPublicKey(pk.(*tinkhpke.PublicKey).PublicKeyBytes())
	if err != nil {
		t.Fatal(err)
	}
	file3, _ := mustSeal(t, []byte("x"), ctx, rcpt)
	h3, err := parse(file3)
	if err != nil {
		t.Fatal(err)
	}
	tdec, err := hybrid.NewHybridDecrypt(kh)
	if err != nil {
		t.Fatal(err)
	}
	dek3, err := tdec.Decrypt(h3.Recipients[0].Wrapped, wrapInfo(ctx, rcpt.KeyID()))
	if err != nil {
		t.Fatalf("tink cannot unwrap a stanza of Seal: %v", err)
	}
	gcm3, err := newGCM(dek3)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := gcm3.Open(nil, h3.Nonce[:], h3.Ciphertext, bodyAD(file3[:h3.headerLen()])); err != nil || string(pt) != "x" {
		t.Fatalf("body with tink-unwrapped DEK: %v", err)
	}
}
