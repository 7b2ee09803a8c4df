package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/verify/platform"
)

// verifyAzureRaw is the az-snp-vtpm and az-tdx-vtpm formats of packctl
// platform verify: data is confidential-containers/trustee's Azure vTPM
// evidence (JSON, versions 0 to 2; docs/spec/platform-azure.md, section
// 5), nonce the nonce it must carry (nil: not checked), at the
// verification time, coll the --collateral data (nil: revocation and TDX
// TCB collateral unchecked). The evidence carries its VCEK, so certs must
// be nil. It returns the verified result (for --policy), the summary and
// the check lines to print, or a verify/platform error whose class decides
// the exit code.
func verifyAzureRaw(format string, data, nonce, certs []byte, at time.Time, coll *platform.Collateral) (*platform.Result, string, []string, error) {
	if certs != nil {
		return nil, "", nil, fmt.Errorf("%w: --certs: %s evidence carries its own certificates", platform.ErrBadOptions, format)
	}
	opts := platform.Options{
		Now:                      func() time.Time { return at },
		Collateral:               coll,
		AllowUncheckedRevocation: true,
		AllowUncheckedCollateral: true,
	}
	res, err := platform.VerifyRaw(format, data, nil, nonce, opts)
	if err != nil {
		return nil, "", nil, err
	}
	az := res.Azure
	checks := []string{
		fmt.Sprintf("ok         vtpm quote signed by the hcl report's attestation key (HCLAkPub, rsa %d bits)", az.AK.N.BitLen()),
		fmt.Sprintf("ok         pcrs %d..%d hash to the quoted pcr digest", az.PCRs[0].Index, az.PCRs[len(az.PCRs)-1].Index),
	}
	if nonce != nil {
		checks = append(checks, "ok         vtpm quote nonce equals --nonce")
	} else {
		checks = append(checks, "unchecked  vtpm quote nonce: no --nonce (printed below)")
	}
	hw, err := azureHardwareChecks(res)
	if err != nil {
		return nil, "", nil, err
	}
	checks = append(checks, hw...)
	switch {
	case az.UserDataBound:
		checks = append(checks, "ok         hcl runtime claims' user-data equals --nonce, zero-padded")
	case nonce == nil:
		checks = append(checks, "unchecked  hcl runtime claims' user-data: no --nonce")
	default:
		checks = append(checks, fmt.Sprintf("unchecked  hcl runtime claims' user-data: evidence version %d leaves it zero (the hardware report is bound to the quote through the attestation key only)", az.TrusteeVersion))
	}
	checks = append(checks,
		fmt.Sprintf("info       trustee evidence version %d, hcl report version %d", az.TrusteeVersion, az.HCLVersion),
		fmt.Sprintf("info       measurement %x", res.Measurement),
		fmt.Sprintf("info       tcb %s, debug %v", res.TCB, res.Debug))
	summary := fmt.Sprintf("%s: vtpm quote and hcl report on %s (chain to %s)", format, res.Platform, res.RootID)
	return res, summary, checks, nil
}

// azureHardwareChecks are the check lines of the hardware report beneath
// the HCL report.
func azureHardwareChecks(res *platform.Result) ([]string, error) {
	var lines []string
	switch {
	case res.SEVSNP != nil:
		lines = append(lines,
			fmt.Sprintf("ok         sev-snp report: chain to %s (embedded root), signature; %s binds reported_tcb", res.RootID, res.SEVSNP.Signer),
			"ok         hcl binding: report_data[0:32] = sha-256 of the runtime claims; vmpl 0")
	case res.TDX != nil:
		lines = append(lines,
			fmt.Sprintf("ok         td quote: pck chain to %s (embedded root), qe report, signature", res.RootID),
			"ok         hcl binding: report_data[0:32] = sha-256 of the runtime claims; the quote is over the hcl report's td report")
		if res.Collateral == platform.StatusChecked {
			lines = append(lines, fmt.Sprintf("ok         tcb collateral: tcb status %s, qe tcb status %s", res.TCBStatus, res.QETCBStatus))
		} else {
			lines = append(lines, "unchecked  tcb collateral: no tcb info and qe identity (give --collateral)")
		}
	default:
		return nil, errors.New("azure result without hardware claims")
	}
	if res.Revocation == platform.StatusChecked {
		lines = append(lines, "ok         revocation (crl from --collateral)")
	} else {
		lines = append(lines, "unchecked  revocation: no crl for this chain (give --collateral)")
	}
	return lines, nil
}

// azureRawFormat is the rawFormats entry of an Azure format: the evidence
// verified, then judged by --policy.
func azureRawFormat(format string) func(rawInput) (rawReport, error) {
	return func(in rawInput) (rawReport, error) {
		res, summary, checks, err := verifyAzureRaw(format, in.data, in.nonce, in.certs, in.at, in.collateral)
		if err != nil {
			return rawReport{}, err
		}
		pol, err := rawPolicy(in, res)
		if err != nil {
			return rawReport{}, err
		}
		return rawReport{summary: summary, checks: append(checks, pol), reportData: res.Azure.QuoteNonce}, nil
	}
}
