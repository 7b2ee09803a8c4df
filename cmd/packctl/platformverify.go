package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
)

const platformVerifySynopsis = "platform verify --format F [--nonce HEX] [--certs FILE] [--policy FILE] [--collateral DIR] [--at TIME] FILE"

// rawInput is what packctl platform verify hands a format's verifier.
type rawInput struct {
	data       []byte               // FILE's bytes (bounded read), or stdin for "-"
	nonce      []byte               // --nonce HEX, nil when absent
	certs      []byte               // --certs FILE's bytes, nil when absent
	at         time.Time            // --at TIME (RFC 3339), else now
	policy     []byte               // --policy FILE's bytes, nil when absent
	collateral *platform.Collateral // from --collateral DIR when given, else nil
}

// rawReport is what a format's verifier established, for printing.
type rawReport struct {
	summary    string   // printed after "VERIFIED " on the first line
	checks     []string // one line each: what was checked, what was unchecked (revocation!)
	reportData []byte   // printed in hex when non-nil
}

// rawFormats are the evidence formats packctl platform verify reads, by
// --format name. Each verifies offline against embedded vendor roots; its
// error decides the exit code (rawExit).
var rawFormats = map[string]func(rawInput) (rawReport, error){
	"snp-report":  verifySNPReportFormat,
	"tdx-quote":   verifyTDXQuoteFormat,
	"az-snp-vtpm": azureRawFormat("az-snp-vtpm"),
	"az-tdx-vtpm": azureRawFormat("az-tdx-vtpm"),
	"nvidia-gpu": func(in rawInput) (rawReport, error) {
		s, c, err := verifyNVIDIAGPURaw(in.data, in.nonce, in.certs, in.at)
		return rawReport{summary: s, checks: c}, err
	},
}

func runPlatform(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch("platform", platformVerifySynopsis+"\nformats: "+strings.Join(rawFormatNames(), ", "), subcommands{
		"verify": func(args []string, stdout, stderr io.Writer) int {
			return runPlatformVerify(args, stdin, stdout, stderr)
		},
	}, args, stdout, stderr)
}

func rawFormatNames() []string {
	var names []string
	for n := range rawFormats {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// platformVerifyCmd is the state of packctl platform verify.
type platformVerifyCmd struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	format, nonceHex, certsPath, policyPath, collDir, at string

	verifyFormat func(rawInput) (rawReport, error)
	in           rawInput
}

func runPlatformVerify(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &platformVerifyCmd{stdin: stdin, stdout: stdout, stderr: stderr}
	fs := c.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "format") || !wantArgs(fs, stderr, 1, "FILE") {
		return exitUsage
	}
	if code := runSteps(c.parseFlagValues, func() int { return c.readInputs(fs.Arg(0)) }); code != exitOK {
		return code
	}
	return c.verify()
}

func (c *platformVerifyCmd) flagSet() *flag.FlagSet {
	fs := newFlagSet("platform verify", platformVerifySynopsis, c.stderr)
	fs.StringVar(&c.format, "format", "", "evidence format: "+strings.Join(rawFormatNames(), ", "))
	fs.StringVar(&c.nonceHex, "nonce", "", "the nonce the evidence must carry, hex (REPORT_DATA: zero-padded to 64 bytes); default: not checked")
	fs.StringVar(&c.certsPath, "certs", "", "endorsement certificates, DER or PEM (snp-report: the VCEK or VLEK, optionally with AMD's ASK/ASVK and ARK)")
	fs.StringVar(&c.policyPath, "policy", "", "verify policy file (docs/spec/verify-v1.md); its platform members judge the evidence")
	fs.StringVar(&c.collDir, "collateral", "", "collateral directory (CRLs, TDX TCB info); without it revocation is unchecked")
	fs.StringVar(&c.at, "at", "", "verification time, RFC 3339 (default: now), e.g. a sample's capture time")
	return fs
}

