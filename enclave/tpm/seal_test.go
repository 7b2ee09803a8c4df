package tpm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
)

// sealPCRs includes PCR 16 (the debug PCR) so extending it in one test does
// not disturb the boot PCRs other tests quote.
var sealPCRs = []int{0, 7, 16}

func TestSealUnsealRoundTrip(t *testing.T) {
	tp := openSwtpm(t, Options{PCRs: sealPCRs})
	ctx := context.Background()
	secrets := [][]byte{{0x42}, bytes.Repeat([]byte{0xa5}, maxSealSecret), []byte("dek-0123456789abcdef0123456789ab")}
	var blobs [][]byte
	for _, secret := range secrets {
		blob, err := tp.SealPCR(ctx, "prompt-pack-dek", secret)
		if err != nil {
			t.Fatalf("SealPCR: %v", err)
		}
		if !bytes.HasPrefix(blob, []byte(sealedBlobVersion+"\x00")) {
			t.Fatal("blob does not start with the version label")
		}
		if len(secret) > 4 && bytes.Contains(blob, secret) {
			t.Fatal("blob contains the plaintext secret")
		}
		dst := make([]byte, maxSealSecret)
		n, err := tp.UnsealPCR(ctx, "prompt-pack-dek", blob, dst)
		if err != nil {
			t.Fatalf("UnsealPCR: %v", err)
		}
		if !bytes.Equal(dst[:n], secret) {
			t.Fatal("unsealed secret differs")
		}
		blobs = append(blobs, blob)
	}
	// A new connection (swtpm serves one at a time) with another PCR
	// option unseals too: the blob carries its PCR selection.
	tp.Close()
	tp2 := openSwtpm(t, Options{PCRs: []int{1}})
	for i, blob := range blobs {
		dst := make([]byte, maxSealSecret)
		n, err := tp2.UnsealPCR(ctx, "prompt-pack-dek", blob, dst)
		if err != nil || !bytes.Equal(dst[:n], secrets[i]) {
			t.Fatalf("unseal on a new connection: %v", err)
		}
	}
}

func TestUnsealRefused(t *testing.T) {
	tp := openSwtpm(t, Options{PCRs: sealPCRs})
	ctx := context.Background()
	secret := []byte("0123456789abcdef0123456789abcdef")
	blob, err := tp.SealPCR(ctx, "label-a", secret)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 64)

	// Wrong label.
	_, err = tp.UnsealPCR(ctx, "label-b", blob, dst)
	if !errors.Is(err, errUnsealDenied) || !errors.Is(err, errSealLabel) {
		t.Fatalf("wrong label: %v", err)
	}
	// Too small a destination.
	if _, err := tp.UnsealPCR(ctx, "label-a", blob, dst[:len(secret)-1]); !errors.Is(err, errShortBuffer) {
		t.Fatalf("short dst: %v", err)
	}
	// Tampered private part: the TPM's integrity check fails on load.
	bad := bytes.Clone(blob)
	bad[len(bad)-1] ^= 1
	if _, err := tp.UnsealPCR(ctx, "label-a", bad, dst); !errors.Is(err, errSealedBlob) {
		t.Fatalf("tampered blob: %v", err)
	}
	// Still fine before the extend.
	if n, err := tp.UnsealPCR(ctx, "label-a", blob, dst); err != nil || !bytes.Equal(dst[:n], secret) {
		t.Fatalf("unseal before extend: %v", err)
	}

	extendPCR(t, tp, 16, "something else ran")
	clear(dst)
	n, err := tp.UnsealPCR(ctx, "label-a", blob, dst)
	if !errors.Is(err, errUnsealDenied) || !errors.Is(err, errPCRPolicy) {
		t.Fatalf("unseal after extend: %v", err)
	}
	if n != 0 || !bytes.Equal(dst, make([]byte, len(dst))) {
		t.Fatal("unseal after extend wrote to dst")
	}

	// A blob sealed now, to the new values, unseals.
	blob2, err := tp.SealPCR(ctx, "label-a", secret)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tp.UnsealPCR(ctx, "label-a", blob2, dst); err != nil || !bytes.Equal(dst[:n], secret) {
		t.Fatalf("unseal of a blob sealed after extend: %v", err)
	}
}

func TestSealInputErrors(t *testing.T) {
	tp := openSwtpm(t, Options{PCRs: sealPCRs})
	ctx := context.Background()
	for _, c := range []struct {
		label  string
		secret []byte
	}{
		{"", []byte("x")},
		{strings.Repeat("l", maxSealLabel+1), []byte("x")},
		{"l", nil},
		{"l", make([]byte, maxSealSecret+1)},
	} {
		if _, err := tp.SealPCR(ctx, c.label, c.secret); !errors.Is(err, errSealInput) {
			t.Errorf("SealPCR(%d-byte label, %d-byte secret) = %v", len(c.label), len(c.secret), err)
		}
	}
	dst := make([]byte, 16)
	for _, blob := range [][]byte{nil, []byte("clawea.dev/attester/v2/tpm-seal\x00"), []byte(sealedBlobVersion + "\x00\x01\x00")} {
		if _, err := tp.UnsealPCR(ctx, "l", blob, dst); !errors.Is(err, errSealedBlob) {
			t.Errorf("UnsealPCR(%q) = %v", blob, err)
		}
	}
}

func TestParseSealedBlob(t *testing.T) {
	good := (&sealedBlob{pcrs: []int{0, 7}, public: []byte{1, 2}, private: []byte{3}}).marshal()
	if _, err := parseSealedBlob(good); err != nil {
		t.Fatal(err)
	}
	hdr := sealedBlobVersion + "\x00"
	for name, b := range map[string][]byte{
		"trailing":       append(bytes.Clone(good), 0),
		"truncated":      good[:len(good)-1],
		"no pcrs":        []byte(hdr + "\x00\x00\x01\x01\x00\x01\x01"),
		"pcr order":      []byte(hdr + "\x02\x07\x00\x00\x01\x01\x00\x01\x01"),
		"pcr range":      []byte(hdr + "\x01\x18\x00\x01\x01\x00\x01\x01"),
		"empty public":   []byte(hdr + "\x01\x00\x00\x00\x00\x01\x01"),
		"empty private":  []byte(hdr + "\x01\x00\x00\x01\x01\x00\x00"),
		"other version":  []byte("clawea.dev/attester/v0/tpm-seal\x00\x01\x00\x00\x01\x01\x00\x01\x01"),
		"no terminator":  []byte(sealedBlobVersion + "\x01\x00\x00\x01\x01\x00\x01\x01"),
		"oversized":      make([]byte, maxSealedBlob+1),
		"oversized part": append([]byte(hdr+"\x01\x00\x04\x01"), make([]byte, 1025)...),
	} {
		if _, err := parseSealedBlob(b); !errors.Is(err, errSealedBlob) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseSealedBlob(f *testing.F) {
	f.Add((&sealedBlob{pcrs: []int{0, 7, 16}, public: []byte{0, 8, 0, 11}, private: []byte{9, 9, 9}}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, parseSealedBlob, func(sb *sealedBlob) ([]byte, error) { return sb.marshal(), nil })
	})
}
