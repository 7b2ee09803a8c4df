// Package tpmcred is the verifier side of TPM 2.0 credential activation
// (docs/spec/platform-tpm.md section 2.1): it makes a credential for an
// attestation key (AK) Name, encrypted to an endorsement key (EK) taken from
// its certificate (TPM2_MakeCredential computed in software, TPM 2.0 Part 1
// section 24), checks the secret the TPM returns from TPM2_ActivateCredential,
// and encodes and verifies the certification record that an activation
// leaves for offline verifiers.
//
// It is pure: no device or transport code. The attester side is
// enclave/tpm (TPM.ActivateCredential).
package tpmcred

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/google/go-tpm/tpm2"
	"golang.org/x/crypto/cryptobyte"

	"github.com/clawea/attester/wire/tpmquote"
)

// Version labels, the first bytes of each encoding.
const (
	challengeLabel     = "clawea.dev/attester/v1/tpm-activate"
	CertificationLabel = "clawea.dev/attester/v1/tpm-ak-certification"
)

// Sizes and limits.
const (
	// SecretSize is the size of the credential (the secret the TPM
	// releases).
	SecretSize = 32
	// nameSize is a SHA-256 TPM Name: 0x000B || digest.
	nameSize = 2 + 32
	// maxCredentialBlobSize bounds TPM2B_ID_OBJECT contents (an HMAC and an
	// encrypted TPM2B_DIGEST).
	maxCredentialBlobSize = 256
	// maxEncryptedSecretSize bounds TPM2B_ENCRYPTED_SECRET contents (an
	// RSA-2048 OAEP ciphertext or an ECC point).
	maxEncryptedSecretSize = 512
	// maxIntermediates bounds the EK certificate's intermediates in a
	// certification record.
	maxIntermediates = 3
	// maxCertificationSize bounds a whole certification record.
	maxCertificationSize = 80 << 10
)

// Errors. Callers branch with errors.Is.
var (
	ErrMalformed     = errors.New("tpmcred: malformed encoding")
	errUnsupportedEK = errors.New("tpmcred: unsupported endorsement key")
	errAK            = errors.New("tpmcred: not an acceptable attestation key")
	ErrActivation    = errors.New("tpmcred: activation response does not match the credential")
	ErrUsed          = errors.New("tpmcred: activation already checked")
	ErrEKChain       = errors.New("tpmcred: ek certificate does not chain to a trusted root")
	ErrOptions       = errors.New("tpmcred: invalid options")
)

// EKPublic returns the EK public area that the TCG default EK templates give
// for pub (TCG EK Credential Profile 2.0, templates L-1 and L-2): RSA 2048
// with exponent 65537, or ECC NIST P-256; SHA-256 name algorithm,
// AES-128-CFB symmetric protection and the PolicySecret(TPM_RH_ENDORSEMENT)
// auth policy. Other keys fail with errUnsupportedEK.
func EKPublic(pub crypto.PublicKey) (*tpm2.TPMTPublic, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() != 2048 || k.E != 65537 {
			return nil, fmt.Errorf("%w: rsa %d bits, exponent %d", errUnsupportedEK, k.N.BitLen(), k.E)
		}
		t := tpm2.RSAEKTemplate // a copy: the package variable is not touched
		t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: k.N.FillBytes(make([]byte, 256))})
		return &t, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ecc curve %s", errUnsupportedEK, k.Curve.Params().Name)
		}
		b, err := k.Bytes() // checks the point
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnsupportedEK, err)
		}
		t := tpm2.ECCEKTemplate
		t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
			X: tpm2.TPM2BECCParameter{Buffer: b[1:33]},
			Y: tpm2.TPM2BECCParameter{Buffer: b[33:]},
		})
		return &t, nil
	}
	return nil, fmt.Errorf("%w: key type %T", errUnsupportedEK, pub)
}