// parseFlagValues checks --format, --nonce and --at.
func (c *platformVerifyCmd) parseFlagValues() int {
	c.verifyFormat = rawFormats[c.format]
	if c.verifyFormat == nil {
		errorf(c.stderr, "platform verify: --format: unknown format %q (known: %s)", c.format, strings.Join(rawFormatNames(), ", "))
		return exitUsage
	}
	if c.nonceHex != "" {
		n, err := hex.DecodeString(c.nonceHex)
		if err != nil || len(n) == 0 {
			errorf(c.stderr, "platform verify: --nonce: not hex")
			return exitUsage
		}
		c.in.nonce = n
	}
	now, code := parseAt(c.at, c.stderr, "platform verify")
	c.in.at = now()
	return code
}

// readInputs reads FILE (stdin for "-"), --certs, --policy and
// --collateral.
func (c *platformVerifyCmd) readInputs(file string) int {
	var err error
	if file == "-" {
		c.in.data, err = bounded.Read(c.stdin, maxInputBytes, "stdin")
	} else {
		c.in.data, err = readInput(file)
	}
	if err != nil {
		errorf(c.stderr, "platform verify: %v", err)
		return exitCannot
	}
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{c.certsPath, &c.in.certs}, {c.policyPath, &c.in.policy}} {
		if f.path == "" {
			continue
		}
		if *f.dst, err = readInput(f.path); err != nil {
			errorf(c.stderr, "platform verify: %v", err)
			return exitCannot
		}
	}
	if c.collDir != "" {
		if c.in.collateral, err = platform.LoadCollateralDir(c.collDir); err != nil {
			errorf(c.stderr, "platform verify: collateral: %v", err)
			return exitCannot
		}
	}
	return exitOK
}

// verify runs the format's verifier and prints its verdict: the first line
// is "VERIFIED <summary>" or "REJECTED <reason>".
func (c *platformVerifyCmd) verify() int {
	rep, err := c.verifyFormat(c.in)
	if err != nil {
		fmt.Fprintf(c.stdout, "REJECTED %s\n", rawReason(err))
		errorf(c.stderr, "platform verify: %v", err)
		return rawExit(err)
	}
	fmt.Fprintf(c.stdout, "VERIFIED %s\n", rep.summary)
	for _, l := range rep.checks {
		fmt.Fprintf(c.stdout, "  %s\n", l)
	}
	if rep.reportData != nil {
		fmt.Fprintf(c.stdout, "report_data %x\n", rep.reportData)
	}
	return exitOK
}

// rawReason is the reason printed after REJECTED: the failing check and its
// cause.
func rawReason(err error) string {
	if pe, ok := errors.AsType[*platform.Error](err); ok && pe.Err != nil {
		return pe.Check + ": " + pe.Err.Error()
	}
	return err.Error()
}

// rawExit maps a format verifier's error to packctl's exit codes, as
// packctl verify does: bad evidence 2, could not check 3, policy 4.
func rawExit(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, platform.ErrBadOptions), errors.Is(err, verify.ErrUsage):
		return exitUsage
	case errors.Is(err, platform.ErrRejected), errors.Is(err, verify.ErrRejected):
		return exitRejected
	case errors.Is(err, platform.ErrPolicy), errors.Is(err, verify.ErrPolicy):
		return exitPolicy
	}
	return exitCannot
}

// rawOptions are the platform options of a raw verification: the --at
// clock, the --collateral data, and revocation and TCB collateral allowed
// to be absent (reported as unchecked, never as checked).
func rawOptions(in rawInput) platform.Options {
	return platform.Options{
		Now:                      func() time.Time { return in.at },
		Collateral:               in.collateral,
		AllowUncheckedRevocation: true,
		AllowUncheckedCollateral: true,
	}
}

// rawPolicy judges a verified result by the --policy file's platform
// members; it returns the check line to print.
func rawPolicy(in rawInput, res *platform.Result) (string, error) {
	if in.policy == nil {
		return "unchecked  policy: no --policy (measurement and tcb not judged)", nil
	}
	p, err := verify.ParsePolicy(in.policy)
	if err != nil {
		return "", fmt.Errorf("%w: policy: %w", verify.ErrUsage, err)
	}
	if err := platform.CheckPolicy(res, p.Platform()); err != nil {
		return "", err
	}
	return "ok         policy " + p.ID(), nil
}

