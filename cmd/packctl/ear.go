package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

const earSynopsis = "ear verify (--jwks FILE | --key FILE) [--json] EAR"

// runEAR is packctl ear: "verify" checks an EAR JWT (from the verifier
// service or packctl verify --ear-key) offline against a key set or one
// public key, as Veraison's arc verify does, and prints what it says. The
// exit code is the verdict the EAR reports, as packctl verify's: 0 when it
// vouches for the attestation, else 2, 3 or 4; a token that does not
// verify is 2, a key file that cannot be read or used is 3.
func runEAR(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintf(stderr, "usage: packctl %s\n", earSynopsis)
		return exitUsage
	}
	fs := newFlagSet("ear verify", earSynopsis, stderr)
	jwksPath := fs.String("jwks", "", "JWK Set of the verifier's EAR keys (GET /.well-known/jwks.json, saved)")
	keyPath := fs.String("key", "", "PEM public key of the EAR key (or its PKCS#8 key file: only the public half is used)")
	asJSON := fs.Bool("json", false, "print the verdict, kid and EAR claims as JSON")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 1, "EAR") {
		return exitUsage
	}
	if (*jwksPath == "") == (*keyPath == "") {
		errorf(stderr, "ear verify: give exactly one of --jwks and --key")
		return exitUsage
	}
	set, err := earKeySet(*jwksPath, *keyPath)
	if err != nil {
		return fail(stderr, "ear verify", exitCannot, err)
	}
	tok, err := readArgOrStdin(fs.Arg(0), 1<<20)
	if err != nil {
		return fail(stderr, "ear verify", exitCannot, err)
	}
	ar, kid, err := earresult.Verify(tok, set)
	if err != nil {
		if *asJSON {
			writeEARJSON(stdout, verify.VerdictRejected, verify.ExitCode(verify.VerdictRejected), kid, nil, err.Error())
		} else {
			fmt.Fprintf(stdout, "REJECTED: the EAR does not verify: %v\n", err)
		}
		return exitRejected
	}
	verdict, code := earVerdict(ar)
	if *asJSON {
		writeEARJSON(stdout, verdict, code, kid, ar, "")
		return code
	}
	writeEARSummary(stdout, ar, kid, verdict)
	return code
}

// earKeySet reads --jwks as it is, or makes a one-key set of --key.
func earKeySet(jwksPath, keyPath string) ([]byte, error) {
	if jwksPath != "" {
		return bounded.ReadFile(jwksPath, 1<<20)
	}
	raw, err := bounded.ReadFile(keyPath, 64<<10)
	if err != nil {
		return nil, err
	}
	k, err := jwk.ParseKey(raw, jwk.WithPEM(true))
	if err != nil {
		return nil, fmt.Errorf("--key: want one PEM public key: %w", err)
	}
	pk, err := k.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	var pub any
	if err := pk.Raw(&pub); err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	return earresult.PublicKeySet(pub)
}

// earVerdict is the verdict an EAR reports, with packctl verify's exit
// code for it: affirming or warning (verified, some checks skipped) is
// verified; none is cannot-check; contraindicated is the annotated
// verdict (rejected or policy-refused), rejected when it names none.
func earVerdict(ar *ear.AttestationResult) (string, int) {
	worst := ear.TrustTierAffirming
	annotated := ""
	for _, name := range slices.Sorted(maps.Keys(ar.Submods)) {
		ap := ar.Submods[name]
		if ap.Status == nil {
			return verify.VerdictCannotCheck, exitCannot
		}
		if *ap.Status == ear.TrustTierNone {
			return verify.VerdictCannotCheck, exitCannot
		}
		if *ap.Status > worst {
			worst = *ap.Status
		}
		if ap.VeraisonAnnotatedEvidence != nil {
			if v, ok := (*ap.VeraisonAnnotatedEvidence)["verdict"].(string); ok && annotated == "" {
				annotated = v
			}
		}
	}
	switch {
	case worst <= ear.TrustTierWarning:
		return verify.VerdictVerified, exitOK
	case annotated == verify.VerdictPolicy:
		return verify.VerdictPolicy, exitPolicy
	}
	return verify.VerdictRejected, exitRejected
}

func writeEARSummary(w io.Writer, ar *ear.AttestationResult, kid, verdict string) {
	fmt.Fprintf(w, "EAR signed by key %s\n", kid)
	if ar.IssuedAt != nil {
		fmt.Fprintf(w, "  issued at   %s\n", time.Unix(*ar.IssuedAt, 0).UTC().Format(time.RFC3339))
	}
	if ar.VerifierID != nil && ar.VerifierID.Build != nil && ar.VerifierID.Developer != nil {
		fmt.Fprintf(w, "  verifier    %s (%s)\n", *ar.VerifierID.Build, *ar.VerifierID.Developer)
	}
	for _, name := range slices.Sorted(maps.Keys(ar.Submods)) {
		ap := ar.Submods[name]
		status := "none"
		if ap.Status != nil {
			status = ap.Status.String()
		}
		fmt.Fprintf(w, "  submod %s: %s", name, status)
		if ap.AppraisalPolicyID != nil {
			fmt.Fprintf(w, ", policy %s", *ap.AppraisalPolicyID)
		}
		fmt.Fprintln(w)
		if ap.TrustVector != nil {
			tv := ap.TrustVector.AsMap()
			for _, k := range slices.Sorted(maps.Keys(tv)) {
				if tv[k] != ear.NoClaim {
					fmt.Fprintf(w, "    %-18s %d (%s)\n", k, tv[k], tv[k].GetTier())
				}
			}
		}
		if ap.VeraisonAnnotatedEvidence != nil {
			if c, ok := (*ap.VeraisonAnnotatedEvidence)["failed_check"].(string); ok {
				fmt.Fprintf(w, "    failed check %s\n", c)
			}
		}
	}
	note := ""
	for _, ap := range ar.Submods {
		if ap.Status != nil && *ap.Status == ear.TrustTierWarning && verdict == verify.VerdictVerified {
			note = " WITH WARNINGS: read the trust vector"
		}
	}
	fmt.Fprintf(w, "%s%s (as the EAR reports; its signature and claims verified)\n", upper(verdict), note)
}

func writeEARJSON(w io.Writer, verdict string, code int, kid string, ar *ear.AttestationResult, msg string) {
	out := map[string]any{"verdict": verdict, "exit_code": code}
	if kid != "" {
		out["kid"] = kid
	}
	if ar != nil {
		out["ear"] = ar.AsMap()
	}
	if msg != "" {
		out["error"] = msg
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
