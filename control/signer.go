package control

import (
	"crypto/ed25519"
	"errors"

	"github.com/clawea/attester/wire/answer"
)

// Signer signs the control plane's answers.
type Signer interface {
	Sign(message []byte) ([]byte, error)
}

// AnswerContext is the domain-separation label an AnswerSigner signs under:
// its signature is over AnswerContext, a zero byte and the message, so that
// no control answer can be taken for another object the identity key signs
// (key attestations, execution attestations).
const AnswerContext = answer.Label

// AnswerSigner signs control answers with the attester identity's Ed25519
// key (the key of its DID).
type AnswerSigner struct {
	Identity *Identity
}

var _ Signer = AnswerSigner{}

// Sign returns the Ed25519 signature of AnswerContext || 0x00 || message.
func (a AnswerSigner) Sign(message []byte) ([]byte, error) {
	if a.Identity == nil {
		return nil, errors.New("control: answer signer without an identity")
	}
	var sig []byte
	err := a.Identity.WithSigningKey(func(k ed25519.PrivateKey) error {
		sig = ed25519.Sign(k, answerMessage(message))
		return nil
	})
	return sig, err
}

// VerifyAnswer reports whether sig is an AnswerSigner signature of message
// by pub.
func VerifyAnswer(pub ed25519.PublicKey, message, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, answerMessage(message), sig)
}

func answerMessage(m []byte) []byte { return answer.Message(m) }
