package platform

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/teeclaims"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// SEVSNPClaims are the verified SEV-SNP report fields not in Result itself.
type SEVSNPClaims struct {
	// ProductLine is the AMD product line whose roots verified the report
	// ("Milan", "Genoa", "Turin").
	ProductLine string
	// Signer is "vcek" or "vlek".
	Signer       string
	Version      uint32
	GuestSVN     uint32
	Policy       uint64
	VMPL         uint32
	FamilyID     []byte
	ImageID      []byte
	ReportID     []byte
	IDKeyDigest  []byte
	AuthorKey    []byte
	PlatformInfo uint64
	CurrentTCB   uint64
	CommittedTCB uint64
	LaunchTCB    uint64
	ReportedTCB  uint64
	// Firmware is the current firmware version "major.minor.build" (report
	// version 3 and later; "0.0.0" for version 2).
	Firmware string
}

// snpVerified keeps what CheckPolicy hands to go-sev-guest's validate.
type snpVerified struct {
	att *spb.Attestation
}

func verifySEVSNP(ev *evidence.Evidence, want [64]byte, now time.Time, opts *Options) (*Result, error) {
	if err := refuseUnallowedSimulated(ev, opts); err != nil {
		return nil, err
	}
	p, err := snpevidence.ParseWith(ev, snpevidence.ParseOptions{ParseCertificate: opts.CertCache.ParseCertificate})
	if errors.Is(err, snpevidence.ErrUnknownFormat) {
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: %w", errUnsupported, err))
	}
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	att, err := p.Attestation()
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	report := att.GetReport()

	// Trust anchors: chosen by the Simulated flag and the product line, never
	// by the certificates the evidence carries.
	line, err := SNPProductLine(report, p)
	if err != nil {
		return nil, err
	}
	rs, err := rootsOrErr()
	if err != nil {
		return nil, err
	}
	table := rs.amd
	if ev.Simulated {
		table = rs.amdSim
	}
	root := table[line]
	if root == nil {
		return nil, cannotCheck(checkProduct, fmt.Errorf("no pinned root for product line %q (simulated %v)", line, ev.Simulated))
	}

	// The endorsement certificate certifies one chip at one TCB: the report
	// must claim the same. Checked before the chain so that a certificate
	// for another chip or TCB is refused for that, whatever else is wrong
	// with it; nothing is accepted before the chain and signature checks.
	if err := checkSNPEndorsement(report, p, root, line); err != nil {
		return nil, err
	}
	var key [32]byte
	var entry *chainEntry
	if opts.CertCache != nil {
		key = snpCacheKey(ev, p, root, opts.Collateral)
		entry = opts.CertCache.get(key, now)
	}
	if entry != nil {
		// The chain is the one verified before; the report is new.
		if err := verify.SnpReportSignature(p.Report, entry.leaf); err != nil {
			return nil, rejected(checkSignature, err)
		}
	} else {
		if entry, err = verifySNPChain(att, p, root, line, now, opts); err != nil {
			return nil, err
		}
		opts.CertCache.put(key, entry)
	}
	chipID := report.GetChipId()
	if err := checkReportData(report.GetReportData(), want, opts); err != nil {
		return nil, err
	}
	if entry.revocation == StatusSkipped && !opts.AllowUncheckedRevocation {
		return nil, cannotCheck(checkRevocation, fmt.Errorf("%w: no crl signed by the %s root was supplied", errMissingCollateral, root.rootID))
	}

	pol, err := abi.ParseSnpPolicy(report.GetPolicy())
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	res := &Result{
		Platform:    evidence.PlatformSEVSNP,
		Format:      ev.Format,
		Simulated:   ev.Simulated,
		Measurement: clone(report.GetMeasurement()),
		HostData:    clone(report.GetHostData()),
		TCB:         fmt.Sprintf("%016x", report.GetReportedTcb()),
		Debug:       pol.Debug,
		RootID:      entry.rootID,
		Revocation:  entry.revocation,
		Collateral:  statusNotApplicable,
		SEVSNP: &SEVSNPClaims{
			ProductLine:  line,
			Signer:       signerName(p.Signer),
			Version:      report.GetVersion(),
			GuestSVN:     report.GetGuestSvn(),
			Policy:       report.GetPolicy(),
			VMPL:         report.GetVmpl(),
			FamilyID:     clone(report.GetFamilyId()),
			ImageID:      clone(report.GetImageId()),
			ReportID:     clone(report.GetReportId()),
			IDKeyDigest:  clone(report.GetIdKeyDigest()),
			AuthorKey:    clone(report.GetAuthorKeyDigest()),
			PlatformInfo: report.GetPlatformInfo(),
			CurrentTCB:   report.GetCurrentTcb(),
			CommittedTCB: report.GetCommittedTcb(),
			LaunchTCB:    report.GetLaunchTcb(),
			ReportedTCB:  report.GetReportedTcb(),
			Firmware:     fmt.Sprintf("%d.%d.%d", report.GetCurrentMajor(), report.GetCurrentMinor(), report.GetCurrentBuild()),
		},
		snp: &snpVerified{att: att},
	}
	// The TEE claims, from the parse and report decoded above; a failure
	// is left to a caller that derives them itself, to report.
	if c, err := teeclaims.DeriveWith(ev, teeclaims.Options{SEVSNP: p, SEVSNPReport: report}); err == nil {
		res.TEEClaims = c
	}
	copy(res.ReportData[:], report.GetReportData())
	if !allZero(chipID) {
		res.ChipID = clone(chipID)
	}
	return res, nil
}

