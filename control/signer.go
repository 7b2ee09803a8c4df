package control

import (
	"crypto"
	"crypto/ed25519"
	"errors"

	"github.com/clawea/attester/wire/answer"
)

// signer signs the control plane's answers.
type signer interface {
	sign(message []byte) ([]byte, error)
}

// answerSigner signs control answers with the attester identity's Ed25519
// key (the key of its DID), under wire/answer's domain-separation label
// (answer.Message), so that no control answer can be taken for another
// object the identity key signs (key attestations, execution attestations).
type answerSigner struct {
	Identity *Identity
}

var _ signer = answerSigner{}

// sign returns the Ed25519 signature of message, which answer.Message
// prefixes with the label and a zero byte.
func (a answerSigner) sign(message []byte) ([]byte, error) {
	if a.Identity == nil {
		return nil, errors.New("control: answer signer without an identity")
	}
	return a.Identity.Signer.Sign(nil, answerMessage(message), crypto.Hash(0))
}

// verifyAnswer reports whether sig is an answerSigner signature of message
// by pub.
func verifyAnswer(pub ed25519.PublicKey, message, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, answerMessage(message), sig)
}

func answerMessage(m []byte) []byte { return answer.Message(m) }
