package main

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/verify/platform"
)

const verifySynopsis = "verify --attestation FILE --evidence FILE [--bundle FILE] [--audit FILE] [--report FILE] [--policy FILE] [--collateral DIR] [--allow-simulated] [--allow-unchecked-revocation] [--allow-unchecked-collateral] [--at TIME] [--json] [--ear-key FILE [--ear-out FILE]]"

// verifyExit maps a verify error class to the exit code (the same
// numbers as packctl's exit codes).
func verifyExit(err error) int { return verify.ExitCode(err) }

func runVerify(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", verifySynopsis, stderr)
	attPath := fs.String("attestation", "", "execution_attestation envelope (JSON)")
	evPath := fs.String("evidence", "", "evidence document (compact JWS)")
	bundlePath := fs.String("bundle", "", "the run's proof_bundle envelope (optional)")
	auditPath := fs.String("audit", "", "the gate audit log, JSON Lines (optional)")
	reportPath := fs.String("report", "", "the SystemPromptReport.v1 (optional; needed for template and recipe policy)")
	policyPath := fs.String("policy", "", "policy file (docs/spec/verify-v1.md); default: the strictest policy")
	collDir := fs.String("collateral", "", "collateral directory (CRLs, TDX TCB info; docs/spec/collateral-v1.md, filled by packctl collateral fetch)")
	allowSim := fs.Bool("allow-simulated", false, "accept simulated evidence (proves nothing about hardware)")
	allowRev := fs.Bool("allow-unchecked-revocation", false, "accept evidence without CRLs")
	allowColl := fs.Bool("allow-unchecked-collateral", false, "accept TDX evidence without TCB collateral")
	at := fs.String("at", "", "verification time, RFC 3339 (default: now)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	earKey := fs.String("ear-key", "", "sign an EAR attestation result with this PEM PKCS#8 Ed25519 or ECDSA P-256 key")
	earOut := fs.String("ear-out", "", "write the EAR JWT to this file instead of stdout")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "attestation", "evidence") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	if *earOut != "" && !requireFlags(fs, stderr, "ear-key") {
		return exitUsage
	}
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			errorf(stderr, "verify: --at: not an RFC 3339 time")
			return exitUsage
		}
		now = func() time.Time { return t }
	}
	read := func(path string) ([]byte, bool) {
		if path == "" {
			return nil, true
		}
		b, err := readInput(path)
		if err != nil {
			errorf(stderr, "verify: %v", err)
			return nil, false
		}
		return b, true
	}
	att, ok1 := read(*attPath)
	ev, ok2 := read(*evPath)
	bundle, ok3 := read(*bundlePath)
	auditLog, ok4 := read(*auditPath)
	report, ok5 := read(*reportPath)
	policyRaw, ok6 := read(*policyPath)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return exitCannot
	}
	// Printed only beside an error, which keeps its exit code.
	hint := inputHint(
		input{"--attestation", *attPath, att, kindAttestation}, input{"--evidence", *evPath, ev, kindEvidenceDocument},
		input{"--bundle", *bundlePath, bundle, kindPoHEnvelope}, input{"--report", *reportPath, report, kindReport},
		input{"--policy", *policyPath, policyRaw, kindPolicy})
	printHint := func() {
		if hint != "" {
			errorf(stderr, "verify: %s", hint)
		}
	}
	// A compact JWS contains no newline: a file that ends with one was
	// written by a tool that adds it; evidence_ref hashes the JWS alone.
	ev = bytes.TrimSuffix(bytes.TrimSuffix(ev, []byte("\n")), []byte("\r"))
	policy := &verify.Policy{}
	if policyRaw != nil {
		p, err := verify.ParsePolicy(policyRaw)
		if err != nil {
			errorf(stderr, "verify: policy: %v", err)
			printHint()
			return exitUsage
		}
		policy = p
	}
	opts := verify.Options{
		Now: now, AllowSimulated: *allowSim, AllowUncheckedRevocation: *allowRev, AllowUncheckedCollateral: *allowColl,
		AuditLog: auditLog, Report: report,
	}
	if *collDir != "" {
		c, err := platform.LoadCollateralDir(*collDir)
		if err != nil {
			errorf(stderr, "verify: collateral: %v", err)
			return exitCannot
		}
		opts.Collateral = c
	}
	var signer crypto.Signer
	if *earKey != "" {
		raw, ok := read(*earKey)
		if !ok {
			return exitCannot
		}
		s, err := earresult.ParseSigningKey(raw)
		if err != nil {
			errorf(stderr, "verify: --ear-key: %v", err)
			return exitUsage
		}
		signer = s
	}

	res, verr := verify.Verify(att, ev, bundle, policy, opts)
	code := verifyExit(verr)
	if verr != nil {
		errorf(stderr, "verify: %v", verr)
		printHint()
	}
	if signer == nil || *earOut != "" {
		if *asJSON {
			writeVerifyJSON(stdout, res, verr)
		} else {
			writeSummary(stdout, res, verr)
		}
	}
	if signer == nil || code == exitUsage {
		return code
	}
	ar, err := earresult.New(res, verr, earresult.Options{Now: now(), Policy: policy})
	if err == nil {
		var tok []byte
		if tok, err = earresult.Sign(ar, signer); err == nil {
			tok = append(tok, '\n')
			if *earOut != "" {
				err = os.WriteFile(*earOut, tok, 0o644)
			} else {
				_, err = stdout.Write(tok)
			}
		}
	}
	if err != nil {
		errorf(stderr, "verify: ear: %v", err)
		return exitCannot
	}
	return code
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
			fmt.Fprintf(w, "%s: %s%s\n", upper(verify.Verdict(verr)), ve.Check, code)
			return
		}
		fmt.Fprintf(w, "%s\n", upper(verify.Verdict(verr)))
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
