package main

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/clawea/attester/cmd/internal/buildinfo"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/verify/platform"
)

const verifySynopsis = "verify --attestation FILE --evidence FILE [--bundle FILE] [--audit FILE] [--report FILE] [--policy FILE] [--collateral DIR] [--allow-simulated] [--allow-unchecked-revocation] [--allow-unchecked-collateral] [--at TIME] [--json] [--ear-key FILE [--ear-out FILE]]"

// verifyExit maps a verify error class to the exit code (the same
// numbers as packctl's exit codes).
func verifyExit(err error) int { return verify.NewOutcome(nil, err).ExitCode }

// verifyCmd is the state of packctl verify: its flags, then what each step
// learns for the next.
type verifyCmd struct {
	stdout, stderr io.Writer

	relaxFlags
	attPath, evPath, bundlePath, auditPath, reportPath, policyPath, at, earKey, earOut string
	asJSON                                                                             bool

	now                                          func() time.Time
	att, ev, bundle, auditLog, report, policyRaw []byte
	hint                                         string // printed only beside an error
	policy                                       *verify.Policy
	opts                                         verify.Options
	signer                                       crypto.Signer // nil without --ear-key
}

func runVerify(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	v := &verifyCmd{stdout: stdout, stderr: stderr}
	fs := v.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "attestation", "evidence") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	if v.earOut != "" && !requireFlags(fs, stderr, "ear-key") {
		return exitUsage
	}
	if code := runSteps(v.parseAt, v.readInputs, v.loadPolicy, v.loadCollateral, v.loadEARKey); code != exitOK {
		return code
	}
	return v.verify()
}

func (v *verifyCmd) flagSet() *flag.FlagSet {
	fs := newFlagSet("verify", verifySynopsis, v.stderr)
	fs.StringVar(&v.attPath, "attestation", "", "execution_attestation envelope (JSON)")
	fs.StringVar(&v.evPath, "evidence", "", "evidence document (compact JWS)")
	fs.StringVar(&v.bundlePath, "bundle", "", "the run's proof_bundle envelope (optional)")
	fs.StringVar(&v.auditPath, "audit", "", "the gate audit log, JSON Lines (optional)")
	fs.StringVar(&v.reportPath, "report", "", "the SystemPromptReport.v1 (optional; needed for template and recipe policy)")
	fs.StringVar(&v.policyPath, "policy", "", "policy file (docs/spec/verify-v1.md); default: the strictest policy")
	v.define(fs, "collateral directory (CRLs, TDX TCB info; docs/spec/collateral-v1.md, filled by packctl collateral fetch)")
	fs.StringVar(&v.at, "at", "", "verification time, RFC 3339 (default: now)")
	fs.BoolVar(&v.asJSON, "json", false, "print the result as JSON")
	fs.StringVar(&v.earKey, "ear-key", "", "sign an EAR attestation result with this PEM PKCS#8 Ed25519 or ECDSA P-256 key")
	fs.StringVar(&v.earOut, "ear-out", "", "write the EAR JWT to this file instead of stdout")
	return fs
}

// parseAt sets the verification clock from --at.
func (v *verifyCmd) parseAt() (code int) {
	v.now, code = parseAt(v.at, v.stderr, "verify")
	return code
}

// parseAt returns the clock an --at flag sets: time.Now for "", else that
// RFC 3339 time; any other value is a usage error (the clock is then
// time.Now).
func parseAt(at string, stderr io.Writer, cmd string) (func() time.Time, int) {
	if at == "" {
		return time.Now, exitOK
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		errorf(stderr, "%s: --at: not an RFC 3339 time", cmd)
		return time.Now, exitUsage
	}
	return func() time.Time { return t }, exitOK
}

// read reads an optional input file; it reports a failure on stderr.
func (v *verifyCmd) read(path string) ([]byte, bool) {
	if path == "" {
		return nil, true
	}
	b, err := readInput(path)
	if err != nil {
		errorf(v.stderr, "verify: %v", err)
		return nil, false
	}
	return b, true
}

