package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
)

const policySynopsis = "policy init --from-attester URL|FILE -o policy.json [--pin LIST] [flags]"

const policyInitSynopsis = "policy init --from-attester URL|FILE -o policy.json [--pin measurement,did,ak,tcb,templates]\n" +
	"    [--challenge B64U] [--trusted FILE] [--allow-simulated] [--allow-unchecked-revocation]\n" +
	"    [--allow-unchecked-collateral] [--collateral DIR] [--force] [--json]\n\n" +
	"Writes a verify policy (docs/spec/verify-v1.md) that pins what the attester presents\n" +
	"now: TRUST ON FIRST USE. It fetches GET /v1/identity from the attester's URL with a\n" +
	"fresh random challenge (or reads a saved identity document or key attestation FILE),\n" +
	"verifies the key attestation as far as the evidence and collateral allow, and pins\n" +
	"the chosen values. The policy is only as good as that first contact: review it and\n" +
	"commit it. An existing -o file is refused without --force. Simulated attesters need\n" +
	"--allow-simulated (and the policy then allows simulated evidence).\n" +
	"Pins: measurement (default), did (the attester DID), ak (TPM AK Name; added for TPM\n" +
	"evidence), tcb (minimum TCB: the one seen), templates (from --trusted FILE)."

// Pins of policy init.
const (
	pinMeasurement = "measurement"
	pinDID         = "did"
	pinAK          = "ak"
	pinTCB         = "tcb"
	pinTemplates   = "templates"
)

var allPins = []string{pinMeasurement, pinDID, pinAK, pinTCB, pinTemplates}

func runPolicy(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: packctl %s\n", policySynopsis)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "usage: packctl %s\n", policySynopsis)
		return exitOK
	case "init":
		return runPolicyInit(args[1:], stdout, stderr)
	}
	errorf(stderr, "policy: unknown subcommand %q", args[0])
	return exitUsage
}

// policyInitJSON is what policy init prints.
type policyInitJSON struct {
	PolicyFile  string   `json:"policy_file"`
	PolicyID    string   `json:"policy_id"`
	Trust       string   `json:"trust"`
	Source      string   `json:"source"`
	Fresh       bool     `json:"fresh_challenge"`
	AttesterDID string   `json:"attester_did"`
	Simulated   bool     `json:"simulated"`
	Pinned      []string `json:"pinned"`
	Warnings    []string `json:"warnings"`
}

