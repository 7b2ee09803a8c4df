package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/verify"
)

const discloseSynopsis = "disclose --pack pack.json --reveal KIND:ID [--reveal ...] [--trusted FILE] [-o disclosure.json]\n\nRebuilds a pack built with --report-version 2 and writes a disclosure of the\nselected inputs (content and salt), bound to the pack's report hash\n(docs/spec/disclosure-v1.md). The disclosure reveals those inputs: it is\nwritten mode 0600. Selectors: params:params.json, tools:schemas,\nbootstrap:AGENTS.md, params:ownerNumbers, ... (docs/spec/report-v2.md section 4).\nExit: 0 written, 1 usage or unknown selector, 2 bad or v1 pack, 3 unreadable,\n4 template not in --trusted."

func runDisclose(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("disclose", discloseSynopsis, stderr)
	packPath := fs.String("pack", "", "plaintext pack `file` (required)")
	var reveal stringList
	fs.Var(&reveal, "reveal", "input to reveal, `KIND:ID` (repeatable; at least one)")
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex; default: the pack's own sigs")
	out := fs.String("o", "", "output `file` (default stdout)")
	asJSON := fs.Bool("json", false, "with -o: print the disclosure's report hash and inputs as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "pack", "reveal") || !wantArgs(fs, stderr, 0, "") ||
		!(packOutput{path: *out, asJSON: *asJSON}).valid(stderr, "disclose") {
		return exitUsage
	}
	var bad []string
	for _, sel := range reveal {
		if _, _, err := promptpack.ParseSelector(sel); err != nil {
			bad = append(bad, fmt.Sprintf("%q", sel))
		}
	}
	if len(bad) > 0 {
		errorf(stderr, "disclose: not KIND:ID selectors: %v (kinds: params, tools, bootstrap, skills, prompt)", bad)
		return exitUsage
	}
	rb, code := rebuildFile(*packPath, *trusted, stderr, "disclose")
	if rb == nil {
		return code
	}
	defer rb.Wipe()
	enc, err := rb.Disclose(reveal)
	if err != nil {
		switch promptpack.DisclosureCode(err) {
		case "REPORT_NOT_SALTED":
			errorf(stderr, "disclose: %s: the pack has no report salts (SystemPromptReport.v1); build it with --report-version 2", *packPath)
			return exitRejected
		case "INPUT_NOT_IN_REPORT":
			return fail(stderr, "disclose", exitUsage, err)
		}
		return fail(stderr, "disclose", exitRejected, err)
	}
	defer sealed.Wipe(enc)
	// Disclose reveals each distinct selector once.
	n := len(slices.Compact(slices.Sorted(slices.Values(reveal))))
	if err := writeFile(*out, enc, 0o600, stdout); err != nil {
		return fail(stderr, "disclose", exitCannot, err)
	}
	fmt.Fprintf(stderr, "packctl: disclose: %d input(s) bound to report %s\n", n, rb.ReportHashB64u())
	if *asJSON {
		printJSON(stdout, map[string]any{"disclosure": *out, "report_hash_b64u": rb.ReportHashB64u(), "inputs": n, "revealed": []string(reveal)})
	}
	return exitOK
}

const verifyDisclosureSynopsis = "verify-disclosure --report report.json --disclosure disclosure.json [--json]\n       [--attestation FILE --evidence FILE [--bundle FILE] [--policy FILE] [--collateral DIR]\n        [--allow-simulated] [--allow-unchecked-revocation] [--allow-unchecked-collateral] [--at TIME]]\n\nChecks each revealed input of a disclosure against the SystemPromptReport v2\nand the disclosure's binding to the report hash (docs/spec/disclosure-v1.md).\nWith --attestation it also verifies the execution attestation offline (as\npackctl verify, with the report) so that the chain disclosure -> report ->\nattestation holds. First line of stdout: VERIFIED ... or REJECTED <reason>.\nExit: 0 verified, 1 usage, 2 rejected, 3 could not check, 4 attestation\nrefused by policy."

type disclosureJSON struct {
	Verdict        string                     `json:"verdict"`
	ExitCode       int                        `json:"exit_code"`
	Reason         string                     `json:"reason,omitempty"`
	Message        string                     `json:"message,omitempty"`
	ReportHashB64u string                     `json:"report_hash_b64u,omitempty"`
	Revealed       []promptpack.RevealedInput `json:"revealed,omitempty"`
	Attestation    *disclosureAttJSON         `json:"attestation,omitempty"`
}

type disclosureAttJSON struct {
	AttestationID string `json:"attestation_id"`
	RunID         string `json:"run_id"`
	AttesterDID   string `json:"attester_did"`
	Simulated     bool   `json:"simulated"`
}

// verifyDisclosure is the state of verify-disclosure: its flags, then what
// each step learns for the next.
type verifyDisclosure struct {
	stdout, stderr io.Writer

	relaxFlags
	reportPath, disPath, attPath, evPath, bundlePath, policyPath, at string
	asJSON                                                           bool

	out     disclosureJSON
	report  []byte
	dis     []byte // wiped by cleanup
	res     *promptpack.DisclosureResult
	now     func() time.Time
	files   [4][]byte // attestation, evidence, bundle, policy
	hint    string    // printed by cleanup, after the result
	policy  *verify.Policy
	opts    verify.Options
	hasAtt  bool
	attOnly bool
}

func runVerifyDisclosure(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	vd := &verifyDisclosure{stdout: stdout, stderr: stderr}
	fs := vd.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	vd.hasAtt = vd.attPath != ""
	vd.attOnly = vd.evPath != "" || vd.bundlePath != "" || vd.policyPath != "" || vd.collDir != "" || vd.allowSim || vd.allowRev || vd.allowColl || vd.at != ""
	if !requireFlags(fs, stderr, "report", "disclosure") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	if vd.hasAtt && !requireFlags(fs, stderr, "evidence") {
		return exitUsage
	}
	if !vd.hasAtt && vd.attOnly {
		errorf(stderr, "verify-disclosure: --evidence, --bundle, --policy, --collateral, --allow-* and --at need --attestation")
		fs.Usage()
		return exitUsage
	}
	defer vd.cleanup()
	steps := []func() int{vd.readInputs, vd.checkDisclosure}
	if vd.hasAtt {
		// The chain: the disclosure is bound to this report; verify the
		// attestation with this report, which checks that the attested
		// system_prompt_report_hash_b64u is the report's hash.
		steps = append(steps, vd.parseAt, vd.readAttestationInputs, vd.loadPolicy, vd.verifyAttestation)
	}
	steps = append(steps, func() int { return vd.finish(exitOK, "", "") })
	return runSteps(steps...)
}

func (vd *verifyDisclosure) flagSet() *flag.FlagSet {
	fs := newFlagSet("verify-disclosure", verifyDisclosureSynopsis, vd.stderr)
	fs.StringVar(&vd.reportPath, "report", "", "the SystemPromptReport v2 `file` (JCS bytes; required)")
	fs.StringVar(&vd.disPath, "disclosure", "", "the disclosure `file` (required)")
	fs.BoolVar(&vd.asJSON, "json", false, "print the result as JSON")
	fs.StringVar(&vd.attPath, "attestation", "", "execution_attestation envelope `file`: also check that it commits to the report")
	fs.StringVar(&vd.evPath, "evidence", "", "evidence document `file` (compact JWS; required with --attestation)")
	fs.StringVar(&vd.bundlePath, "bundle", "", "the run's proof_bundle envelope (optional, with --attestation)")
	fs.StringVar(&vd.policyPath, "policy", "", "verification policy `file` for the attestation; default: the strictest")
	vd.define(fs, "collateral `dir` for the attestation")
	fs.StringVar(&vd.at, "at", "", "verification `time` for the attestation, RFC 3339 (default: now)")
	return fs
}

// cleanup names the attestation inputs that look misplaced, beside the
// error verification gave, and wipes the disclosure.
func (vd *verifyDisclosure) cleanup() {
	if vd.hint != "" {
		errorf(vd.stderr, "verify-disclosure: %s", vd.hint)
	}
	sealed.Wipe(vd.dis)
}

// finish prints the result with its verdict and returns code.
func (vd *verifyDisclosure) finish(code int, reason, msg string) int {
	out := &vd.out
	out.ExitCode = code
	out.Reason = reason
	out.Message = msg
	switch code {
	case exitOK:
		out.Verdict = "verified"
	case exitRejected:
		out.Verdict = "rejected"
	case exitPolicy:
		out.Verdict = "policy-refused"
	case exitUsage:
		out.Verdict = "usage"
	default:
		out.Verdict = "cannot-check"
	}
	if msg != "" {
		errorf(vd.stderr, "verify-disclosure: %s", msg)
	}
	if vd.asJSON {
		enc := json.NewEncoder(vd.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return code
	}
	switch code {
	case exitOK:
		vd.printVerified()
	case exitRejected, exitPolicy:
		fmt.Fprintf(vd.stdout, "REJECTED %s\n", reason)
	case exitUsage:
		fmt.Fprintf(vd.stdout, "USAGE %s\n", reason)
	default:
		fmt.Fprintf(vd.stdout, "CANNOT-CHECK %s\n", reason)
	}
	return code
}

// printVerified prints the VERIFIED line and the revealed inputs.
func (vd *verifyDisclosure) printVerified() {
	out, stdout := &vd.out, vd.stdout
	line := fmt.Sprintf("VERIFIED disclosure of %d input(s) bound to report %s", len(out.Revealed), out.ReportHashB64u)
	if a := out.Attestation; a != nil {
		line += fmt.Sprintf(", attested by %s run=%s attester=%s", a.AttestationID, a.RunID, a.AttesterDID)
		if a.Simulated {
			line += " (SIMULATED: proves nothing about hardware)"
		}
	}
	fmt.Fprintln(stdout, line)
	for _, r := range out.Revealed {
		fmt.Fprintf(stdout, "  revealed %s (%d bytes)\n", r.Selector, r.ContentBytes)
	}
	if out.Attestation == nil {
		fmt.Fprintln(stdout, "  note: the report was not checked against an attestation (--attestation)")
	}
}

// readInputs reads the report and the disclosure.
func (vd *verifyDisclosure) readInputs() int {
	var err error
	if vd.report, err = bounded.ReadFile(vd.reportPath, maxInputBytes); err != nil {
		return vd.finish(exitCannot, "UNREADABLE", err.Error())
	}
	if vd.dis, err = bounded.ReadFile(vd.disPath, maxInputBytes); err != nil {
		return vd.finish(exitCannot, "UNREADABLE", err.Error())
	}
	return exitOK
}

// checkDisclosure checks the disclosure against the report.
func (vd *verifyDisclosure) checkDisclosure() int {
	res, err := promptpack.VerifyDisclosure(vd.report, vd.dis)
	if err != nil {
		if hint := inputHint(input{"--report", vd.reportPath, vd.report, kindReport}, input{"--disclosure", vd.disPath, vd.dis, kindDisclosure}); hint != "" {
			errorf(vd.stderr, "verify-disclosure: %s", hint)
		}
		return vd.finish(exitRejected, promptpack.DisclosureCode(err), err.Error())
	}
	vd.res = res
	vd.out.ReportHashB64u = res.ReportHashB64u
	vd.out.Revealed = res.Revealed
	return exitOK
}

// parseAt sets the verification clock from --at.
func (vd *verifyDisclosure) parseAt() (code int) {
	vd.now, code = parseAt(vd.at, vd.stderr, "verify-disclosure")
	return code
}

// readAttestationInputs reads the attestation, evidence, bundle and policy
// files, and keeps the hint naming any that looks misplaced.
func (vd *verifyDisclosure) readAttestationInputs() int {
	var err error
	for i, p := range []string{vd.attPath, vd.evPath, vd.bundlePath, vd.policyPath} {
		if p == "" {
			continue
		}
		if vd.files[i], err = readInput(p); err != nil {
			return vd.finish(exitCannot, "UNREADABLE", err.Error())
		}
	}
	// Named beside the error verification gives (exit codes unchanged).
	vd.hint = inputHint(
		input{"--attestation", vd.attPath, vd.files[0], kindAttestation}, input{"--evidence", vd.evPath, vd.files[1], kindEvidenceDocument},
		input{"--bundle", vd.bundlePath, vd.files[2], kindPoHEnvelope}, input{"--policy", vd.policyPath, vd.files[3], kindPolicy})
	return exitOK
}

// loadPolicy parses the policy and sets the verify options, with the
// collateral.
func (vd *verifyDisclosure) loadPolicy() int {
	var err error
	vd.policy = &verify.Policy{}
	if vd.files[3] != nil {
		if vd.policy, err = verify.ParsePolicy(vd.files[3]); err != nil {
			errorf(vd.stderr, "verify-disclosure: policy: %v", err)
			return exitUsage
		}
	}
	if vd.opts, err = vd.options(vd.now); err != nil {
		return vd.finish(exitCannot, "COLLATERAL", err.Error())
	}
	vd.opts.Report = vd.report
	return exitOK
}

// verifyAttestation verifies the attestation with the report.
func (vd *verifyDisclosure) verifyAttestation() int {
	ev := trimNewline(vd.files[1])
	vres, verr := verify.Verify(vd.files[0], ev, vd.files[2], vd.policy, vd.opts)
	if verr != nil {
		reason := "ATTESTATION"
		if ve, ok := errors.AsType[*verify.Error](verr); ok {
			reason += " " + ve.Check
			if ve.Code != "" {
				reason += " " + string(ve.Code)
			}
		}
		code := verifyExit(verr)
		if code == exitOK {
			code = exitCannot
		}
		return vd.finish(code, reason, "attestation: "+verr.Error())
	}
	if vres.Commitments.SystemPromptReportHashB64u != vd.res.ReportHashB64u {
		// verify.Verify with a report checks this; never reached.
		return vd.finish(exitRejected, "ATTESTATION report PROMPT_COMMITMENT_MISMATCH", "the attestation commits to another report")
	}
	vd.out.Attestation = &disclosureAttJSON{AttestationID: vres.AttestationID, RunID: vres.RunID, AttesterDID: vres.AttesterDID, Simulated: vres.Simulated}
	return exitOK
}

// trimNewline drops one trailing newline (a compact JWS has none).
func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
