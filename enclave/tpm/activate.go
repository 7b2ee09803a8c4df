package tpm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/wire/tpmcred"
)

// Credential activation errors.
var (
	// ErrChallengeAK: the challenge is bound to another AK Name than this
	// TPM's AK.
	ErrChallengeAK = errors.New("tpm: activation challenge is for another attestation key")
	// ErrChallengeEK: no default-template EK of this TPM has the Name the
	// challenge is encrypted to.
	ErrChallengeEK = errors.New("tpm: activation challenge is for another endorsement key")
	// ErrActivation: the TPM refused TPM2_ActivateCredential (altered blob
	// or secret, or a credential made for another key).
	ErrActivation = errors.New("tpm: credential activation refused")
)

// ekTemplates are the TCG default EK templates (EK Credential Profile 2.0,
// L-1 RSA 2048 and L-2 ECC P-256) that tpmcred.EKPublic reconstructs from an
// EK certificate.
func ekTemplates() []tpm2.TPMTPublic {
	return []tpm2.TPMTPublic{tpm2.RSAEKTemplate, tpm2.ECCEKTemplate}
}

// ekPublic re-creates the default-template EK of the given type
// (tpm2.TPMAlgRSA or tpm2.TPMAlgECC) and returns its TPMT_PUBLIC bytes. It is
// for an operator who pins an EK that has no certificate
// (tpmcred.NewActivationForEK).
func (t *TPM) ekPublic(ctx context.Context, alg tpm2.TPMAlgID) ([]byte, error) {
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, tmpl := range ekTemplates() {
		if tmpl.Type != alg {
			continue
		}
		rsp, err := t.createEK(tmpl)
		if err != nil {
			return nil, err
		}
		t.flush(rsp.ObjectHandle)
		return slices.Clone(rsp.OutPublic.Bytes()), nil
	}
	return nil, fmt.Errorf("%w: ek type %v", errOptions, alg)
}

func (t *TPM) createEK(tmpl tpm2.TPMTPublic) (*tpm2.CreatePrimaryResponse, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tmpl),
	}.Execute(t.tp)
	if err != nil {
		return nil, fmt.Errorf("tpm: create ek: %w", err)
	}
	return rsp, nil
}

// ActivateCredential answers a credential-activation challenge
// (tpmcred.Challenge encoding, docs/spec/platform-tpm.md section 2.1): it
// checks that the challenge names this TPM's AK, re-creates the
// default-template EK whose Name the challenge gives, runs
// TPM2_ActivateCredential with the AK (empty auth) and the EK (a policy
// session satisfying PolicySecret(TPM_RH_ENDORSEMENT)), and returns the
// recovered secret for the verifier to check.
func (t *TPM) ActivateCredential(ctx context.Context, challenge []byte) ([]byte, error) {
	ch, err := tpmcred.ParseChallenge(challenge)
	if err != nil {
		return nil, err
	}
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !bytes.Equal(ch.AKName, t.ak.Name.Buffer) {
		return nil, ErrChallengeAK
	}
	var ek *tpm2.CreatePrimaryResponse
	for _, tmpl := range ekTemplates() {
		rsp, err := t.createEK(tmpl)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(rsp.Name.Buffer, ch.EKName) {
			ek = rsp
			break
		}
		t.flush(rsp.ObjectHandle)
	}
	if ek == nil {
		return nil, ErrChallengeEK
	}
	defer t.flush(ek.ObjectHandle)

	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: t.ak.Handle, Name: t.ak.Name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle: tpm2.AuthHandle{
			Handle: ek.ObjectHandle,
			Name:   ek.Name,
			Auth:   tpm2.Policy(tpm2.TPMAlgSHA256, 16, endorsementSecret),
		},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: ch.CredentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: ch.EncryptedSecret},
	}.Execute(t.tp)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrActivation, err)
	}
	if len(rsp.CertInfo.Buffer) != tpmcred.SecretSize {
		return nil, fmt.Errorf("%w: activation returned %d bytes", errUnexpectedTPM, len(rsp.CertInfo.Buffer))
	}
	return slices.Clone(rsp.CertInfo.Buffer), nil
}

// endorsementSecret satisfies the default EK policy:
// TPM2_PolicySecret(TPM_RH_ENDORSEMENT) with the (empty) endorsement auth.
func endorsementSecret(tp transport.TPM, sess tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{
		AuthHandle:    tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		PolicySession: sess,
		NonceTPM:      nonceTPM,
	}.Execute(tp)
	return err
}