func runPolicyInit(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("policy init", policyInitSynopsis, stderr)
	from := fs.String("from-attester", "", "the attester's API `URL` (http/https), or a FILE with its GET /v1/identity response or key attestation (required)")
	out := fs.String("o", "", "policy `file` to write (required)")
	pinList := fs.String("pin", pinMeasurement, "comma-separated `values` to pin: "+strings.Join(allPins, ", "))
	challengeB64u := fs.String("challenge", "", "with a FILE: the b64u `challenge` the identity was fetched with")
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex, pinned with --pin templates")
	allowSim := fs.Bool("allow-simulated", false, "accept a simulated attester (proves nothing about hardware); the policy allows simulated evidence")
	allowRev := fs.Bool("allow-unchecked-revocation", false, "accept evidence without CRLs; the policy allows it too")
	allowColl := fs.Bool("allow-unchecked-collateral", false, "accept TDX evidence without TCB collateral; the policy allows it too")
	collDir := fs.String("collateral", "", "collateral `dir` (docs/spec/verify-platform.md)")
	force := fs.Bool("force", false, "overwrite an existing -o file")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "from-attester", "o") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	pins := map[string]bool{}
	for _, p := range strings.Split(*pinList, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPins, p) {
			errorf(stderr, "policy init: --pin: unknown value %q (want %s)", p, strings.Join(allPins, ", "))
			return exitUsage
		}
		pins[p] = true
	}
	if pins[pinTemplates] && !requireFlags(fs, stderr, "trusted") {
		return exitUsage
	}
	if *trusted != "" && !pins[pinTemplates] {
		errorf(stderr, "policy init: --trusted is for --pin templates")
		return exitUsage
	}
	if *out == "-" {
		errorf(stderr, "policy init: -o must name a file")
		return exitUsage
	}
	if !*force {
		if _, err := os.Lstat(*out); err == nil {
			errorf(stderr, "policy init: %s %v", *out, errExists)
			return exitUsage
		}
	}
	var templates map[string]string
	if *trusted != "" {
		b, err := bounded.ReadFile(*trusted, 64<<10)
		if err != nil {
			errorf(stderr, "policy init: %v", err)
			return exitCannot
		}
		if templates, err = promptpack.ParseTrusted(b); err != nil {
			errorf(stderr, "policy init: --trusted %s: %v", *trusted, err)
			return exitUsage
		}
	}
	opts := verify.Options{Now: time.Now, AllowSimulated: *allowSim, AllowUncheckedRevocation: *allowRev, AllowUncheckedCollateral: *allowColl}
	if *collDir != "" {
		c, err := platform.LoadCollateralDir(*collDir)
		if err != nil {
			errorf(stderr, "policy init: collateral: %v", err)
			return exitCannot
		}
		opts.Collateral = c
	}

	// The first contact.
	var raw, challenge []byte
	var err error
	isURL := strings.HasPrefix(*from, "https://") || strings.HasPrefix(*from, "http://")
	if isURL {
		if *challengeB64u != "" {
			errorf(stderr, "policy init: --challenge is for a saved FILE; a URL gets a fresh one")
			return exitUsage
		}
		challenge = make([]byte, 32)
		if _, err := rand.Read(challenge); err != nil {
			errorf(stderr, "policy init: %v", err)
			return exitCannot
		}
		errorf(stderr, "policy init: fetching the attester identity from %s", *from)
		if raw, err = fetchIdentity(*from, challenge); err != nil {
			errorf(stderr, "policy init: %v", err)
			return exitCannot
		}
	} else {
		if raw, err = readInput(*from); err != nil {
			errorf(stderr, "policy init: %v", err)
			return exitCannot
		}
	}
	var id *identityDoc
	var jws []byte
	switch k := sniff(raw); k {
	case kindIdentity:
		if id, err = parseIdentity(raw); err != nil {
			errorf(stderr, "policy init: attester identity: %v", err)
			return exitRejected
		}
		jws = []byte(id.KeyAttestation)
	case kindEvidenceDocument:
		jws = bytes.TrimSpace(raw)
	default:
		errorf(stderr, "policy init: %s is %s, not an attester identity or key attestation", *from, kindPhrase(k))
		return exitUsage
	}
	var warnings []string
	if !isURL {
		if *challengeB64u != "" {
			if challenge, err = b64u.Decode(*challengeB64u); err != nil {
				errorf(stderr, "policy init: --challenge: %v", err)
				return exitUsage
			}
		} else {
			// A saved document proves nothing about when it was made; its own
			// challenge lets the rest of the key attestation be checked.
			key, err := evidencedoc.SignerKey(jws)
			if err == nil {
				var doc *evidencedoc.Document
				if doc, err = evidencedoc.Parse(jws, key); err == nil && doc.Key != nil {
					challenge, err = b64u.Decode(doc.Key.ChallengeB64u)
				}
			}
			if err != nil {
				errorf(stderr, "policy init: key attestation: %v", err)
				return exitRejected
			}
			warnings = append(warnings, "no --challenge: the saved key attestation's own challenge was used, so nothing shows when it was made")
		}
	}

	// Verify with a policy that accepts any measurement and, for TPM, any
	// AK: those are the values being learned.
	opts.AllowUntrustedTPMAK = true
	res, err := verify.VerifyKeyAttestation(jws, challenge, &verify.Policy{AllowAnyMeasurement: true}, opts)
	if err != nil {
		errorf(stderr, "policy init: attester key attestation: %v", err)
		if errors.Is(err, verify.ErrPolicy) && !*allowSim {
			errorf(stderr, "policy init: (a simulated attester needs --allow-simulated)")
		}
		return verifyExit(err)
	}
	if id != nil {
		if res.AttesterDID != id.DID {
			errorf(stderr, "policy init: the key attestation is signed by %s, not by the identity's DID %s", res.AttesterDID, id.DID)
			return exitRejected
		}
		k, err := envelope.ParsePublicKey(id.PackPublicKey)
		if err != nil || res.RecipientX25519 == nil || !bytes.Equal(res.RecipientX25519, k.Bytes()) {
			errorf(stderr, "policy init: the key attestation does not bind the identity's pack key")
			return exitRejected
		}
	}
	for _, w := range res.Warnings {
		if !strings.Contains(w, "any measurement") {
			warnings = append(warnings, w)
		}
	}

	// The policy.
	pol := &verify.Policy{
		AllowSimulated:           res.Simulated,
		AllowUncheckedRevocation: *allowRev,
		AllowUncheckedCollateral: *allowColl,
	}
	var pinned []string
	hasTPM, hasTCB := false, false
	for _, pr := range res.Platform {
		if pr.Platform == evidence.PlatformTPM {
			hasTPM = true
		} else {
			hasTCB = true
		}
	}
	if hasTPM && !pins[pinAK] {
		pins[pinAK] = true
		warnings = append(warnings, "TPM evidence: the AK Name is pinned too (a TPM policy without a trusted AK admits nothing)")
	}
	if pins[pinAK] && !hasTPM {
		errorf(stderr, "policy init: --pin ak: the key attestation carries no TPM quote")
		return exitUsage
	}
	if pins[pinTCB] && !hasTCB {
		errorf(stderr, "policy init: --pin tcb: the key attestation carries no SEV-SNP or TDX evidence")
		return exitUsage
	}
	for i, pr := range res.Platform {
		if pins[pinMeasurement] && !slices.ContainsFunc(pol.Measurements, func(m []byte) bool { return bytes.Equal(m, pr.Measurement) }) {
			pol.Measurements = append(pol.Measurements, bytes.Clone(pr.Measurement))
			pinned = append(pinned, fmt.Sprintf("measurements_b64u: %s (evidence[%d] %s)", b64u.Encode(pr.Measurement), i, pr.Platform))
		}
		if pins[pinAK] && pr.TPM != nil && !slices.ContainsFunc(pol.TrustedTPMAKs, func(m []byte) bool { return bytes.Equal(m, pr.TPM.AKName) }) {
			pol.TrustedTPMAKs = append(pol.TrustedTPMAKs, bytes.Clone(pr.TPM.AKName))
			pinned = append(pinned, fmt.Sprintf("trusted_tpm_ak_names_hex: %x (evidence[%d])", pr.TPM.AKName, i))
		}
		if pins[pinTCB] {
			switch pr.Platform {
			case evidence.PlatformSEVSNP:
				v, err := strconv.ParseUint(pr.TCB, 16, 64)
				if err != nil {
					errorf(stderr, "policy init: evidence[%d]: tcb %q", i, pr.TCB)
					return exitRejected
				}
				if pol.MinSEVSNPTCB == 0 {
					pol.MinSEVSNPTCB = v
					pinned = append(pinned, fmt.Sprintf("min_sev_snp_tcb: %016x (evidence[%d])", v, i))
				}
			case evidence.PlatformTDX:
				b, err := hex.DecodeString(pr.TCB)
				if err != nil || len(b) != 16 {
					errorf(stderr, "policy init: evidence[%d]: tcb %q", i, pr.TCB)
					return exitRejected
				}
				if pol.MinTDXTeeTCBSVN == ([16]byte{}) {
					copy(pol.MinTDXTeeTCBSVN[:], b)
					pinned = append(pinned, fmt.Sprintf("min_tdx_tee_tcb_svn: %s (evidence[%d])", pr.TCB, i))
				}
			}
		}
	}
	if pins[pinDID] {
		pol.TrustedAttesterDIDs = []string{res.AttesterDID}
		pinned = append(pinned, "trusted_attester_dids: "+res.AttesterDID)
		if id != nil && !id.IdentitySealed {
			warnings = append(warnings, "the attester's identity is not sealed: its DID changes when it restarts, and the pinned DID then refuses it")
		}
	}
	if pins[pinTemplates] {
		pol.TrustedTemplates = templates
		pinned = append(pinned, fmt.Sprintf("trusted_templates: %d from %s (not from the attester: the identity does not carry them)", len(templates), *trusted))
	}
	if res.Simulated {
		warnings = append(warnings, "the attester is SIMULATED: the policy allows simulated evidence, which proves nothing about hardware")
	}
	enc, err := pol.Encode()
	if err != nil {
		errorf(stderr, "policy init: %v", err)
		return exitCannot
	}
	// The policy must admit the key attestation it was made from.
	back, err := verify.ParsePolicy(enc)
	if err == nil {
		check := opts
		check.AllowUntrustedTPMAK = false
		_, err = verify.VerifyKeyAttestation(jws, challenge, back, check)
	}
	if err != nil {
		errorf(stderr, "policy init: the new policy does not admit the attester it was made from: %v", err)
		return exitCannot
	}
	if err := writeOutput(*out, append(enc, '\n'), 0o644, stdout, *force); err != nil {
		errorf(stderr, "policy init: %v", err)
		if errors.Is(err, errExists) {
			return exitUsage
		}
		return exitCannot
	}
	errorf(stderr, "policy init: TRUST ON FIRST USE: %s pins what %s presented now; review it before you commit it", *out, *from)
	for _, w := range warnings {
		errorf(stderr, "policy init: warning: %s", w)
	}
	sum := policyInitJSON{
		PolicyFile: *out, PolicyID: back.ID(), Trust: "trust-on-first-use", Source: *from, Fresh: isURL || *challengeB64u != "",
		AttesterDID: res.AttesterDID, Simulated: res.Simulated, Pinned: pinned, Warnings: warnings,
	}
	if sum.Warnings == nil {
		sum.Warnings = []string{}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "policy %s (%s)\n", sum.PolicyFile, sum.PolicyID)
	fmt.Fprintf(stdout, "trust: trust-on-first-use from %s (fresh challenge: %t)\n", sum.Source, sum.Fresh)
	sim := ""
	if res.Simulated {
		sim = " (SIMULATED)"
	}
	fmt.Fprintf(stdout, "attester: %s%s\n", sum.AttesterDID, sim)
	for _, p := range pinned {
		fmt.Fprintf(stdout, "pinned %s\n", p)
	}
	return exitOK
}

// kindPhrase names a sniffed kind for messages.
func kindPhrase(k string) string {
	switch k {
	case kindUnknown:
		return "not a document packctl knows"
	case kindIdentity:
		return "an attester identity"
	case kindEvidenceDocument:
		return "an evidence document"
	case kindAttestation:
		return "an execution attestation"
	case kindPoHEnvelope:
		return "a proof bundle or other PoH envelope"
	case kindManifest:
		return "a sealed-pack manifest"
	case kindEnvelope:
		return "a sealed pack"
	case kindPack:
		return "a plaintext pack"
	case kindReport:
		return "a SystemPromptReport"
	case kindDisclosure:
		return "a disclosure"
	case kindTPMCert:
		return "a TPM AK certification record"
	case kindPolicy:
		return "a verify policy"
	}
	return "a " + k
}
