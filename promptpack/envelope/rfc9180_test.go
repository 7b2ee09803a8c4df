package envelope

// An independent, test-only implementation of RFC 9180 base mode for the one
// suite of format v1 (KEM 0x0020, KDF 0x0001, AEAD 0x0002), written from the
// RFC with crypto/ecdh, crypto/hkdf and crypto/aes. It is first checked
// against the RFC 9180 test vectors that Go ships, then used to check, byte
// for byte, what the production code (crypto/hpke) produces and accepts.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hpke"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

const (
	refKEMID  = 0x0020
	refKDFID  = 0x0001
	refAEADID = 0x0002
)

func refKEMSuite() []byte {
	return binary.BigEndian.AppendUint16([]byte("KEM"), refKEMID)
}

func refHPKESuite() []byte {
	b := []byte("HPKE")
	b = binary.BigEndian.AppendUint16(b, refKEMID)
	b = binary.BigEndian.AppendUint16(b, refKDFID)
	return binary.BigEndian.AppendUint16(b, refAEADID)
}

func labeledExtract(t testing.TB, suite, salt []byte, label string, ikm []byte) []byte {
	in := append(append(append([]byte("HPKE-v1"), suite...), label...), ikm...)
	prk, err := hkdf.Extract(sha256.New, in, salt)
	if err != nil {
		t.Fatal(err)
	}
	return prk
}

