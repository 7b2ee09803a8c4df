package control

import (
	"crypto/ed25519"
	"log/slog"
	"testing"

	"github.com/clawea/attester/sealed"
)

func TestAnswerSigner(t *testing.T) {
	id, err := LoadIdentity(t.Context(), "", nil, sealed.Options{AllowUnlocked: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer id.Close()
	var s signer = answerSigner{Identity: id}
	msg := []byte(`{"run_id":"run_x"}`)
	sig, err := s.sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !verifyAnswer(id.Public, msg, sig) {
		t.Fatal("signature does not verify")
	}
	// Domain separated: not a signature of the bare message, nor of another.
	if ed25519.Verify(id.Public, msg, sig) {
		t.Fatal("signature is over the bare message")
	}
	if verifyAnswer(id.Public, []byte(`{"run_id":"run_y"}`), sig) {
		t.Fatal("signature verifies for another message")
	}
	other, _ := LoadIdentity(t.Context(), "", nil, sealed.Options{AllowUnlocked: true}, slog.New(slog.DiscardHandler))
	defer other.Close()
	if verifyAnswer(other.Public, msg, sig) {
		t.Fatal("signature verifies under another key")
	}
	if _, err := (answerSigner{}).sign(msg); err == nil {
		t.Fatal("a signer without an identity signed")
	}
}