// Endorsement-binding defects (checkSNPEndorsement); each error names
// every one the certificate has.
var (
	errHWIDMismatch = errors.New("vcek hwid is not the report's chip_id")
	errTCBMismatch  = errors.New("certificate tcb is not the report's reported_tcb")
)

// kdsHWIDOID is the VCEK's hwid extension (AMD KDS specification).
var kdsHWIDOID = []int{1, 3, 6, 1, 4, 1, 3704, 1, 4}

// checkSNPEndorsement compares the (not yet verified) endorsement
// certificate with the pinned hierarchy and the report: its issuer must be
// the pinned ASK (VCEK) or ASVK (VLEK) of root, a VCEK's hwid must be
// CHIP_ID (unless the report masks it to zero), and its TCB must be
// REPORTED_TCB. The error names each mismatch with both values, and the
// hwid's encoding: the 64 bytes as the extension value (what AMD's KDS
// issues) or a DER OCTET STRING around them.
func checkSNPEndorsement(report *spb.Report, p *snpevidence.Parsed, root *amdRoot, line string) error {
	ica := root.certs.Ask
	if p.Signer == abi.VlekReportSigner {
		ica = root.certs.Asvk
	}
	if ica == nil {
		return cannotCheck(checkRoot, fmt.Errorf("%s has no pinned intermediate for %v", root.rootID, p.Signer))
	}
	if !bytes.Equal(p.Leaf.RawIssuer, ica.RawSubject) {
		return rejected(checkRoot, fmt.Errorf("%w: %v certificate is not issued under %s", ErrUntrustedRoot, p.Signer, root.rootID))
	}
	exts, err := kds.CertificateExtensions(p.Leaf, p.Signer)
	if err != nil {
		return rejected(checkBinding, fmt.Errorf("%v certificate extensions: %v", p.Signer, err))
	}
	var hwid, tcb error
	chipID := report.GetChipId()
	if p.Signer == abi.VcekReportSigner && !allZero(chipID) && !bytes.Equal(chipID, exts.HWID) {
		enc := "der octet string"
		for _, e := range p.Leaf.Extensions {
			if e.Id.Equal(kdsHWIDOID) && len(e.Value) == len(exts.HWID) {
				enc = "raw 64-byte value"
			}
		}
		hwid = fmt.Errorf("%w: chip_id %x..., hwid %x... (%s)", errHWIDMismatch, chipID[:8], exts.HWID[:8], enc)
	}
	if got := uint64(exts.TCBVersion); report.GetReportedTcb() != got {
		tcb = fmt.Errorf("%w: %s %s, report %s", errTCBMismatch, signerName(p.Signer),
			tcbString(got, line), tcbString(report.GetReportedTcb(), line))
	}
	switch {
	case hwid != nil && tcb != nil:
		return rejected(checkBinding, fmt.Errorf("%w; %w", hwid, tcb))
	case hwid != nil:
		return rejected(checkBinding, hwid)
	case tcb != nil:
		return rejected(checkBinding, tcb)
	}
	return nil
}