// readInputs reads every input file, reporting each one that cannot be
// read, and keeps the hint naming any that looks misplaced.
func (v *verifyCmd) readInputs() int {
	var ok1, ok2, ok3, ok4, ok5, ok6 bool
	v.att, ok1 = v.read(v.attPath)
	v.ev, ok2 = v.read(v.evPath)
	v.bundle, ok3 = v.read(v.bundlePath)
	v.auditLog, ok4 = v.read(v.auditPath)
	v.report, ok5 = v.read(v.reportPath)
	v.policyRaw, ok6 = v.read(v.policyPath)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return exitCannot
	}
	v.hint = inputHint(
		input{"--attestation", v.attPath, v.att, kindAttestation}, input{"--evidence", v.evPath, v.ev, kindEvidenceDocument},
		input{"--bundle", v.bundlePath, v.bundle, kindPoHEnvelope}, input{"--report", v.reportPath, v.report, kindReport},
		input{"--policy", v.policyPath, v.policyRaw, kindPolicy})
	// A compact JWS contains no newline: a file that ends with one was
	// written by a tool that adds it; evidence_ref hashes the JWS alone.
	v.ev = bytes.TrimSuffix(bytes.TrimSuffix(v.ev, []byte("\n")), []byte("\r"))
	return exitOK
}

func (v *verifyCmd) printHint() {
	if v.hint != "" {
		errorf(v.stderr, "verify: %s", v.hint)
	}
}

// loadPolicy parses --policy; the default is the strictest policy.
func (v *verifyCmd) loadPolicy() int {
	v.policy = &verify.Policy{}
	if v.policyRaw != nil {
		p, err := verify.ParsePolicy(v.policyRaw)
		if err != nil {
			errorf(v.stderr, "%v", err) // "verify: invalid policy file: ..."
			v.printHint()
			return exitUsage
		}
		v.policy = p
	}
	return exitOK
}

// loadCollateral sets the verify options, with the --collateral folder.
func (v *verifyCmd) loadCollateral() int {
	code := v.loadOptions(&v.opts, v.now, v.stderr, "verify")
	v.opts.AuditLog, v.opts.Report = v.auditLog, v.report
	return code
}

// relaxFlags are the relaxations of a command that verifies evidence: the
// collateral folder and the checks it may skip.
type relaxFlags struct {
	collDir                       string
	allowSim, allowRev, allowColl bool
}

// define adds the relaxations to fs, with the command's words for
// --collateral.
func (r *relaxFlags) define(fs *flag.FlagSet, collUsage string) {
	fs.StringVar(&r.collDir, "collateral", "", collUsage)
	fs.BoolVar(&r.allowSim, "allow-simulated", false, "accept simulated evidence (proves nothing about hardware)")
	fs.BoolVar(&r.allowRev, "allow-unchecked-revocation", false, "accept evidence without CRLs")
	fs.BoolVar(&r.allowColl, "allow-unchecked-collateral", false, "accept TDX evidence without TCB collateral")
}

// options returns the verify options the relaxations give, with the
// collateral folder read (nothing for "").
func (r *relaxFlags) options(now func() time.Time) (verify.Options, error) {
	o := verify.Options{Now: now, AllowSimulated: r.allowSim, AllowUncheckedRevocation: r.allowRev, AllowUncheckedCollateral: r.allowColl}
	return o, setCollateral(&o, r.collDir)
}

// loadOptions is the step that sets *opts from the relaxations: a
// collateral folder it cannot read is exitCannot, reported as cmd's.
func (r *relaxFlags) loadOptions(opts *verify.Options, now func() time.Time, stderr io.Writer, cmd string) int {
	o, err := r.options(now)
	if err != nil {
		errorf(stderr, "%s: collateral: %v", cmd, err)
		return exitCannot
	}
	*opts = o
	return exitOK
}