func labeledExpand(t testing.TB, suite, prk []byte, label string, info []byte, l int) []byte {
	in := binary.BigEndian.AppendUint16(nil, uint16(l))
	in = append(append(append(append(in, "HPKE-v1"...), suite...), label...), info...)
	out, err := hkdf.Expand(sha256.New, prk, string(in), l)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refDeriveKeyPair is DeriveKeyPair for X25519 (RFC 9180, Section 7.1.3).
func refDeriveKeyPair(t testing.TB, ikm []byte) (sk, pk []byte) {
	prk := labeledExtract(t, refKEMSuite(), nil, "dkp_prk", ikm)
	sk = labeledExpand(t, refKEMSuite(), prk, "sk", nil, 32)
	k, err := ecdh.X25519().NewPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, k.PublicKey().Bytes()
}

func refDH(t testing.TB, sk, pk []byte) []byte {
	k, err := ecdh.X25519().NewPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ecdh.X25519().NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	dh, err := k.ECDH(p)
	if err != nil {
		t.Fatal(err)
	}
	return dh
}

func refExtractAndExpand(t testing.TB, dh, enc, pkR []byte) []byte {
	prk := labeledExtract(t, refKEMSuite(), nil, "eae_prk", dh)
	return labeledExpand(t, refKEMSuite(), prk, "shared_secret", append(bytes.Clone(enc), pkR...), 32)
}

// refContext is an HPKE encryption context (either side).
type refContext struct {
	aead  cipher.AEAD
	nonce []byte
	seq   uint64
}

func refKeySchedule(t testing.TB, shared, info []byte) *refContext {
	s := refHPKESuite()
	pskIDHash := labeledExtract(t, s, nil, "psk_id_hash", nil)
	infoHash := labeledExtract(t, s, nil, "info_hash", info)
	ksContext := append(append([]byte{0x00}, pskIDHash...), infoHash...)
	secret := labeledExtract(t, s, shared, "secret", nil)
	key := labeledExpand(t, s, secret, "key", ksContext, 32)
	baseNonce := labeledExpand(t, s, secret, "base_nonce", ksContext, 12)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &refContext{aead: aead, nonce: baseNonce}
}

func (c *refContext) next() []byte {
	n := bytes.Clone(c.nonce)
	var seq [12]byte
	binary.BigEndian.PutUint64(seq[4:], c.seq)
	for i := range n {
		n[i] ^= seq[i]
	}
	c.seq++
	return n
}

func (c *refContext) seal(aad, pt []byte) []byte { return c.aead.Seal(nil, c.next(), pt, aad) }

func (c *refContext) open(aad, ct []byte) ([]byte, error) { return c.aead.Open(nil, c.next(), ct, aad) }

// refSender sets up the sender side with a given ephemeral secret skE.
func refSender(t testing.TB, skE, pkR, info []byte) (enc []byte, c *refContext) {
	_, enc = refPublic(t, skE)
	shared := refExtractAndExpand(t, refDH(t, skE, pkR), enc, pkR)
	return enc, refKeySchedule(t, shared, info)
}

// refRecipient sets up the recipient side.
func refRecipient(t testing.TB, enc, skR, info []byte) *refContext {
	_, pkR := refPublic(t, skR)
	shared := refExtractAndExpand(t, refDH(t, skR, enc), enc, pkR)
	return refKeySchedule(t, shared, info)
}

func refPublic(t testing.TB, sk []byte) ([]byte, []byte) {
	k, err := ecdh.X25519().NewPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, k.PublicKey().Bytes()
}

type rfc9180Vector struct {
	Mode           uint16 `json:"mode"`
	KEM            uint16 `json:"kem_id"`
	KDF            uint16 `json:"kdf_id"`
	AEAD           uint16 `json:"aead_id"`
	Info           string `json:"info"`
	IkmE           string `json:"ikmE"`
	IkmR           string `json:"ikmR"`
	SkRm           string `json:"skRm"`
	PkRm           string `json:"pkRm"`
	Enc            string `json:"enc"`
	AccEncryptions string `json:"encryptions_accumulated"`
}

func goroot(t *testing.T) string {
	//lint:ignore SA1019 the GOROOT of the toolchain running the test is what we want.
	if r := runtime.GOROOT(); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("cannot find GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// suiteVector returns the base-mode vector of our suite from Go's copy of
// the RFC 9180 test vectors.
func suiteVector(t *testing.T) rfc9180Vector {
	path := filepath.Join(goroot(t), "src", "crypto", "hpke", "testdata", "rfc9180.json")
	data := testfile.Read(t, path)
	var vs []rfc9180Vector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Mode == 0 && v.KEM == refKEMID && v.KDF == refKDFID && v.AEAD == refAEADID {
			return v
		}
	}
	t.Fatalf("%s has no base-mode vector for KEM 0x0020 / KDF 0x0001 / AEAD 0x0002", path)
	return rfc9180Vector{}
}

// drawInput reads a length byte and that many bytes (the accumulation
// scheme of Go's condensed vectors).
func drawInput(r io.Reader) []byte {
	var l [1]byte
	_, _ = r.Read(l[:])
	b := make([]byte, l[0])
	_, _ = r.Read(b)
	return b
}

// TestRefAgainstRFC9180 checks the independent implementation against the
// vector: key derivation, enc, and 1000 accumulated encryptions.
func TestRefAgainstRFC9180(t *testing.T) {
	v := suiteVector(t)
	skR, pkR := refDeriveKeyPair(t, testfile.Hex(t, v.IkmR))
	if !bytes.Equal(skR, testfile.Hex(t, v.SkRm)) || !bytes.Equal(pkR, testfile.Hex(t, v.PkRm)) {
		t.Fatal("DeriveKeyPair(ikmR) does not give skRm/pkRm")
	}
	skE, _ := refDeriveKeyPair(t, testfile.Hex(t, v.IkmE))
	info := testfile.Hex(t, v.Info)
	enc, sender := refSender(t, skE, pkR, info)
	if !bytes.Equal(enc, testfile.Hex(t, v.Enc)) {
		t.Fatalf("enc = %x, want %s", enc, v.Enc)
	}
	recipient := refRecipient(t, enc, skR, info)
	source, sink := sha3.NewSHAKE128(), sha3.NewSHAKE128()
	for range 1000 {
		aad, pt := drawInput(source), drawInput(source)
		ct := sender.seal(aad, pt)
		sink.Write(ct)
		got, err := recipient.open(aad, ct)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatal("recipient cannot open")
		}
	}
	acc := make([]byte, 16)
	_, _ = sink.Read(acc)
	if !bytes.Equal(acc, testfile.Hex(t, v.AccEncryptions)) {
		t.Fatalf("accumulated encryptions = %x, want %s", acc, v.AccEncryptions)
	}
}

// TestWrapUnwrapRFC9180 checks the production wrap and unwrap functions
// against the vector's key pair and ephemeral key.
func TestWrapUnwrapRFC9180(t *testing.T) {
	v := suiteVector(t)
	skR, pkR := testfile.Hex(t, v.SkRm), testfile.Hex(t, v.PkRm)
	skE, _ := refDeriveKeyPair(t, testfile.Hex(t, v.IkmE))
	sk, err := hpke.DHKEM(ecdh.X25519()).NewPrivateKey(skR)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := newPublicKey(pkR)
	if err != nil {
		t.Fatal(err)
	}
	dek := bytes.Repeat([]byte{0x42}, dekSize)
	infos := map[string][]byte{
		"vector info":   testfile.Hex(t, v.Info),
		"envelope info": wrapInfo(testContext("pack-rfc"), pub.KeyID()),
	}
	for name, info := range infos {
		// Unwrap: a wrap made with the vector's ephemeral key (enc is the
		// vector's enc) opens with unwrapKey.
		enc, sender := refSender(t, skE, pkR, info)
		if !bytes.Equal(enc, testfile.Hex(t, v.Enc)) {
			t.Fatal("enc differs from the vector")
		}
		wrapped := append(enc, sender.seal(nil, dek)...)
		if len(wrapped) != wrappedSize {
			t.Fatalf("%s: wrapped is %d bytes", name, len(wrapped))
		}
		got, err := unwrapKey(sk, info, wrapped)
		if err != nil || !bytes.Equal(got, dek) {
			t.Fatalf("%s: unwrapKey: %v", name, err)
		}
		// Wrap: our output, for its own (random) ephemeral key, is exactly
		// enc || Seal(key, base_nonce, "", dek) under the RFC key schedule.
		w, err := wrapKey(pub.pk, info, dek)
		if err != nil {
			t.Fatal(err)
		}
		c := refRecipient(t, w[:encSize], skR, info)
		want := append(bytes.Clone(w[:encSize]), c.seal(nil, dek)...)
		if !bytes.Equal(w, want) {
			t.Fatalf("%s: wrapKey output\n%x\nwant\n%x", name, w, want)
		}
		// And a wrap under other info does not unwrap.
		if _, err := unwrapKey(sk, append(bytes.Clone(info), 0), w); err == nil {
			t.Fatalf("%s: unwrapped under different info", name)
		}
	}
}
