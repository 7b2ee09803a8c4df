package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/disclosure"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
)

const discloseSynopsis = "disclose --pack pack.json --reveal KIND:ID [--reveal ...] [--trusted FILE] [-o disclosure.json]\n\nRebuilds a pack built with --report-version 2 and writes a disclosure of the\nselected inputs (content and salt), bound to the pack's report hash\n(docs/spec/disclosure-v1.md). The disclosure reveals those inputs: it is\nwritten mode 0600. Selectors: params:params.json, tools:schemas,\nbootstrap:AGENTS.md, params:ownerNumbers, ... (docs/spec/report-v2.md section 4).\nExit: 0 written, 1 usage or unknown selector, 2 bad or v1 pack, 3 unreadable,\n4 template not in --trusted."

func runDisclose(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("disclose", discloseSynopsis, stderr)
	packPath := fs.String("pack", "", "plaintext pack `file` (required)")
	var reveal stringList
	fs.Var(&reveal, "reveal", "input to reveal, `KIND:ID` (repeatable; at least one)")
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex; default: the pack's own sigs")
	out := fs.String("o", "", "output `file` (default stdout)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "pack", "reveal") || !wantArgs(fs, stderr, 0, "") {
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
	d, err := disclosure.Create(rb, reveal)
	if err != nil {
		switch {
		case errors.Is(err, disclosure.ErrNotSalted):
			errorf(stderr, "disclose: %s: the pack has no report salts (SystemPromptReport.v1); build it with --report-version 2", *packPath)
			return exitRejected
		case errors.Is(err, disclosure.ErrUnknownInput):
			errorf(stderr, "disclose: %v", err)
			return exitUsage
		}
		errorf(stderr, "disclose: %v", err)
		return exitRejected
	}
	defer d.Wipe()
	enc, err := d.Encode()
	if err != nil {
		errorf(stderr, "disclose: %v", err)
		return exitRejected
	}
	defer sealed.Wipe(enc)
	if err := writeFile(*out, enc, 0o600, stdout); err != nil {
		errorf(stderr, "disclose: %v", err)
		return exitCannot
	}
	fmt.Fprintf(stderr, "packctl: disclose: %d input(s) bound to report %s\n", len(d.Inputs), rb.ReportHashB64u())
	return exitOK
}

const verifyDisclosureSynopsis = "verify-disclosure --report report.json --disclosure disclosure.json [--json]\n       [--attestation FILE --evidence FILE [--bundle FILE] [--policy FILE] [--collateral DIR]\n        [--allow-simulated] [--allow-unchecked-revocation] [--allow-unchecked-collateral] [--at TIME]]\n\nChecks each revealed input of a disclosure against the SystemPromptReport v2\nand the disclosure's binding to the report hash (docs/spec/disclosure-v1.md).\nWith --attestation it also verifies the execution attestation offline (as\npackctl verify, with the report) so that the chain disclosure -> report ->\nattestation holds. First line of stdout: VERIFIED ... or REJECTED <reason>.\nExit: 0 verified, 1 usage, 2 rejected, 3 could not check, 4 attestation\nrefused by policy."

type disclosureJSON struct {
	Verdict        string                     `json:"verdict"`
	ExitCode       int                        `json:"exit_code"`
	Reason         string                     `json:"reason,omitempty"`
	Message        string                     `json:"message,omitempty"`
	ReportHashB64u string                     `json:"report_hash_b64u,omitempty"`
	Revealed       []disclosure.RevealedInput `json:"revealed,omitempty"`
	Attestation    *disclosureAttJSON         `json:"attestation,omitempty"`
}

type disclosureAttJSON struct {
	AttestationID string `json:"attestation_id"`
	RunID         string `json:"run_id"`
	AttesterDID   string `json:"attester_did"`
	Simulated     bool   `json:"simulated"`
}

func runVerifyDisclosure(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify-disclosure", verifyDisclosureSynopsis, stderr)
	reportPath := fs.String("report", "", "the SystemPromptReport v2 `file` (JCS bytes; required)")
	disPath := fs.String("disclosure", "", "the disclosure `file` (required)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	attPath := fs.String("attestation", "", "execution_attestation envelope `file`: also check that it commits to the report")
	evPath := fs.String("evidence", "", "evidence document `file` (compact JWS; required with --attestation)")
	bundlePath := fs.String("bundle", "", "the run's proof_bundle envelope (optional, with --attestation)")
	policyPath := fs.String("policy", "", "verification policy `file` for the attestation; default: the strictest")
	collDir := fs.String("collateral", "", "collateral `dir` for the attestation")
	allowSim := fs.Bool("allow-simulated", false, "accept simulated evidence (proves nothing about hardware)")
	allowRev := fs.Bool("allow-unchecked-revocation", false, "accept evidence without CRLs")
	allowColl := fs.Bool("allow-unchecked-collateral", false, "accept TDX evidence without TCB collateral")
	at := fs.String("at", "", "verification `time` for the attestation, RFC 3339 (default: now)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	withAtt := *attPath != ""
	attOnly := *evPath != "" || *bundlePath != "" || *policyPath != "" || *collDir != "" || *allowSim || *allowRev || *allowColl || *at != ""
	if !requireFlags(fs, stderr, "report", "disclosure") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	if withAtt && !requireFlags(fs, stderr, "evidence") {
		return exitUsage
	}
	if !withAtt && attOnly {
		errorf(stderr, "verify-disclosure: --evidence, --bundle, --policy, --collateral, --allow-* and --at need --attestation")
		fs.Usage()
		return exitUsage
	}
	out := disclosureJSON{}
	finish := func(code int, reason, msg string) int {
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
			errorf(stderr, "verify-disclosure: %s", msg)
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(out)
			return code
		}
		switch code {
		case exitOK:
			line := fmt.Sprintf("VERIFIED disclosure of %d input(s) bound to report %s", len(out.Revealed), out.ReportHashB64u)
			if a := out.Attestation; a != nil {
				line += fmt.Sprintf(", attested by %s run=%s attester=%s", a.AttestationID, a.RunID, a.AttesterDID)
				if a.Simulated {
					line += " (SIMULATED: proves nothing about hardware)"
				}
			}
			fmt.Fprintln(stdout, line)
			for _, r := range out.Revealed {
				fmt.Fprintf(stdout, "  revealed %s (%d bytes)\n", promptpack.Selector(r.Kind, r.ID), r.ContentBytes)
			}
			if out.Attestation == nil {
				fmt.Fprintln(stdout, "  note: the report was not checked against an attestation (--attestation)")
			}
		case exitRejected, exitPolicy:
			fmt.Fprintf(stdout, "REJECTED %s\n", reason)
		case exitUsage:
			fmt.Fprintf(stdout, "USAGE %s\n", reason)
		default:
			fmt.Fprintf(stdout, "CANNOT-CHECK %s\n", reason)
		}
		return code
	}
	report, err := bounded.ReadFile(*reportPath, promptpack.MaxReportSize+1)
	if err != nil {
		return finish(exitCannot, "UNREADABLE", err.Error())
	}
	dis, err := bounded.ReadFile(*disPath, disclosure.MaxSize+1)
	if err != nil {
		return finish(exitCannot, "UNREADABLE", err.Error())
	}
	defer sealed.Wipe(dis)
	res, d, err := disclosure.Verify(report, dis)
	if err != nil {
		if hint := inputHint(input{"--report", *reportPath, report, kindReport}, input{"--disclosure", *disPath, dis, kindDisclosure}); hint != "" {
			errorf(stderr, "verify-disclosure: %s", hint)
		}
		return finish(exitRejected, disclosure.Code(err), err.Error())
	}
	d.Wipe()
	out.ReportHashB64u = res.ReportHashB64u
	out.Revealed = res.Revealed
	if !withAtt {
		return finish(exitOK, "", "")
	}
	// The chain: the disclosure is bound to this report (above); verify the
	// attestation with this report, which checks that the attested
	// system_prompt_report_hash_b64u is the report's hash.
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			errorf(stderr, "verify-disclosure: --at: not an RFC 3339 time")
			return exitUsage
		}
		now = func() time.Time { return t }
	}
	var files [4][]byte
	for i, p := range []string{*attPath, *evPath, *bundlePath, *policyPath} {
		if p == "" {
			continue
		}
		if files[i], err = readInput(p); err != nil {
			return finish(exitCannot, "UNREADABLE", err.Error())
		}
	}
	hint := inputHint(
		input{"--attestation", *attPath, files[0], kindAttestation}, input{"--evidence", *evPath, files[1], kindEvidenceDocument},
		input{"--bundle", *bundlePath, files[2], kindPoHEnvelope}, input{"--policy", *policyPath, files[3], kindPolicy})
	if hint != "" {
		// Named beside the error verification gives (exit codes unchanged).
		defer errorf(stderr, "verify-disclosure: %s", hint)
	}
	policy := &verify.Policy{}
	if files[3] != nil {
		if policy, err = verify.ParsePolicy(files[3]); err != nil {
			errorf(stderr, "verify-disclosure: policy: %v", err)
			return exitUsage
		}
	}
	opts := verify.Options{Now: now, AllowSimulated: *allowSim, AllowUncheckedRevocation: *allowRev, AllowUncheckedCollateral: *allowColl, Report: report}
	if *collDir != "" {
		c, err := platform.LoadCollateralDir(*collDir)
		if err != nil {
			return finish(exitCannot, "COLLATERAL", err.Error())
		}
		opts.Collateral = c
	}
	ev := trimNewline(files[1])
	vres, verr := verify.Verify(files[0], ev, files[2], policy, opts)
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
		return finish(code, reason, "attestation: "+verr.Error())
	}
	if vres.Commitments.SystemPromptReportHashB64u != res.ReportHashB64u {
		// verify.Verify with a report checks this; never reached.
		return finish(exitRejected, "ATTESTATION report PROMPT_COMMITMENT_MISMATCH", "the attestation commits to another report")
	}
	out.Attestation = &disclosureAttJSON{AttestationID: vres.AttestationID, RunID: vres.RunID, AttesterDID: vres.AttesterDID, Simulated: vres.Simulated}
	return finish(exitOK, "", "")
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