// name returns the TPM Name of a public area.
func name(pub *tpm2.TPMTPublic) ([]byte, error) {
	n, err := tpm2.ObjectName(pub)
	if err != nil {
		return nil, err
	}
	return slices.Clone(n.Buffer), nil
}

// Challenge is what a verifier sends to the attester: a credential that only
// the TPM holding the EK can decrypt, and only while an object named AKName
// is loaded in it.
type Challenge struct {
	// AKName is the Name of the attestation key the credential is bound to.
	AKName []byte
	// EKName is the Name of the EK the credential is encrypted to, so the
	// attester picks (and the verifier names) one EK.
	EKName []byte
	// CredentialBlob is the TPM2B_ID_OBJECT contents; EncryptedSecret the
	// TPM2B_ENCRYPTED_SECRET contents.
	CredentialBlob  []byte
	EncryptedSecret []byte
}

// Marshal encodes c (spec section 2.1).
func (c *Challenge) Marshal() []byte {
	b := append([]byte(challengeLabel), 0)
	for _, f := range [][]byte{c.AKName, c.EKName, c.CredentialBlob, c.EncryptedSecret} {
		b = put2b(b, f)
	}
	return b
}

// ParseChallenge parses a Challenge strictly: version label, both Names 34
// bytes starting 0x000B, blob and secret non-empty and within their limits,
// no trailing bytes.
func ParseChallenge(b []byte) (*Challenge, error) {
	s := cryptobyte.String(b)
	var ak, ek, blob, secret cryptobyte.String
	if !readLabel(&s, challengeLabel) {
		return nil, malformed("version label")
	}
	if !s.ReadUint16LengthPrefixed(&ak) || !s.ReadUint16LengthPrefixed(&ek) ||
		!s.ReadUint16LengthPrefixed(&blob) || !s.ReadUint16LengthPrefixed(&secret) {
		return nil, malformed("challenge truncated")
	}
	if !s.Empty() {
		return nil, malformed("%d trailing bytes", len(s))
	}
	if err := cmp.Or(checkName(ak, "ak name"), checkName(ek, "ek name"),
		checkField(blob, maxCredentialBlobSize, "credential blob"),
		checkField(secret, maxEncryptedSecretSize, "encrypted secret")); err != nil {
		return nil, err
	}
	return &Challenge{AKName: slices.Clone(ak), EKName: slices.Clone(ek),
		CredentialBlob: slices.Clone(blob), EncryptedSecret: slices.Clone(secret)}, nil
}

// Activation is one verifier-side credential activation: made by
// NewActivation, checked once by Check. The secret never leaves it.
type Activation struct {
	ak       []byte // TPMT_PUBLIC
	akName   []byte
	ekCert   []byte // DER, nil for NewActivationForEK
	secret   [SecretSize]byte
	finished bool
}

// NewActivation makes a credential for the AK whose TPMT_PUBLIC is akPublic,
// encrypted to the EK certified by ekCertDER (a TCG default template EK, see
// EKPublic). The AK must parse as an attestation key (tpmquote.ParseAK).
// rand supplies the secret and the encryption randomness (crypto/rand.Reader
// outside tests).
func NewActivation(rand io.Reader, ekCertDER, akPublic []byte) (*Activation, *Challenge, error) {
	if len(ekCertDER) > tpmquote.MaxCertSize {
		return nil, nil, fmt.Errorf("%w: ek certificate is %d bytes", ErrMalformed, len(ekCertDER))
	}
	cert, err := x509.ParseCertificate(ekCertDER)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: ek certificate: %v", ErrMalformed, err)
	}
	ek, err := EKPublic(cert.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	a, c, err := NewActivationForEK(rand, ek, akPublic)
	if err != nil {
		return nil, nil, err
	}
	a.ekCert = slices.Clone(ekCertDER)
	return a, c, nil
}