// rawCommonChecks are the check lines every verified platform result has:
// root, revocation, report data.
func rawCommonChecks(in rawInput, res *platform.Result) []string {
	lines := []string{"ok         chain to " + res.RootID + " (embedded root), signature"}
	if res.Revocation == platform.StatusChecked {
		lines = append(lines, "ok         revocation (crl from --collateral)")
	} else {
		lines = append(lines, "unchecked  revocation: no crl for this chain (give --collateral)")
	}
	if in.nonce != nil {
		lines = append(lines, "ok         report_data equals --nonce, zero-padded")
	} else {
		lines = append(lines, "unchecked  report_data: no --nonce (printed below)")
	}
	return lines
}

// verifySNPReportFormat verifies a raw SEV-SNP report with its VCEK or
// VLEK from --certs.
func verifySNPReportFormat(in rawInput) (rawReport, error) {
	res, err := platform.VerifyRaw("snp-report", in.data, in.certs, in.nonce, rawOptions(in))
	if err != nil {
		return rawReport{}, err
	}
	pol, err := rawPolicy(in, res)
	if err != nil {
		return rawReport{}, err
	}
	s := res.SEVSNP
	checks := append(rawCommonChecks(in, res),
		fmt.Sprintf("ok         %s certificate binds reported_tcb %s", s.Signer, res.TCB),
		pol,
		fmt.Sprintf("info       report version %d, vmpl %d, policy %#x, debug %v, firmware %s", s.Version, s.VMPL, s.Policy, res.Debug, s.Firmware),
		fmt.Sprintf("info       measurement %x", res.Measurement),
		fmt.Sprintf("info       host_data %x", res.HostData))
	return rawReport{
		summary:    fmt.Sprintf("sev-snp report signed by %s (%s)", strings.ToUpper(s.Signer), s.ProductLine),
		checks:     checks,
		reportData: res.ReportData[:],
	}, nil
}

// verifyTDXQuoteFormat verifies a raw TDX quote with the PCK chain it
// carries; --collateral adds Intel's TCB info, QE identity and CRLs.
func verifyTDXQuoteFormat(in rawInput) (rawReport, error) {
	if in.certs != nil {
		return rawReport{}, fmt.Errorf("%w: --certs: a tdx quote carries its pck chain", verify.ErrUsage)
	}
	res, err := platform.VerifyRaw("tdx-quote", in.data, nil, in.nonce, rawOptions(in))
	if err != nil {
		return rawReport{}, err
	}
	pol, err := rawPolicy(in, res)
	if err != nil {
		return rawReport{}, err
	}
	checks := rawCommonChecks(in, res)
	if res.Collateral == platform.StatusChecked {
		checks = append(checks, fmt.Sprintf("ok         tcb collateral: tcb status %s, qe tcb status %s, advisories %v", res.TCBStatus, res.QETCBStatus, res.TCBAdvisoryIDs))
	} else {
		checks = append(checks, "unchecked  tcb collateral: no tcb info and qe identity (give --collateral)")
	}
	b := &res.TDX.Body
	checks = append(checks, pol,
		fmt.Sprintf("info       tee_tcb_svn %s, debug %v, qe svn %d", res.TCB, res.Debug, res.TDX.QESVN),
		fmt.Sprintf("info       mrtd %x", b.MRTD),
		fmt.Sprintf("info       rtmr0 %x", b.RTMR[0]),
		fmt.Sprintf("info       rtmr1 %x", b.RTMR[1]),
		fmt.Sprintf("info       rtmr2 %x", b.RTMR[2]),
		fmt.Sprintf("info       rtmr3 %x", b.RTMR[3]))
	version := "v4"
	switch res.TDX.BodyType {
	case 2:
		version = "v5 td 1.0 body"
	case 3:
		version = "v5 td 1.5 body"
		checks = append(checks,
			fmt.Sprintf("info       tee_tcb_svn2 %x", b.TeeTcbSvn2),
			fmt.Sprintf("info       mrservicetd %x", b.MRServiceTD))
	}
	return rawReport{summary: "tdx quote " + version + " (pck chain to " + res.RootID + ")", checks: checks, reportData: res.ReportData[:]}, nil
}