// tcbString shows a TCB_VERSION as hex and, on Milan and Genoa, as its
// security patch levels (Turin's layout differs).
func tcbString(tcb uint64, line string) string {
	if line != "Milan" && line != "Genoa" {
		return fmt.Sprintf("%016x", tcb)
	}
	p := kds.DecomposeTCBVersion(kds.TCBVersion(tcb))
	return fmt.Sprintf("%016x (bl %d tee %d snp %d ucode %d)", tcb, p.BlSpl, p.TeeSpl, p.SnpSpl, p.UcodeSpl)
}

// SNPProductLine returns the AMD product line of an SEV-SNP report: from
// CPUID_1_EAX_FMS (report version 3 and later) or, for version 2, from the
// endorsement leaf's product name. Errors are *Error values (checkChain when
// the leaf's extensions cannot be read, checkProduct otherwise). The
// collateral fetcher uses it too, so it fetches the chain this package
// verifies against.
func SNPProductLine(report *spb.Report, p *snpevidence.Parsed) (string, error) {
	var line string
	if fms := report.GetCpuid1EaxFms(); fms != 0 {
		line = kds.ProductLineFromFms(fms)
	} else {
		exts, err := kds.CertificateExtensions(p.Leaf, p.Signer)
		if err != nil {
			return "", rejected(checkChain, fmt.Errorf("%v certificate extensions: %v", p.Signer, err))
		}
		product, err := kds.ParseProductName(exts.ProductName, p.Signer)
		if err != nil {
			return "", cannotCheck(checkProduct, err)
		}
		line = kds.ProductLine(product)
	}
	if line == "" || line == "Unknown" {
		return "", cannotCheck(checkProduct, errors.New("unknown amd product line"))
	}
	return line, nil
}