// setCollateral reads the --collateral folder dir into opts (nothing for "").
func setCollateral(opts *verify.Options, dir string) error {
	if dir == "" {
		return nil
	}
	c, err := platform.LoadCollateralDir(dir)
	if err != nil {
		return err
	}
	opts.Collateral = c
	return nil
}

// loadEARKey reads the --ear-key signing key.
func (v *verifyCmd) loadEARKey() int {
	if v.earKey == "" {
		return exitOK
	}
	raw, ok := v.read(v.earKey)
	if !ok {
		return exitCannot
	}
	s, err := earresult.ParseSigningKey(raw)
	if err != nil {
		errorf(v.stderr, "verify: --ear-key: %v", err)
		return exitUsage
	}
	v.signer = s
	return exitOK
}

// verify verifies, prints the result (unless the EAR goes to stdout) and
// writes the EAR; its exit code is the verification's.
func (v *verifyCmd) verify() int {
	res, verr := verify.Verify(v.att, v.ev, v.bundle, v.policy, v.opts)
	code := verifyExit(verr)
	if verr != nil {
		errorf(v.stderr, "%v", verr) // verr says "verify: ..." itself
		v.printHint()
	}
	if v.signer == nil || v.earOut != "" {
		if v.asJSON {
			writeVerifyJSON(v.stdout, res, verr)
		} else {
			writeSummary(v.stdout, res, verr)
		}
	}
	if v.signer == nil || code == exitUsage {
		return code
	}
	if err := v.writeEAR(res, verr); err != nil {
		errorf(v.stderr, "verify: ear: %v", err)
		return exitCannot
	}
	return code
}

// writeEAR signs the EAR attestation result and writes it to --ear-out or
// stdout.
func (v *verifyCmd) writeEAR(res *verify.Result, verr error) error {
	ar, err := earresult.New(res, verr, earresult.Options{Now: v.now(), Build: "clawea-packctl/" + buildinfo.Version(), Policy: v.policy})
	if err != nil {
		return err
	}
	s, err := earresult.NewSigner(v.signer)
	if err != nil {
		return err
	}
	tok, err := s.Sign(ar)
	if err != nil {
		return err
	}
	tok = append(tok, '\n')
	if v.earOut != "" {
		return os.WriteFile(v.earOut, tok, 0o644)
	}
	_, err = v.stdout.Write(tok)
	return err
}

func writeVerifyJSON(w io.Writer, res *verify.Result, verr error) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(verify.NewOutcome(res, verr))
}

// writeSummary prints what was checked, what was skipped, and the verdict.
func writeSummary(w io.Writer, res *verify.Result, verr error) {
	if verr != nil {
		if ve, ok := errors.AsType[*verify.Error](verr); ok {
			for _, c := range ve.Passed {
				fmt.Fprintf(w, "  ok       %s\n", c)
			}
			code := ""
			if ve.Code != "" {
				code = " " + string(ve.Code)
			}
			fmt.Fprintf(w, "  FAILED   %s%s\n", ve.Check, code)
			fmt.Fprintf(w, "%s: %s%s\n", upper(verify.NewOutcome(nil, verr).Verdict), ve.Check, code)
			return
		}
		fmt.Fprintf(w, "%s\n", upper(verify.NewOutcome(nil, verr).Verdict))
		return
	}
	fmt.Fprintf(w, "attestation %s run=%s agent=%s attester=%s\n", res.AttestationID, res.RunID, res.AgentDID, res.AttesterDID)
	fmt.Fprintf(w, "admission policy: %s\n", verify.AdmissionPolicyOf(&res.Commitments))
	for _, c := range res.Checks {
		tag := "ok      "
		switch c.Status {
		case verify.StatusSkipped:
			tag = "SKIPPED "
		case verify.StatusNotApplicable:
			tag = "n/a     "
		}
		fmt.Fprintf(w, "  %s %-18s %s\n", tag, c.Name, c.Detail)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	sim := ""
	if res.Simulated {
		sim = " (SIMULATED: proves nothing about hardware)"
	}
	fmt.Fprintf(w, "VERIFIED%s\n", sim)
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
