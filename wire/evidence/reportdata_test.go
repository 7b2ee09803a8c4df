package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestNewReportData(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
	var nonce [32]byte
	for i := range nonce {
		nonce[i] = byte(i)
	}
	rd, err := NewReportData(nonce, pub, []byte("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	b := rd.Bytes()
	if !bytes.Equal(b[:32], nonce[:]) {
		t.Fatal("bytes 0..31 are not the nonce binding")
	}
	// Recompute bytes 32..63 by hand from the spec's layout.
	var m []byte
	m = append(m, identityBindingLabel...)
	m = append(m, 0, 0, 32)
	m = append(m, pub...)
	m = append(m, 0, 0, 0, 3)
	m = append(m, "ctx"...)
	want := sha256.Sum256(m)
	if !bytes.Equal(b[32:], want[:]) {
		t.Fatalf("identity binding %x, want %x", b[32:], want)
	}
	if qd := rd.QualifyingData(); qd != sha256.Sum256(b[:]) {
		t.Fatal("qualifying data is not SHA-256 of the 64 bytes")
	}
	if rd.IsZero() || !(ReportData{}).IsZero() {
		t.Fatal("IsZero")
	}
	// Every input changes the result.
	rd2, _ := NewReportData(nonce, pub, []byte("ctx2"))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32)).Public().(ed25519.PublicKey)
	rd3, _ := NewReportData(nonce, other, []byte("ctx"))
	nonce[0] ^= 1
	rd4, _ := NewReportData(nonce, pub, []byte("ctx"))
	if rd2 == rd || rd3 == rd || rd4 == rd {
		t.Fatal("a changed input left REPORT_DATA unchanged")
	}
	t.Logf("vector: %s", hex.EncodeToString(b[:]))
}

func TestNewReportDataRejects(t *testing.T) {
	if _, err := NewReportData([32]byte{}, make([]byte, 31), nil); err == nil {
		t.Fatal("short identity key accepted")
	}
	pub := make(ed25519.PublicKey, 32)
	if _, err := NewReportData([32]byte{}, pub, make([]byte, maxEvidenceContext+1)); err == nil {
		t.Fatal("oversized context accepted")
	}
}
