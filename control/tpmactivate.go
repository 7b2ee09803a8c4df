package control

import (
	"context"
	"errors"
	"math"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmcred"
)

// The remote half of TPM credential activation (docs/spec/platform-tpm.md
// section 2.4, docs/spec/attester-api.md section 5): a verifier gets what
// it needs to make a credential (TPMKeys) and has the attester answer one
// (ActivateCredential). Both reveal only what every TPM key attestation
// already carries (the EK certificate and the AK public area), and an
// answer is the secret its asker drew, useless to anyone else.

// An activation re-creates up to two EKs (an RSA 2048 key generation on a
// discrete TPM that does not cache it can take seconds) and holds the TPM,
// which quotes for runs' attestations wait for. Activations are metered by
// a token bucket shared by all callers, after the request is parsed and
// before the TPM is used: beyond it, kindTooMany with RetryAfter.
const (
	activationsPerSecond = 1
	activationBurst      = 4
)

// credentialActivator is the platform capability activation needs
// (enclave/tpm.TPM).
type credentialActivator interface {
	EKCertificate() []byte
	AKPublic() []byte
	ActivateCredential(ctx context.Context, challenge []byte) ([]byte, error)
}

var _ credentialActivator = (*tpm.TPM)(nil)

var errNoTPM = &Error{kind: kindNotFound, Msg: "this attester has no TPM credential activation (platform is not tpm)"}

// activator returns the platform as a credentialActivator, or
// kindNotFound when the attester does not run on a TPM.
func (s *Service) activator() (credentialActivator, error) {
	a, ok := s.platform.(credentialActivator)
	if !ok || s.platform.Platform() != evidence.PlatformTPM {
		return nil, errNoTPM
	}
	return a, nil
}

// CheckTPM refuses (kindNotFound) unless the attester runs on a TPM, so
// that a surface can refuse before it reads a request.
func (s *Service) CheckTPM() error {
	_, err := s.activator()
	return err
}

// TPMKeys returns the EK certificate and the AK public area the attester
// quotes with. The AK Name is not returned: a verifier computes it from the
// public area (platform-tpm.md section 2.1, step 1).
func (s *Service) TPMKeys() (ekCert, akPublic []byte, err error) {
	a, err := s.activator()
	if err != nil {
		return nil, nil, err
	}
	ek := a.EKCertificate()
	if ek == nil {
		return nil, nil, refusal(kindNotFound, "the TPM has no EK certificate in NV", nil)
	}
	return ek, a.AKPublic(), nil
}

// activateRequest is the body of POST /v1/tpm/activate.
type activateRequest struct {
	ChallengeB64u string `json:"challenge_b64u"`
}

// ActivateCredential answers one credential-activation challenge
// (tpmcred.Challenge) with the secret the TPM recovers.
func (s *Service) ActivateCredential(ctx context.Context, decode Decoder) ([]byte, error) {
	req, err := decodeAs[activateRequest](decode)
	if err != nil {
		return nil, err
	}
	a, err := s.activator()
	if err != nil {
		return nil, err
	}
	raw, err := b64u.Decode(req.ChallengeB64u)
	if err != nil || len(raw) == 0 {
		return nil, refusal(kindInvalid, "challenge_b64u must be non-empty b64u", err)
	}
	if _, err := tpmcred.ParseChallenge(raw); err != nil {
		return nil, refusal(kindInvalid, "malformed activation challenge", err)
	}
	if wait := s.activations.take(); wait > 0 {
		return nil, &Error{kind: kindTooMany, Msg: "too many credential activations; retry later",
			RetryAfter: int(math.Ceil(wait.Seconds()))}
	}
	secret, err := a.ActivateCredential(ctx, raw)
	switch {
	case errors.Is(err, tpm.ErrChallengeAK):
		return nil, refusal(kindUnprocessable, "the challenge is for another attestation key", err)
	case errors.Is(err, tpm.ErrChallengeEK):
		return nil, refusal(kindUnprocessable, "the challenge is for another endorsement key", err)
	case errors.Is(err, tpm.ErrActivation):
		return nil, refusal(kindUnprocessable, "the TPM refused the credential", err)
	case errors.Is(err, tpmcred.ErrMalformed):
		return nil, refusal(kindInvalid, "malformed activation challenge", err)
	case err != nil:
		return nil, refusal(kindInternal, "cannot run the credential activation", err)
	}
	s.log.Info("tpm credential activated")
	return secret, nil
}
