package platform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

// TPMClaims are the verified TPM quote fields not in Result itself.
type TPMClaims struct {
	// AKName is the attestation key's TPM Name.
	AKName []byte
	// PCRs are the quoted SHA-256 PCR values, ascending by index.
	PCRs tpmquote.PCRValues
	// AKProvenance says why the AK was trusted: "pinned" (its Name is in
	// Options.TrustedTPMAKs), "ek-certified" (a credential-activation record
	// in Options.TPMAKCertifications whose EK certificate chains to
	// Options.TPMEKRoots), "ak-certified" (its certificate chains to a
	// trusted AK CA, akcert.go) or "unpinned" (Options.AllowUntrustedTPMAK).
	AKProvenance string
	// For "ek-certified": EKRootSHA256 is the SHA-256 of the root
	// certificate (DER) the EK certificate chained to, TPM the identity in
	// the EK certificate (nil when it states none), and ActivatedAt and
	// ActivatedBy are copied, unverified, from the record.
	EKRootSHA256 []byte
	TPM          *tpmcred.TPMIdentity
	ActivatedAt  time.Time
	ActivatedBy  string
	// Clock, ResetCount, RestartCount and FirmwareVersion are from the
	// signed TPMS_ATTEST. They are not freshness.
	Clock           uint64
	ResetCount      uint32
	RestartCount    uint32
	FirmwareVersion uint64
}

