// Package tpmquote parses and verifies TPM 2.0 quote evidence
// (Evidence.Format "tpm2/quote", docs/spec/platform-tpm.md).
//
// It is pure: no device, transport or network code, so verify/ can import it.
// Verify checks what the evidence itself proves (the AK signature over the
// exact TPMS_ATTEST bytes, the qualifying data, the PCR values and the AK's
// attributes). It does not establish AK provenance (that the AK lives in a
// genuine TPM): the caller passes the AK Names it trusts, see the spec.
package tpmquote

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/clawea/attester/wire/evidence"
)

// Format is Evidence.Format for a TPM 2.0 quote.
const Format = "tpm2/quote"

// Evidence.Aux names.
const (
	AuxAKPublic  = "ak_public"  // TPMT_PUBLIC of the attestation key
	AuxPCRValues = "pcr_values" // PCRValues encoding
	AuxEventLog  = "event_log"  // TCG event log, as read (not verified here)
	AuxAKCert    = "ak_cert"    // X.509 certificate of the AK, DER, as read from NV (not verified here)
)

// Errors. Every verification failure wraps exactly one of these, so callers
// branch with errors.Is.
var (
	ErrMalformed       = errors.New("tpmquote: malformed evidence")
	errTooLarge        = errors.New("tpmquote: evidence field too large")
	ErrUnsupported     = errors.New("tpmquote: unsupported evidence")
	ErrSimulated       = errors.New("tpmquote: simulated evidence not allowed")
	ErrAKAttributes    = errors.New("tpmquote: key is not a restricted attestation key")
	ErrSignerMismatch  = errors.New("tpmquote: quote signer is not the endorsement-hierarchy primary ak")
	ErrBadSignature    = errors.New("tpmquote: quote signature does not verify")
	ErrQualifyingData  = errors.New("tpmquote: qualifying data does not match report data")
	ErrPCRMismatch     = errors.New("tpmquote: pcr values do not match the quote")
	ErrMissingAuxField = errors.New("tpmquote: missing aux field")
	ErrUntrustedAK     = errors.New("tpmquote: attestation key is not trusted")
	ErrOptions         = errors.New("tpmquote: contradictory verify options")
)

// VerifyOpts relaxes Verify. The zero value is the strictest.
type VerifyOpts struct {
	// TrustedAKNames are the TPM Names (verified.AKName form) of attestation
	// keys whose provenance the caller has established: certified through
	// the EK (credential activation at enrollment) or pinned by the
	// operator. The AK must be one of them.
	TrustedAKNames [][]byte
	// AllowUntrustedAK accepts any AK. The result then only shows that some
	// key with TPM attestation-key attributes signed the quote, not that a
	// TPM did: for tests and for enrollment that pins verified.AKName. It
	// must not be combined with TrustedAKNames.
	AllowUntrustedAK bool
	// AllowSimulated accepts evidence marked Simulated (swtpm in tests).
	AllowSimulated bool
}

// verified is what Verify established. Every field was computed from the
// exact bytes that the AK signature covers (or, for PCRs, whose digest it
// covers).
type verified struct {
	// AKPublic is the parsed attestation key; AKName its TPM Name.
	AKPublic *Public
	AKName   []byte
	// Attest is the signed TPMS_ATTEST.
	Attest *Attest
	// PCRs are the quoted PCR values, ascending by index.
	PCRs PCRValues
	// Simulated echoes Evidence.Simulated (only true with AllowSimulated).
	Simulated bool
}