// verifySNPChain verifies the endorsement chain and the report signature
// with go-sev-guest (offline, pinned roots only), then revocation.
func verifySNPChain(att *spb.Attestation, p *snpevidence.Parsed, root *amdRoot, line string, now time.Time, opts *Options) (*chainEntry, error) {
	vopts := &verify.Options{
		DisableCertFetching: true,
		Now:                 now,
		TrustedRoots:        map[string][]*trust.AMDRootCerts{line: {root.rootCerts()}},
		Getter:              refuseGetter{},
	}
	if err := guard(checkSignature, func() error { return verify.SnpAttestation(att, vopts) }); err != nil {
		return nil, diagnoseSNP(err, p, root, now)
	}
	exts, err := kds.CertificateExtensions(p.Leaf, p.Signer)
	if err != nil {
		return nil, rejected(checkChain, err)
	}
	ica := root.certs.Ask
	if p.Signer == abi.VlekReportSigner {
		ica = root.certs.Asvk
	}
	e := &chainEntry{leaf: p.Leaf, exts: exts, rootID: root.rootID, notBefore: p.Leaf.NotBefore, notAfter: p.Leaf.NotAfter}
	e.narrow(ica.NotBefore, ica.NotAfter)
	e.narrow(root.certs.Ark.NotBefore, root.certs.Ark.NotAfter)

	e.revocation = StatusSkipped
	if opts.Collateral != nil {
		for i, der := range opts.Collateral.SEVSNPCRLs {
			if len(der) > MaxCollateralFile {
				return nil, cannotCheck(checkRevocation, fmt.Errorf("crl %d is %d bytes, limit %d", i, len(der), MaxCollateralFile))
			}
			crl, err := x509.ParseRevocationList(der)
			if err != nil {
				return nil, cannotCheck(checkRevocation, fmt.Errorf("crl %d: %v", i, err))
			}
			if crl.CheckSignatureFrom(root.certs.Ark) != nil {
				continue // another product's CRL
			}
			if err := crlScopeOK(crl); err != nil {
				return nil, cannotCheck(checkRevocation, fmt.Errorf("crl %d: %w", i, err))
			}
			if now.Before(crl.ThisUpdate) || crl.NextUpdate.IsZero() || now.After(crl.NextUpdate) {
				return nil, rejected(checkRevocation, fmt.Errorf("%w: amd crl valid %s to %s", errCollateralExpired,
					crl.ThisUpdate.UTC().Format(time.RFC3339), crl.NextUpdate.UTC().Format(time.RFC3339)))
			}
			for _, rc := range crl.RevokedCertificateEntries {
				if rc.SerialNumber == nil {
					continue
				}
				if rc.SerialNumber.Cmp(ica.SerialNumber) == 0 || rc.SerialNumber.Cmp(p.Leaf.SerialNumber) == 0 {
					return nil, rejected(checkRevocation, ErrRevoked)
				}
			}
			e.narrow(crl.ThisUpdate, crl.NextUpdate)
			e.revocation = StatusChecked
		}
	}
	return e, nil
}

func (e *chainEntry) narrow(from, to time.Time) {
	if from.After(e.notBefore) {
		e.notBefore = from
	}
	if to.Before(e.notAfter) {
		e.notAfter = to
	}
}

// diagnoseSNP names the check that made go-sev-guest refuse the evidence:
// the chain to the pinned root, then the report signature, else the
// endorsement certificate's profile.
func diagnoseSNP(libErr error, p *snpevidence.Parsed, root *amdRoot, now time.Time) error {
	if errors.Is(libErr, errInternal) {
		return libErr
	}
	xo := root.certs.X509Options(now, p.Signer)
	if xo == nil {
		return cannotCheck(checkRoot, fmt.Errorf("%s has no pinned intermediate for %v", root.rootID, p.Signer))
	}
	if _, err := p.Leaf.Verify(*xo); err != nil {
		ica := root.certs.Ask
		if p.Signer == abi.VlekReportSigner {
			ica = root.certs.Asvk
		}
		if !bytes.Equal(p.Leaf.RawIssuer, ica.RawSubject) {
			return rejected(checkRoot, fmt.Errorf("%w: %v certificate is not issued under %s", ErrUntrustedRoot, p.Signer, root.rootID))
		}
		return rejected(checkChain, err)
	}
	if err := verify.SnpReportSignature(p.Report, p.Leaf); err != nil {
		return rejected(checkSignature, err)
	}
	return rejected(checkChain, libErr)
}

func snpCacheKey(ev *evidence.Evidence, p *snpevidence.Parsed, root *amdRoot, c *Collateral) [32]byte {
	k := newCacheKey("sev-snp")
	k.add([]byte(root.rootID))
	k.add([]byte{byte(p.Signer)})
	for _, der := range ev.CertChain {
		k.add(der)
	}
	k.add(ev.Aux[snpevidence.AuxCertTable])
	if c != nil {
		for _, crl := range c.SEVSNPCRLs {
			k.add(crl)
		}
	}
	return k.sum()
}

func signerName(s abi.ReportSigner) string {
	if s == abi.VlekReportSigner {
		return "vlek"
	}
	return "vcek"
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// refuseGetter is handed to go-sev-guest so that nothing it does can reach
// the network, whatever its options say.
type refuseGetter struct{}

func (refuseGetter) Get(string) ([]byte, error) {
	return nil, errors.New("offline: network access refused")
}
