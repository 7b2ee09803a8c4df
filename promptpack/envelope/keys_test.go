package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
)

func TestKeyTextRoundTrip(t *testing.T) {
	k := mustKey(t)
	text, err := k.AppendSecretText(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(text, []byte(PrivateKeyPrefix)) {
		t.Fatalf("private text prefix: %q", text[:10])
	}
	k2, err := ParsePrivateKey(text)
	if err != nil {
		t.Fatal(err)
	}
	if k2.keyID() != k.keyID() || !k2.Public().Equal(k.Public()) {
		t.Fatal("parsed private key differs")
	}
	pub, err := ParsePublicKey(k.Public().String())
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(k.Public()) || pub.String() != k.Public().String() {
		t.Fatal("parsed public key differs")
	}
	// The key id is SHA-256(label || 0x00 || pk).
	want := sha256.Sum256(append([]byte("clawea.dev/promptpack/v1/keyid\x00"), pub.Bytes()...))
	if pub.KeyID() != KeyID(want) {
		t.Fatal("key id construction")
	}
}

func TestPrivateKeyNeverPrinted(t *testing.T) {
	k := mustKey(t)
	text, _ := k.AppendSecretText(nil)
	secret := string(text[len(PrivateKeyPrefix):])
	raw, _ := k.sk.Bytes()
	var logbuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logbuf, nil)).Info("k", "key", k)
	slog.New(slog.NewTextHandler(&logbuf, nil)).Info("k", "key", k)
	outs := []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %X %q", k, k, k, k, k, k, k),
		fmt.Sprintf("%v %+v", *k, []*PrivateKey{k}), logbuf.String(),
	}
	for _, o := range outs {
		if strings.Contains(o, secret) || strings.Contains(o, hex.EncodeToString(raw)) || strings.Contains(strings.ToLower(o), hex.EncodeToString(raw[:8])) {
			t.Fatalf("private key material printed: %s", o)
		}
	}
	// Parse errors never quote the input.
	bad := []byte(PrivateKeyPrefix + secret[:len(secret)-1] + "!")
	_, err := ParsePrivateKey(bad)
	if !errors.Is(err, errInvalidKey) || strings.Contains(err.Error(), secret[:20]) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseKeyErrors(t *testing.T) {
	k := mustKey(t)
	pub := k.Public().String()
	priv, _ := k.AppendSecretText(nil)
	badPub := []string{
		"", pub[:len(pub)-1], pub + "A", strings.ToUpper(pub[:5]) + pub[5:],
		strings.Replace(pub, "pub:", "pub: ", 1), pub[:30] + "\n" + pub[30:],
		"clawea-promptpack-v2-pub:" + pub[len(publicKeyPrefix):],
		publicKeyPrefix + b64u.Encode(make([]byte, 32)), // zero point: low order
		publicKeyPrefix + b64u.Encode(append([]byte{1}, make([]byte, 31)...)),
	}
	// Non-canonical: the top bit set, and p itself (2^255-19).
	top := k.Public().Bytes()
	top[31] |= 0x80
	p := bytes.Repeat([]byte{0xff}, 32)
	p[0], p[31] = 0xed, 0x7f
	badPub = append(badPub, publicKeyPrefix+b64u.Encode(top), publicKeyPrefix+b64u.Encode(p))
	// Non-canonical trailing bits in the last base64 character.
	last := pub[len(pub)-1]
	alt := strings.IndexByte("AEIMQUYcgkosw048", last)
	if alt >= 0 {
		badPub = append(badPub, pub[:len(pub)-1]+string("BFJNRVZdhlptx159"[alt]))
	}
	for _, s := range badPub {
		if _, err := ParsePublicKey(s); !errors.Is(err, errInvalidKey) {
			t.Errorf("ParsePublicKey(%q) = %v", s, err)
		}
	}
	// Unclamped private key: same public key, but not the canonical encoding.
	raw, _ := k.sk.Bytes()
	raw[0] |= 7
	unclamped := []byte(PrivateKeyPrefix + b64u.Encode(raw))
	badPriv := [][]byte{nil, priv[:len(priv)-1], append(bytes.Clone(priv), 'A'), unclamped, []byte(strings.Replace(string(priv), "priv", "pub", 1))}
	for _, b := range badPriv {
		if _, err := ParsePrivateKey(b); !errors.Is(err, errInvalidKey) {
			t.Errorf("ParsePrivateKey(%d bytes) = %v", len(b), err)
		}
	}
}

// TestKeyFileVectors checks the key file framing of spec section 5.3 against
// testdata/keyfile-v1.json: the text form with at most one trailing LF.
func TestKeyFileVectors(t *testing.T) {
	b := testfile.Read(t, "testdata/keyfile-v1.json")
	var v struct {
		Comment string `json:"comment"`
		Priv    string `json:"private_key_text"`
		Pub     string `json:"public_key_text"`
		Cases   []struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			File  string `json:"file"`
			Valid bool   `json:"valid"`
		} `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	want, err := ParsePublicKey(v.Pub)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, refused int
	for _, c := range v.Cases {
		var got *PublicKey
		var err error
		switch c.Kind {
		case "private":
			var k *PrivateKey
			if k, err = ParsePrivateKeyFile([]byte(c.File)); err == nil {
				got = k.Public()
			} else if strings.Contains(err.Error(), v.Priv[len(PrivateKeyPrefix):len(PrivateKeyPrefix)+8]) {
				t.Errorf("%s %s: error quotes the key: %v", c.Kind, c.Name, err)
			}
		case "public":
			got, err = parsePublicKeyFile([]byte(c.File))
		default:
			t.Fatalf("case %q: unknown kind %q", c.Name, c.Kind)
		}
		switch {
		case c.Valid && err != nil:
			t.Errorf("%s key file %q (%q) refused: %v", c.Kind, c.Name, c.File, err)
		case c.Valid && !got.Equal(want):
			t.Errorf("%s key file %q: wrong key", c.Kind, c.Name)
		case !c.Valid && !errors.Is(err, errInvalidKey):
			t.Errorf("%s key file %q (%q): got %v, want ErrInvalidKey", c.Kind, c.Name, c.File, err)
		}
		if c.Valid {
			accepted++
		} else {
			refused++
		}
	}
	if accepted < 4 || refused < 30 {
		t.Fatalf("only %d accepted and %d refused cases", accepted, refused)
	}
}

// A written key file is the text and one LF, and parses back.
func TestKeyFileRoundTrip(t *testing.T) {
	k := mustKey(t)
	f, err := k.AppendSecretKeyFile(nil)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := k.AppendSecretText(nil)
	if !bytes.Equal(f, append(text, '\n')) {
		t.Fatal("key file is not the text and one LF")
	}
	k2, err := ParsePrivateKeyFile(f)
	if err != nil || k2.keyID() != k.keyID() {
		t.Fatalf("round trip: %v", err)
	}
	pub, err := parsePublicKeyFile([]byte(k.Public().String() + "\n"))
	if err != nil || !pub.Equal(k.Public()) {
		t.Fatalf("public round trip: %v", err)
	}
	// A long input is refused without quoting it.
	long := bytes.Repeat([]byte("x"), 1<<16)
	if _, err := parsePublicKeyFile(long); !errors.Is(err, errInvalidKey) || strings.Contains(err.Error(), "xxxx") {
		t.Fatalf("long public key file: %v", err)
	}
}