// Verify checks TPM quote evidence against rd:
//
//   - platform "tpm", format "tpm2/quote", Simulated only with AllowSimulated;
//   - the AK's Name is in TrustedAKNames (unless AllowUntrustedAK);
//   - ak_public is an ECC P-256/ECDSA-SHA256 or RSA/RSASSA-SHA256 key with the
//     restricted signing attributes and without decrypt;
//   - Signature is a valid AK signature over SHA-256(Blob);
//   - Blob is a quote whose qualifiedSigner is the AK as a primary object of
//     the endorsement hierarchy and whose extraData equals rd.QualifyingData();
//   - pcr_values name exactly the quoted selection and hash to pcrDigest.
//
// It does not check the EK certificate or the event log, and establishes AK
// provenance only through TrustedAKNames.
func Verify(ev *evidence.Evidence, rd evidence.ReportData, opts VerifyOpts) (*verified, error) {
	if opts.AllowUntrustedAK == (len(opts.TrustedAKNames) > 0) {
		return nil, fmt.Errorf("%w: set exactly one of TrustedAKNames and AllowUntrustedAK", ErrOptions)
	}
	if ev == nil {
		return nil, fmt.Errorf("%w: nil evidence", ErrMalformed)
	}
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	if ev.Platform != evidence.PlatformTPM || ev.Format != Format {
		return nil, fmt.Errorf("%w: platform %q format %q", ErrUnsupported, ev.Platform, ev.Format)
	}
	if ev.Simulated && !opts.AllowSimulated {
		return nil, ErrSimulated
	}
	akBytes, ok := ev.Aux[AuxAKPublic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrMissingAuxField, AuxAKPublic)
	}
	pcrBytes, ok := ev.Aux[AuxPCRValues]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrMissingAuxField, AuxPCRValues)
	}
	if len(ev.Blob) > maxAttestSize || len(ev.Signature) > maxSignatureSize {
		return nil, fmt.Errorf("%w: attest %d bytes, signature %d bytes", errTooLarge, len(ev.Blob), len(ev.Signature))
	}
	if len(ev.Aux[AuxEventLog]) > MaxEventLogSize {
		return nil, fmt.Errorf("%w: event log", errTooLarge)
	}
	if len(ev.Aux[AuxAKCert]) > MaxCertSize {
		return nil, fmt.Errorf("%w: ak certificate", errTooLarge)
	}
	if len(ev.CertChain) > maxCertChain {
		return nil, fmt.Errorf("%w: %d certificates", errTooLarge, len(ev.CertChain))
	}
	for _, c := range ev.CertChain {
		if len(c) > MaxCertSize {
			return nil, fmt.Errorf("%w: certificate is %d bytes", errTooLarge, len(c))
		}
	}

	ak, err := ParseAK(akBytes)
	if err != nil {
		return nil, fmt.Errorf("ak public: %w", err)
	}
	name := ak.Name()
	if !opts.AllowUntrustedAK && !slices.ContainsFunc(opts.TrustedAKNames, func(n []byte) bool { return bytes.Equal(n, name) }) {
		return nil, fmt.Errorf("%w: ak name %x", ErrUntrustedAK, name)
	}
	sig, err := parseSignature(ev.Signature)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if err := verifySignature(ak, ev.Blob, sig); err != nil {
		return nil, err
	}
	// From here on the bytes are AK-signed.
	att, err := ParseAttest(ev.Blob)
	if err != nil {
		return nil, fmt.Errorf("attest: %w", err)
	}
	if subtle.ConstantTimeCompare(att.QualifiedSigner, primaryQualifiedName(handleEndorsement, name)) != 1 {
		return nil, ErrSignerMismatch
	}
	qd := rd.QualifyingData()
	if subtle.ConstantTimeCompare(att.ExtraData, qd[:]) != 1 {
		return nil, ErrQualifyingData
	}
	pcrs, err := ParsePCRValues(pcrBytes)
	if err != nil {
		return nil, fmt.Errorf("pcr values: %w", err)
	}
	if !slices.Equal(pcrs.Indices(), att.PCRs) {
		return nil, fmt.Errorf("%w: selection differs", ErrPCRMismatch)
	}
	d := pcrs.Digest()
	if subtle.ConstantTimeCompare(att.PCRDigest, d[:]) != 1 {
		return nil, fmt.Errorf("%w: digest differs", ErrPCRMismatch)
	}
	return &verified{AKPublic: ak, AKName: name, Attest: att, PCRs: pcrs, Simulated: ev.Simulated}, nil
}

// verifySignature checks sig, made by ak's scheme, over SHA-256(msg).
func verifySignature(ak *Public, msg []byte, sig *signature) error {
	pub, err := ak.CryptoPublicKey()
	if err != nil {
		return err
	}
	digest := sha256.Sum256(msg)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if sig.Alg != algECDSA {
			return fmt.Errorf("%w: signature alg does not match the key", ErrBadSignature)
		}
		r, s := new(big.Int).SetBytes(sig.R), new(big.Int).SetBytes(sig.S)
		if !ecdsa.Verify(k, digest[:], r, s) {
			return ErrBadSignature
		}
	case *rsa.PublicKey:
		if sig.Alg != algRSASSA {
			return fmt.Errorf("%w: signature alg does not match the key", ErrBadSignature)
		}
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig.Sig) != nil {
			return ErrBadSignature
		}
	default:
		return fmt.Errorf("%w: key type", ErrUnsupported)
	}
	return nil
}

// CryptoPublicKey returns p as *ecdsa.PublicKey or *rsa.PublicKey, checking
// that an ECC point is on the curve.
func (p *Public) CryptoPublicKey() (crypto.PublicKey, error) {
	switch p.Type {
	case AlgECC:
		if len(p.X) != 32 || len(p.Y) != 32 {
			return nil, fmt.Errorf("%w: ecc point size", ErrMalformed)
		}
		pt := append(append([]byte{4}, p.X...), p.Y...)
		k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
		if err != nil {
			return nil, fmt.Errorf("%w: ecc point is not on p-256", ErrMalformed)
		}
		return k, nil
	case algRSA:
		if len(p.N) == 0 {
			return nil, fmt.Errorf("%w: empty rsa modulus", ErrMalformed)
		}
		e := int(p.Exponent)
		if e == 0 {
			e = 65537
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(p.N), E: e}, nil
	}
	return nil, fmt.Errorf("%w: key type 0x%04x", ErrUnsupported, p.Type)
}
