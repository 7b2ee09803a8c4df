package server

import (
	"context"
	"errors"
	"math"
	"net/http"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmcred"
)

// The remote half of TPM credential activation (docs/spec/platform-tpm.md
// section 2.4, docs/spec/attester-api.md section 5): GET /v1/tpm/ek serves
// what a verifier needs to make a credential, POST /v1/tpm/activate answers
// one. Both are public: they reveal only what every TPM key attestation
// already carries (the EK certificate and the AK public area), and an
// answer is the secret its asker drew, useless to anyone else.

// An activation re-creates up to two EKs (an RSA 2048 key generation on a
// discrete TPM that does not cache it can take seconds) and holds the TPM,
// which quotes for runs' attestations wait for. Activations are metered by
// a token bucket shared by all callers, after the request is parsed and
// before the TPM is used: beyond it, 429 with Retry-After.
const (
	activationsPerSecond = 1
	activationBurst      = 4
	// maxActivateBody bounds POST /v1/tpm/activate: the largest challenge
	// (tpmcred limits) in b64u is about 1.2 KiB.
	maxActivateBody = 4 << 10
)

// credentialActivator is the platform capability the activation endpoints
// need (enclave/tpm.TPM).
type credentialActivator interface {
	EKCertificate() []byte
	AKPublic() []byte
	ActivateCredential(ctx context.Context, challenge []byte) ([]byte, error)
}

var _ credentialActivator = (*tpm.TPM)(nil)

var errNoTPM = &HTTPError{Code: http.StatusNotFound, Msg: "this attester has no TPM credential activation (platform is not tpm)"}

// activator returns the platform as a credentialActivator, or a 404 when
// the attester does not run on a TPM.
func (s *Server) activator() (credentialActivator, error) {
	a, ok := s.platform.(credentialActivator)
	if !ok || s.platform.Platform() != evidence.PlatformTPM {
		return nil, errNoTPM
	}
	return a, nil
}

// tpmRoutes registers the activation endpoints on the public mux.
func (s *Server) tpmRoutes(mux *http.ServeMux) {
	mux.Handle("GET /v1/tpm/ek", s.wrap("tpm_ek", s.handleTPMEK))
	mux.Handle("POST /v1/tpm/activate", s.wrap("tpm_activate", s.handleTPMActivate))
}

// handleTPMEK serves the EK certificate and the AK public area the
// attester quotes with. The AK Name is not served: a verifier computes it
// from ak_public_b64u (platform-tpm.md section 2.1, step 1).
func (s *Server) handleTPMEK(w http.ResponseWriter, r *http.Request) error {
	a, err := s.activator()
	if err != nil {
		return err
	}
	if r.URL.RawQuery != "" {
		return httpErr(http.StatusBadRequest, "this route takes no query parameters", nil)
	}
	ek := a.EKCertificate()
	if ek == nil {
		return httpErr(http.StatusNotFound, "the TPM has no EK certificate in NV", nil)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ek_cert_b64u":   b64u.Encode(ek),
		"ak_public_b64u": b64u.Encode(a.AKPublic()),
		"simulated":      s.simulated(),
	})
	return nil
}

// activateRequest is the POST /v1/tpm/activate body.
type activateRequest struct {
	ChallengeB64u string `json:"challenge_b64u"`
}

// handleTPMActivate answers one credential-activation challenge
// (tpmcred.Challenge) with the secret the TPM recovers.
func (s *Server) handleTPMActivate(w http.ResponseWriter, r *http.Request) error {
	a, err := s.activator()
	if err != nil {
		return refuse(err)
	}
	if r.URL.RawQuery != "" {
		return refuse(httpErr(http.StatusBadRequest, "this route takes no query parameters", nil))
	}
	if err := checkContentType(r); err != nil {
		return refuse(err)
	}
	body, err := readBody(w, r, maxActivateBody, smallBodyTimeout)
	if err != nil {
		return err
	}
	var req activateRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	raw, err := b64u.Decode(req.ChallengeB64u)
	if err != nil || len(raw) == 0 {
		return httpErr(http.StatusBadRequest, "challenge_b64u must be non-empty b64u", err)
	}
	if _, err := tpmcred.ParseChallenge(raw); err != nil {
		return httpErr(http.StatusBadRequest, "malformed activation challenge", err)
	}
	if wait := s.activations.take(); wait > 0 {
		return &HTTPError{Code: http.StatusTooManyRequests, Msg: "too many credential activations; retry later",
			retryAfter: int(math.Ceil(wait.Seconds()))}
	}
	secret, err := a.ActivateCredential(r.Context(), raw)
	switch {
	case errors.Is(err, tpm.ErrChallengeAK):
		return httpErr(http.StatusUnprocessableEntity, "the challenge is for another attestation key", err)
	case errors.Is(err, tpm.ErrChallengeEK):
		return httpErr(http.StatusUnprocessableEntity, "the challenge is for another endorsement key", err)
	case errors.Is(err, tpm.ErrActivation):
		return httpErr(http.StatusUnprocessableEntity, "the TPM refused the credential", err)
	case errors.Is(err, tpmcred.ErrMalformed):
		return httpErr(http.StatusBadRequest, "malformed activation challenge", err)
	case err != nil:
		return httpErr(http.StatusInternalServerError, "cannot run the credential activation", err)
	}
	s.log.Info("tpm credential activated")
	writeJSON(w, http.StatusOK, map[string]string{"secret_b64u": b64u.Encode(secret)})
	return nil
}
