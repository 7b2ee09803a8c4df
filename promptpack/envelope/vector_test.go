package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/clawea/attester/internal/testfile"
)

var updateVector = flag.Bool("update-vector", false, "regenerate testdata/vector-v1.json with Seal and a fixed random seed")

const vectorPath = "testdata/vector-v1.json"

// specVector is the test vector printed in docs/spec/promptpack-envelope-v1.md.
type specVector struct {
	Comment        string   `json:"comment"`
	PackID         string   `json:"pack_id"`
	ReportHash     string   `json:"report_hash_hex"`
	Plaintext      string   `json:"plaintext_hex"`
	RecipientKeys  []string `json:"recipient_private_keys"`
	RecipientPubs  []string `json:"recipient_public_keys"`
	KeyIDs         []string `json:"recipient_key_ids_hex"`
	DEK            string   `json:"dek_hex"`
	EphemeralKeys  []string `json:"ephemeral_private_keys_hex"`
	Nonce          string   `json:"body_nonce_hex"`
	WrapInfo0      string   `json:"wrap_info_0_hex"`
	BodyAD         string   `json:"body_ad_hex"`
	File           string   `json:"file_hex"`
	Manifest       string   `json:"manifest_json"`
	GeneratorNotes string   `json:"generator"`
}

// vectorKeys derives the vector's recipient keys from fixed seeds.
func vectorKeys(t *testing.T) []*PrivateKey {
	var ks []*PrivateKey
	for _, seed := range []string{"attester", "recovery"} {
		ikm := sha256.Sum256([]byte("clawea.dev/promptpack/v1 test vector recipient " + seed))
		sk, err := suiteKEM.DeriveKeyPair(ikm[:])
		if err != nil {
			t.Fatal(err)
		}
		k, err := newPrivateKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

func vectorContext() Context {
	return Context{PackID: "pack-example-0001", ReportHash: sha256.Sum256([]byte("example SystemPromptReport"))}
}

const vectorPlaintext = `{"pack":"example"}`

// reconstruct builds the envelope file from the vector's intermediate values
// with the independent RFC 9180 implementation, not with Seal.
func reconstruct(t *testing.T, v *specVector) []byte {
	ctx := Context{PackID: v.PackID}
	copy(ctx.ReportHash[:], testfile.Hex(t, v.ReportHash))
	dek := testfile.Hex(t, v.DEK)
	h := &Header{PackID: ctx.PackID, ReportHash: ctx.ReportHash}
	for i, pubText := range v.RecipientPubs {
		pub, err := ParsePublicKey(pubText)
		if err != nil {
			t.Fatal(err)
		}
		enc, c := refSender(t, testfile.Hex(t, v.EphemeralKeys[i]), pub.Bytes(), wrapInfo(ctx, pub.KeyID()))
		h.Recipients = append(h.Recipients, recipientStanza{KeyID: pub.KeyID(), Wrapped: append(enc, c.seal(nil, dek)...)})
	}
	copy(h.Nonce[:], testfile.Hex(t, v.Nonce))
	hdr := h.appendHeader(nil)
	if got := hex.EncodeToString(bodyAD(hdr)); got != v.BodyAD {
		t.Fatalf("body AD differs:\n%s\nwant\n%s", got, v.BodyAD)
	}
	gcm, err := newGCM(dek)
	if err != nil {
		t.Fatal(err)
	}
	h.Ciphertext = gcm.Seal(nil, h.Nonce[:], testfile.Hex(t, v.Plaintext), bodyAD(hdr))
	f, err := h.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func generateVector(t *testing.T) *specVector {
	const seed = 1
	keys := vectorKeys(t)
	ctx := vectorContext()
	cryptotest.SetGlobalRandom(t, seed)
	file, m := mustSeal(t, []byte(vectorPlaintext), ctx, keys[0].Public(), keys[1].Public())
	mj, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// The same stream SetGlobalRandom installs. Seal draws, in order, the DEK,
	// one ephemeral X25519 secret per recipient and the body nonce; the
	// reconstruction below fails if that assumption is wrong.
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:8], seed)
	stream := mathrand.NewChaCha8(s)
	draw := func(n int) string {
		b := make([]byte, n)
		_, _ = stream.Read(b)
		return hex.EncodeToString(b)
	}
	v := &specVector{
		Comment:        "prompt-pack envelope format v1 test vector; see docs/spec/promptpack-envelope-v1.md",
		PackID:         ctx.PackID,
		ReportHash:     hex.EncodeToString(ctx.ReportHash[:]),
		Plaintext:      hex.EncodeToString([]byte(vectorPlaintext)),
		DEK:            draw(dekSize),
		GeneratorNotes: "Seal under testing/cryptotest.SetGlobalRandom(seed 1); recipient keys from DeriveKeyPair(SHA-256(\"clawea.dev/promptpack/v1 test vector recipient \" || name))",
	}
	for _, k := range keys {
		text, err := k.AppendSecretText(nil)
		if err != nil {
			t.Fatal(err)
		}
		v.RecipientKeys = append(v.RecipientKeys, string(text))
		v.RecipientPubs = append(v.RecipientPubs, k.Public().String())
		id := k.keyID()
		v.KeyIDs = append(v.KeyIDs, hex.EncodeToString(id[:]))
		v.EphemeralKeys = append(v.EphemeralKeys, draw(32))
	}
	v.Nonce = draw(nonceSize)
	v.WrapInfo0 = hex.EncodeToString(wrapInfo(ctx, keys[0].keyID()))
	h, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	v.BodyAD = hex.EncodeToString(bodyAD(file[:h.headerLen()]))
	v.File = hex.EncodeToString(file)
	v.Manifest = string(mj)
	if got := reconstruct(t, v); !bytes.Equal(got, file) {
		t.Fatal("Seal output under the fixed seed does not match the reconstruction from the drawn values")
	}
	return v
}

func TestSpecVector(t *testing.T) {
	if *updateVector {
		v := generateVector(t)
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorPath, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := testfile.Read(t, vectorPath)
	var v specVector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	file := testfile.Hex(t, v.File)

	// 1. The file is what the RFC 9180 reference makes of the published
	//    intermediate values (DEK, ephemeral keys, nonce).
	if got := reconstruct(t, &v); !bytes.Equal(got, file) {
		t.Fatalf("reconstructed file differs:\n%x", got)
	}
	// 2. The manifest parses, describes the file and re-encodes identically.
	m, err := ParseManifest([]byte(v.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	if mj, _ := m.MarshalJSON(); string(mj) != v.Manifest {
		t.Fatalf("manifest re-encodes as %s", mj)
	}
	// 3. Every recipient opens it to the plaintext.
	ctx := Context{PackID: v.PackID}
	copy(ctx.ReportHash[:], testfile.Hex(t, v.ReportHash))
	for i, text := range v.RecipientKeys {
		k, err := ParsePrivateKey([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		id := k.keyID()
		if k.Public().String() != v.RecipientPubs[i] || hex.EncodeToString(id[:]) != v.KeyIDs[i] {
			t.Fatalf("recipient %d: key mismatch", i)
		}
		if i == 0 && hex.EncodeToString(wrapInfo(ctx, k.keyID())) != v.WrapInfo0 {
			t.Fatal("wrap info differs")
		}
		dst := make([]byte, len(v.Plaintext)/2)
		if _, err := openDefault(file, m, k, ctx, dst); err != nil || hex.EncodeToString(dst) != v.Plaintext {
			t.Fatalf("recipient %d: Open: %v", i, err)
		}
	}
	// 4. The specification prints the same bytes.
	spec := testfile.Read(t, filepath.Join("..", "..", "docs", "spec", "promptpack-envelope-v1.md"))
	flat := strings.Join(strings.Fields(string(spec)), "")
	for name, want := range map[string]string{"file": v.File, "dek": v.DEK, "nonce": v.Nonce, "body AD": v.BodyAD, "wrap info": v.WrapInfo0, "manifest": strings.Join(strings.Fields(v.Manifest), "")} {
		if !strings.Contains(flat, want) {
			t.Errorf("the spec does not contain the vector's %s", name)
		}
	}
	for _, s := range append(append(v.RecipientKeys, v.EphemeralKeys...), v.KeyIDs...) {
		if !strings.Contains(flat, s) {
			t.Errorf("the spec does not contain %s", s)
		}
	}
}