// NewActivationForEK is NewActivation for an EK public area known without a
// certificate (a pinned EK). The EK must be a restricted decryption key with
// fixedTPM, fixedParent and sensitiveDataOrigin (the TPM itself refuses
// keys that are not restricted decryption keys). Its Check result has no EK
// certificate, so it cannot become a certification record.
func NewActivationForEK(rand io.Reader, ek *tpm2.TPMTPublic, akPublic []byte) (*Activation, *Challenge, error) {
	_, akName, err := checkAK(akPublic)
	if err != nil {
		return nil, nil, err
	}
	if a := ek.ObjectAttributes; !a.FixedTPM || !a.FixedParent || !a.SensitiveDataOrigin || !a.Restricted || !a.Decrypt || a.SignEncrypt {
		return nil, nil, fmt.Errorf("%w: not a restricted decryption key made in and fixed to a tpm", errUnsupportedEK)
	}
	ekName, err := name(ek)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUnsupportedEK, err)
	}
	key, err := tpm2.ImportEncapsulationKey(ek)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUnsupportedEK, err)
	}
	a := &Activation{ak: slices.Clone(akPublic), akName: akName}
	if _, err := io.ReadFull(rand, a.secret[:]); err != nil {
		return nil, nil, fmt.Errorf("tpmcred: secret: %w", err)
	}
	blob, encSecret, err := tpm2.CreateCredential(rand, key, akName, a.secret[:])
	if err != nil {
		return nil, nil, fmt.Errorf("tpmcred: make credential: %w", err)
	}
	if len(blob) > maxCredentialBlobSize || len(encSecret) > maxEncryptedSecretSize {
		return nil, nil, fmt.Errorf("%w: credential sizes %d, %d", errUnsupportedEK, len(blob), len(encSecret))
	}
	return a, &Challenge{AKName: akName, EKName: ekName, CredentialBlob: blob, EncryptedSecret: encSecret}, nil
}

// checkAK parses an AK public area and checks its attributes.
func checkAK(akPublic []byte) (*tpmquote.Public, []byte, error) {
	ak, err := tpmquote.ParseAK(akPublic)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errAK, err)
	}
	return ak, ak.Name(), nil
}

// Certified is the result of a successful activation.
type Certified struct {
	// AKPublic is the AK's TPMT_PUBLIC and AKName its Name.
	AKPublic []byte
	AKName   []byte
	// EKCert is the EK certificate DER the credential was encrypted to
	// (nil for NewActivationForEK).
	EKCert []byte
}

// Check compares the attester's response with the secret in constant time.
// An Activation is checked at most once: a second call fails with ErrUsed,
// so a response cannot be guessed by repeated tries.
func (a *Activation) Check(response []byte) (*Certified, error) {
	if a.finished {
		return nil, ErrUsed
	}
	a.finished = true
	ok := len(response) == SecretSize && subtle.ConstantTimeCompare(response, a.secret[:]) == 1
	clear(a.secret[:])
	if !ok {
		return nil, ErrActivation
	}
	return &Certified{AKPublic: slices.Clone(a.ak), AKName: slices.Clone(a.akName), EKCert: slices.Clone(a.ekCert)}, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// readLabel reads the version label l and its NUL terminator.
func readLabel(s *cryptobyte.String, l string) bool {
	var got []byte
	return s.ReadBytes(&got, len(l)+1) && string(got[:len(l)]) == l && got[len(l)] == 0
}

// checkField checks a length-prefixed field: 1..max bytes.
func checkField(v []byte, max int, what string) error {
	if len(v) == 0 || len(v) > max {
		return malformed("%s: %d bytes, want 1..%d", what, len(v), max)
	}
	return nil
}

// checkName checks a SHA-256 TPM Name: 0x000B || 32-byte digest.
func checkName(v []byte, what string) error {
	if len(v) != nameSize || v[0] != 0x00 || v[1] != 0x0b {
		return malformed("%s: not a sha-256 name", what)
	}
	return nil
}

func put2b(b, v []byte) []byte {
	return append(append(b, byte(len(v)>>8), byte(len(v))), v...)
}