func verifyTPM(ev *evidence.Evidence, rd evidence.ReportData, opts *Options) (*Result, error) {
	if err := admitQuote(ev, tpmquote.Format, "tpm", rd, opts); err != nil {
		return nil, err
	}
	certified, certErrs, err := certifiedAKs(opts)
	if err != nil {
		return nil, err
	}
	trusted := make([][]byte, 0, len(opts.TrustedTPMAKs)+len(certified)+1)
	if !opts.RequireTPMEKCertifiedAK {
		trusted = append(trusted, opts.TrustedTPMAKs...)
	}
	byCert, err := akFromCert(ev, opts.Now(), opts)
	if err != nil {
		return nil, err
	}
	if byCert != nil {
		trusted = append(trusted, byCert.name)
	}
	for _, c := range certified {
		trusted = append(trusted, c.AKName)
	}
	if !opts.AllowUntrustedTPMAK && len(trusted) == 0 {
		err := fmt.Errorf("%w: %w: no trusted tpm attestation keys configured", ErrUntrustedRoot, tpmquote.ErrUntrustedAK)
		if len(certErrs) > 0 {
			err = fmt.Errorf("%w (certifications: %w)", err, errors.Join(certErrs...))
		}
		return nil, rejected(checkTPMAK, err)
	}
	v, err := tpmquote.Verify(ev, rd, tpmquote.VerifyOpts{
		TrustedAKNames:   trusted,
		AllowUntrustedAK: opts.AllowUntrustedTPMAK,
		AllowSimulated:   opts.AllowSimulated,
	})
	if err != nil {
		if errors.Is(err, tpmquote.ErrUntrustedAK) && len(certErrs) > 0 {
			err = fmt.Errorf("%w (certifications: %w)", err, errors.Join(certErrs...))
		}
		return nil, classifyTPM(err)
	}
	d := v.PCRs.Digest()
	claims := &TPMClaims{
		AKName:          clone(v.AKName),
		AKProvenance:    aKPinned,
		PCRs:            v.PCRs,
		Clock:           v.Attest.Clock,
		ResetCount:      v.Attest.ResetCount,
		RestartCount:    v.Attest.RestartCount,
		FirmwareVersion: v.Attest.FirmwareVersion,
	}
	name := hex.EncodeToString(v.AKName)
	var rootID string
	i := slices.IndexFunc(certified, func(c *tpmcred.CertifiedAK) bool { return bytes.Equal(c.AKName, v.AKName) })
	switch {
	case opts.AllowUntrustedTPMAK:
		claims.AKProvenance = aKUnpinned
		rootID = pick(ev.Simulated, rootIDSimTPMAn, rootIDTPMAny) + name
	case i >= 0:
		c := certified[i]
		sum := sha256.Sum256(c.Root.Raw)
		claims.AKProvenance = aKEKCertified
		claims.EKRootSHA256 = sum[:]
		claims.TPM = c.TPM
		claims.ActivatedAt, claims.ActivatedBy = c.ActivatedAt, c.ActivatedBy
		rootID = pick(ev.Simulated, rootIDSimTPMEK, rootIDTPMEK) + hex.EncodeToString(sum[:]) + ":" + name
	case sameAK(byCert, v.AKName):
		claims.AKProvenance = akCertified
		rootID = byCert.rootID
	default:
		rootID = pick(ev.Simulated, rootIDSimTPM, rootIDTPM) + name
	}
	res := &Result{
		Platform:    evidence.PlatformTPM,
		Format:      ev.Format,
		Simulated:   ev.Simulated,
		ReportData:  rd.Bytes(),
		Measurement: d[:],
		RootID:      rootID,
		Revocation:  statusNotApplicable,
		Collateral:  statusNotApplicable,
		TPM:         claims,
	}
	if log, ok := ev.Aux[tpmquote.AuxEventLog]; ok {
		pcrs := map[int][]byte{}
		for _, p := range v.PCRs {
			if p.Index <= 9 {
				pcrs[p.Index] = clone(p.Value[:])
			}
		}
		if res.Boot, err = replayBootChain(logTPM, log, pcrs); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// AK provenance values (TPMClaims.AKProvenance).
const (
	aKPinned      = "pinned"
	aKEKCertified = "ek-certified"
	aKUnpinned    = "unpinned"
)

// rootIDTPMEK prefixes the RootID of an EK-certified AK:
// "tpm-ek:" || hex(SHA-256(root DER)) || ":" || hex(AK Name).
const (
	rootIDTPMEK    = "tpm-ek:"
	rootIDSimTPMEK = "sim-tpm-ek:"
)

func pick(sim bool, simID, id string) string {
	if sim {
		return simID
	}
	return id
}

// certifiedAKs verifies opts.TPMAKCertifications against opts.TPMEKRoots at
// Now. A record that does not verify certifies nothing; its error is
// returned for the refusal message (one fleet's expired record must not
// fail the verification of another machine's evidence).
func certifiedAKs(opts *Options) ([]*tpmcred.CertifiedAK, []error, error) {
	switch {
	case opts.AllowUntrustedTPMAK && (len(opts.TPMAKCertifications) > 0 || opts.RequireTPMEKCertifiedAK):
		return nil, nil, badOptions("options: AllowUntrustedTPMAK and TPM AK certifications are contradictory")
	case len(opts.TPMAKCertifications) > 0 && opts.TPMEKRoots == nil:
		return nil, nil, badOptions("options: TPMAKCertifications need TPMEKRoots")
	case len(opts.TPMAKCertifications) == 0:
		return nil, nil, nil
	}
	now := opts.Now()
	var (
		out  []*tpmcred.CertifiedAK
		errs []error
	)
	for i, rec := range opts.TPMAKCertifications {
		c, err := tpmcred.VerifyCertification(rec, tpmcred.VerifyOpts{Roots: opts.TPMEKRoots, Now: now})
		if err != nil {
			errs = append(errs, fmt.Errorf("certification %d: %w", i, err))
			continue
		}
		out = append(out, c)
	}
	return out, errs, nil
}

func classifyTPM(err error) error {
	switch {
	case errors.Is(err, tpmquote.ErrUnsupported):
		return cannotCheck(checkFormat, fmt.Errorf("%w: %w", errUnsupported, err))
	case errors.Is(err, tpmquote.ErrSimulated):
		return rejected(CheckSimulated, fmt.Errorf("%w: %w", ErrSimulated, err))
	case errors.Is(err, tpmquote.ErrUntrustedAK):
		return rejected(checkTPMAK, fmt.Errorf("%w: %w", ErrUntrustedRoot, err))
	case errors.Is(err, tpmquote.ErrAKAttributes):
		return rejected(checkTPMAK, err)
	case errors.Is(err, tpmquote.ErrBadSignature), errors.Is(err, tpmquote.ErrSignerMismatch):
		return rejected(checkSignature, err)
	case errors.Is(err, tpmquote.ErrQualifyingData):
		return rejected(CheckReportData, fmt.Errorf("%w: %w", ErrReportData, err))
	case errors.Is(err, tpmquote.ErrOptions):
		return badOptions("%v", err)
	}
	return rejected(checkParse, err)
}
