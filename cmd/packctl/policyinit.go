package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
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

const policyInitSynopsis = "policy init --from-attester URL|FILE -o policy.json [--pin measurement,did,ak,tcb,boot,templates]\n" +
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
	"evidence, unless Google's EK/AK CA certifies the AK: then trust_gce_ak_certs),\n" +
	"tcb (minimum TCB: the one seen), boot (the boot chain replayed from the\n" +
	"evidence's event log: firmware, and every kernel (boot application), command line\n" +
	"and initrd event, as measured), templates\n" +
	"(from --trusted FILE)."

// Pins of policy init.
const (
	pinMeasurement = "measurement"
	pinDID         = "did"
	pinAK          = "ak"
	pinTCB         = "tcb"
	pinBoot        = "boot"
	pinTemplates   = "templates"
)

var allPins = []string{pinMeasurement, pinDID, pinAK, pinTCB, pinBoot, pinTemplates}

func runPolicy(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return dispatch("policy", policySynopsis, subcommands{"init": runPolicyInit}, args, stdout, stderr)
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

// policyInit is the state of policy init: its flags, then what each step
// learns for the next.
type policyInit struct {
	stdout, stderr io.Writer
	fs             *flag.FlagSet

	relaxFlags
	from, out, pinList, challengeB64u, trusted string
	force, asJSON                              bool

	pins      map[string]bool
	templates map[string]string
	opts      verify.Options
	isURL     bool
	raw       []byte // what the first contact returned
	challenge []byte
	id        *identityDoc // nil for a bare key attestation
	jws       []byte       // the key attestation
	res       *verify.KeyResult
	pol       *verify.Policy
	back      *verify.Policy // pol as written and parsed back
	pinned    []string
	warnings  []string
}

func runPolicyInit(args []string, stdout, stderr io.Writer) int {
	pi := &policyInit{stdout: stdout, stderr: stderr, fs: newFlagSet("policy init", policyInitSynopsis, stderr)}
	pi.defineFlags()
	if code, ok := parseFlags(pi.fs, args); !ok {
		return code
	}
	if !requireFlags(pi.fs, stderr, "from-attester", "o") || !wantArgs(pi.fs, stderr, 0, "") {
		return exitUsage
	}
	return runSteps(
		pi.parsePins,
		pi.checkOutput,
		pi.loadTrusted,
		pi.loadCollateral,
		pi.firstContact,
		pi.readKeyAttestation,
		pi.savedChallenge,
		pi.verifyAttester,
		pi.checkPins,
		pi.pinPlatforms,
		pi.pinRest,
		pi.writePolicy,
		pi.printSummary,
	)
}

func (pi *policyInit) defineFlags() {
	fs := pi.fs
	fs.StringVar(&pi.from, "from-attester", "", "the attester's API `URL` (http/https), or a FILE with its GET /v1/identity response or key attestation (required)")
	fs.StringVar(&pi.out, "o", "", "policy `file` to write (required)")
	fs.StringVar(&pi.pinList, "pin", pinMeasurement, "comma-separated `values` to pin: "+strings.Join(allPins, ", "))
	fs.StringVar(&pi.challengeB64u, "challenge", "", "with a FILE: the b64u `challenge` the identity was fetched with")
	fs.StringVar(&pi.trusted, "trusted", "", "JSON `file`: template name -> sha256:hex, pinned with --pin templates")
	fs.BoolVar(&pi.allowSim, "allow-simulated", false, "accept a simulated attester (proves nothing about hardware); the policy allows simulated evidence (simulated roots publish no CRL: add --allow-unchecked-revocation)")
	fs.BoolVar(&pi.allowRev, "allow-unchecked-revocation", false, "accept evidence without CRLs; the policy allows it too")
	fs.BoolVar(&pi.allowColl, "allow-unchecked-collateral", false, "accept TDX evidence without TCB collateral; the policy allows it too")
	fs.StringVar(&pi.collDir, "collateral", "", "collateral `dir` (docs/spec/verify-platform.md)")
	fs.BoolVar(&pi.force, "force", false, "overwrite an existing -o file")
	fs.BoolVar(&pi.asJSON, "json", false, "print the summary as JSON")
}

// parsePins reads --pin and checks it against --trusted.
func (pi *policyInit) parsePins() int {
	pi.pins = map[string]bool{}
	for _, p := range strings.Split(pi.pinList, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPins, p) {
			errorf(pi.stderr, "policy init: --pin: unknown value %q (want %s)", p, strings.Join(allPins, ", "))
			return exitUsage
		}
		pi.pins[p] = true
	}
	if pi.pins[pinTemplates] && !requireFlags(pi.fs, pi.stderr, "trusted") {
		return exitUsage
	}
	if pi.trusted != "" && !pi.pins[pinTemplates] {
		errorf(pi.stderr, "policy init: --trusted is for --pin templates")
		return exitUsage
	}
	return exitOK
}

// checkOutput refuses -o - and, without --force, an existing -o file.
func (pi *policyInit) checkOutput() int {
	if pi.out == "-" {
		errorf(pi.stderr, "policy init: -o must name a file")
		return exitUsage
	}
	if !pi.force {
		if _, err := os.Lstat(pi.out); err == nil {
			errorf(pi.stderr, "policy init: %s %v", pi.out, errExists)
			return exitUsage
		}
	}
	return exitOK
}

// loadTrusted reads the --trusted templates.
func (pi *policyInit) loadTrusted() int {
	if pi.trusted == "" {
		return exitOK
	}
	b, err := bounded.ReadFile(pi.trusted, 64<<10)
	if err != nil {
		errorf(pi.stderr, "policy init: %v", err)
		return exitCannot
	}
	if pi.templates, err = promptpack.ParseTrusted(b); err != nil {
		errorf(pi.stderr, "policy init: --trusted %s: %v", pi.trusted, err)
		return exitUsage
	}
	return exitOK
}

// loadCollateral sets the verify options, with the --collateral folder.
func (pi *policyInit) loadCollateral() int {
	return pi.loadOptions(&pi.opts, time.Now, pi.stderr, "policy init")
}

// firstContact fetches the identity with a fresh challenge from a URL, or
// reads the saved FILE.
func (pi *policyInit) firstContact() int {
	var err error
	pi.isURL = strings.HasPrefix(pi.from, "https://") || strings.HasPrefix(pi.from, "http://")
	if !pi.isURL {
		if pi.raw, err = readInput(pi.from); err != nil {
			errorf(pi.stderr, "policy init: %v", err)
			return exitCannot
		}
		return exitOK
	}
	if pi.challengeB64u != "" {
		errorf(pi.stderr, "policy init: --challenge is for a saved FILE; a URL gets a fresh one")
		return exitUsage
	}
	pi.challenge = make([]byte, 32)
	if _, err := rand.Read(pi.challenge); err != nil {
		errorf(pi.stderr, "policy init: %v", err)
		return exitCannot
	}
	errorf(pi.stderr, "policy init: fetching the attester identity from %s", pi.from)
	if pi.raw, err = fetchIdentity(pi.from, pi.challenge); err != nil {
		errorf(pi.stderr, "policy init: %v", err)
		return exitCannot
	}
	return exitOK
}

// readKeyAttestation takes the key attestation out of an identity document,
// or takes a bare one.
func (pi *policyInit) readKeyAttestation() int {
	var err error
	switch k := sniff(pi.raw); k {
	case kindIdentity:
		if pi.id, err = parseIdentity(pi.raw); err != nil {
			errorf(pi.stderr, "policy init: attester identity: %v", err)
			return exitRejected
		}
		pi.jws = []byte(pi.id.KeyAttestation)
	case kindEvidenceDocument:
		pi.jws = bytes.TrimSpace(pi.raw)
	default:
		errorf(pi.stderr, "policy init: %s is %s, not an attester identity or key attestation", pi.from, kindPhrase(k))
		return exitUsage
	}
	return exitOK
}

// savedChallenge sets the challenge of a saved FILE: --challenge, or the
// key attestation's own.
func (pi *policyInit) savedChallenge() int {
	if pi.isURL {
		return exitOK
	}
	var err error
	if pi.challengeB64u != "" {
		if pi.challenge, err = b64u.Decode(pi.challengeB64u); err != nil {
			errorf(pi.stderr, "policy init: --challenge: %v", err)
			return exitUsage
		}
		return exitOK
	}
	// A saved document proves nothing about when it was made; its own
	// challenge lets the rest of the key attestation be checked.
	key, err := evidencedoc.SignerKey(pi.jws)
	if err == nil {
		var doc *evidencedoc.Document
		if doc, err = evidencedoc.Parse(pi.jws, key); err == nil && doc.Key != nil {
			pi.challenge, err = b64u.Decode(doc.Key.ChallengeB64u)
		}
	}
	if err != nil {
		errorf(pi.stderr, "policy init: key attestation: %v", err)
		return exitRejected
	}
	pi.warnings = append(pi.warnings, "no --challenge: the saved key attestation's own challenge was used, so nothing shows when it was made")
	return exitOK
}

// verifyAttester verifies the key attestation with a policy that accepts
// any measurement and, for TPM, any AK: those are the values being
// learned. It must bind the identity's DID and pack key.
func (pi *policyInit) verifyAttester() int {
	pi.opts.AllowUntrustedTPMAK = true
	res, err := verify.VerifyKeyAttestation(pi.jws, pi.challenge, &verify.Policy{AllowAnyMeasurement: true}, pi.opts)
	if err != nil {
		errorf(pi.stderr, "policy init: attester key attestation: %v", err)
		if errors.Is(err, verify.ErrPolicy) && !pi.allowSim {
			errorf(pi.stderr, "policy init: (a simulated attester needs --allow-simulated)")
		}
		if ve, ok := errors.AsType[*verify.Error](err); ok && errors.Is(err, verify.ErrCannotCheck) && strings.HasSuffix(ve.Check, "/revocation") {
			errorf(pi.stderr, "policy init: (no CRL was supplied for this evidence: give --collateral DIR with its vendor's CRL, or accept that with --allow-unchecked-revocation; simulated roots publish no CRL, so a simulated attester needs the flag)")
		}
		return verifyExit(err)
	}
	pi.res = res
	if id := pi.id; id != nil {
		if res.AttesterDID != id.DID {
			errorf(pi.stderr, "policy init: the key attestation is signed by %s, not by the identity's DID %s", res.AttesterDID, id.DID)
			return exitRejected
		}
		k, err := envelope.ParsePublicKey(id.PackPublicKey)
		if err != nil || res.RecipientX25519 == nil || !bytes.Equal(res.RecipientX25519, k.Bytes()) {
			errorf(pi.stderr, "policy init: the key attestation does not bind the identity's pack key")
			return exitRejected
		}
	}
	for _, w := range res.Warnings {
		if !strings.Contains(w, "any measurement") {
			pi.warnings = append(pi.warnings, w)
		}
	}
	return exitOK
}

// gceCertifiedAK reports whether every TPM AK of the key attestation is
// trusted by its certificate to Google's EK/AK CA (a GCE vTPM): then the
// policy trusts such certificates instead of pinning one AK Name, which a
// new VM would change.
func (pi *policyInit) gceCertifiedAK() bool {
	opts := pi.opts
	opts.AllowUntrustedTPMAK = false
	_, err := verify.VerifyKeyAttestation(pi.jws, pi.challenge, &verify.Policy{AllowAnyMeasurement: true, TrustGCEAKCerts: true, AllowSimulated: pi.res.Simulated}, opts)
	return err == nil
}

// checkPins starts the policy and checks the pins against the evidence
// seen: TPM evidence always pins its AK.
func (pi *policyInit) checkPins() int {
	pi.pol = &verify.Policy{
		AllowSimulated:           pi.res.Simulated,
		AllowUncheckedRevocation: pi.allowRev,
		AllowUncheckedCollateral: pi.allowColl,
	}
	hasTPM, hasTCB := false, false
	for _, pr := range pi.res.Platform {
		switch pr.Platform {
		case evidence.PlatformTPM:
			hasTPM = true
		case evidence.PlatformNVIDIAGPU:
		default:
			hasTCB = true
		}
	}
	switch {
	case hasTPM && pi.gceCertifiedAK():
		pi.pol.TrustGCEAKCerts = true
		pi.pinned = append(pi.pinned, "trust_gce_ak_certs: true (the TPM AK's certificate chains to Google's EK/AK CA)")
	case hasTPM && !pi.pins[pinAK]:
		pi.pins[pinAK] = true
		pi.warnings = append(pi.warnings, "TPM evidence: the AK Name is pinned too (a TPM policy without a trusted AK admits nothing)")
	}
	if pi.pins[pinAK] && !hasTPM {
		errorf(pi.stderr, "policy init: --pin ak: the key attestation carries no TPM quote")
		return exitUsage
	}
	if pi.pins[pinTCB] && !hasTCB {
		errorf(pi.stderr, "policy init: --pin tcb: the key attestation carries no SEV-SNP or TDX evidence")
		return exitUsage
	}
	return exitOK
}

// pinPlatforms pins the measurement, AK and TCB of each evidence item.
func (pi *policyInit) pinPlatforms() int {
	pol := pi.pol
	for i, pr := range pi.res.Platform {
		if pi.pins[pinMeasurement] && !slices.ContainsFunc(pol.Measurements, func(m []byte) bool { return bytes.Equal(m, pr.Measurement) }) {
			pol.Measurements = append(pol.Measurements, bytes.Clone(pr.Measurement))
			pi.pinned = append(pi.pinned, fmt.Sprintf("measurements_b64u: %s (evidence[%d] %s)", b64u.Encode(pr.Measurement), i, pr.Platform))
		}
		if pi.pins[pinAK] && pr.TPM != nil && !slices.ContainsFunc(pol.TrustedTPMAKs, func(m []byte) bool { return bytes.Equal(m, pr.TPM.AKName) }) {
			pol.TrustedTPMAKs = append(pol.TrustedTPMAKs, bytes.Clone(pr.TPM.AKName))
			pi.pinned = append(pi.pinned, fmt.Sprintf("trusted_tpm_ak_names_hex: %x (evidence[%d])", pr.TPM.AKName, i))
		}
		if pr.Platform == evidence.PlatformNVIDIAGPU && !pol.RequireGPU {
			// The attester has GPU evidence: attestations without it are
			// refused.
			pol.RequireGPU = true
			pi.pinned = append(pi.pinned, fmt.Sprintf("require_gpu: true (evidence[%d] %s)", i, pr.Platform))
			// Nothing can check the GPU chain's revocation offline yet; say
			// so rather than write a policy that refuses every GPU.
			pol.AllowUncheckedGPURevocation = true
			pi.warnings = append(pi.warnings, "GPU evidence: allow_unchecked_gpu_revocation is set (the GPU chain's revocation, NVIDIA OCSP, is not checked offline)")
		}
		if pi.pins[pinTCB] {
			if code := pi.pinTCB(i, pr); code != exitOK {
				return code
			}
		}
		if pi.pins[pinBoot] {
			if code := pi.pinBoot(i, pr); code != exitOK {
				return code
			}
		}
	}
	return exitOK
}

// pinBoot pins every reference value of the boot chain replayed from the
// evidence's event log: the firmware, and every kernel (boot application),
// command line and initrd event, as a policy must list all of them when
// the registers are not pinned (verify-platform section 8). Evidence
// without a log cannot be pinned.
func (pi *policyInit) pinBoot(i int, pr *platform.Result) int {
	if pr.Boot == nil {
		errorf(pi.stderr, "policy init: --pin boot: evidence[%d] (%s) carries no event log", i, pr.Platform)
		return exitCannot
	}
	pol, b := pi.pol, pr.Boot
	var firmware [][]byte
	if b.Firmware != nil {
		firmware = [][]byte{b.Firmware}
	}
	for _, v := range []struct {
		member string
		vals   [][]byte
		dst    *[][]byte
	}{
		{"boot_firmware_hex", firmware, &pol.BootFirmware}, {"boot_kernel_hex", b.Kernels, &pol.BootKernel},
		{"boot_command_line_hex", b.CommandLines, &pol.BootCommandLine}, {"boot_initrd_hex", b.Initrds, &pol.BootInitrd},
	} {
		for j, val := range v.vals {
			if slices.ContainsFunc(*v.dst, func(m []byte) bool { return bytes.Equal(m, val) }) {
				continue
			}
			*v.dst = append(*v.dst, bytes.Clone(val))
			pi.pinned = append(pi.pinned, fmt.Sprintf("%s: %x (evidence[%d] %s event log%s)", v.member, val, i, b.Log, eventOrder(j, len(v.vals))))
		}
	}
	return exitOK
}

// eventOrder says which of n events of its kind event j is, when there
// are several.
func eventOrder(j, n int) string {
	switch {
	case n < 2:
		return ""
	case j == n-1:
		return fmt.Sprintf(", %d of %d, the last", j+1, n)
	}
	return fmt.Sprintf(", %d of %d", j+1, n)
}

// pinTCB pins the first SEV-SNP and the first TDX TCB seen as minimums.
func (pi *policyInit) pinTCB(i int, pr *platform.Result) int {
	pol := pi.pol
	switch pr.Platform {
	case evidence.PlatformSEVSNP, evidence.PlatformAzureSNP:
		v, err := strconv.ParseUint(pr.TCB, 16, 64)
		if err != nil {
			errorf(pi.stderr, "policy init: evidence[%d]: tcb %q", i, pr.TCB)
			return exitRejected
		}
		if pol.MinSEVSNPTCB == 0 {
			pol.MinSEVSNPTCB = v
			pi.pinned = append(pi.pinned, fmt.Sprintf("min_sev_snp_tcb: %016x (evidence[%d])", v, i))
		}
	case evidence.PlatformTDX, evidence.PlatformAzureTDX:
		b, err := hex.DecodeString(pr.TCB)
		if err != nil || len(b) != 16 {
			errorf(pi.stderr, "policy init: evidence[%d]: tcb %q", i, pr.TCB)
			return exitRejected
		}
		if pol.MinTDXTeeTCBSVN == ([16]byte{}) {
			copy(pol.MinTDXTeeTCBSVN[:], b)
			pi.pinned = append(pi.pinned, fmt.Sprintf("min_tdx_tee_tcb_svn: %s (evidence[%d])", pr.TCB, i))
		}
	}
	return exitOK
}

// pinRest pins the attester DID and the trusted templates.
func (pi *policyInit) pinRest() int {
	if pi.pins[pinDID] {
		pi.pol.TrustedAttesterDIDs = []string{pi.res.AttesterDID}
		pi.pinned = append(pi.pinned, "trusted_attester_dids: "+pi.res.AttesterDID)
		if pi.id != nil && !pi.id.IdentitySealed {
			pi.warnings = append(pi.warnings, "the attester's identity is not sealed: its DID changes when it restarts, and the pinned DID then refuses it")
		}
	}
	if pi.pins[pinTemplates] {
		pi.pol.TrustedTemplates = pi.templates
		pi.pinned = append(pi.pinned, fmt.Sprintf("trusted_templates: %d from %s (not from the attester: the identity does not carry them)", len(pi.templates), pi.trusted))
	}
	if pi.res.Simulated {
		pi.warnings = append(pi.warnings, "the attester is SIMULATED: the policy allows simulated evidence, which proves nothing about hardware")
	}
	return exitOK
}

// writePolicy encodes the policy, checks that it admits the key
// attestation it was made from, and writes it.
func (pi *policyInit) writePolicy() int {
	enc, err := pi.pol.Encode()
	if err != nil {
		errorf(pi.stderr, "policy init: %v", err)
		return exitCannot
	}
	back, err := verify.ParsePolicy(enc)
	if err == nil {
		check := pi.opts
		check.AllowUntrustedTPMAK = false
		_, err = verify.VerifyKeyAttestation(pi.jws, pi.challenge, back, check)
	}
	if err != nil {
		errorf(pi.stderr, "policy init: the new policy does not admit the attester it was made from: %v", err)
		return exitCannot
	}
	pi.back = back
	if err := writeOutput(pi.out, append(enc, '\n'), 0o644, pi.stdout, pi.force); err != nil {
		errorf(pi.stderr, "policy init: %v", err)
		if errors.Is(err, errExists) {
			return exitUsage
		}
		return exitCannot
	}
	return exitOK
}

// printSummary prints the trust-on-first-use notice and warnings, then
// the summary.
func (pi *policyInit) printSummary() int {
	stdout, stderr, res := pi.stdout, pi.stderr, pi.res
	errorf(stderr, "policy init: TRUST ON FIRST USE: %s pins what %s presented now; review it before you commit it", pi.out, pi.from)
	for _, w := range pi.warnings {
		errorf(stderr, "policy init: warning: %s", w)
	}
	sum := policyInitJSON{
		PolicyFile: pi.out, PolicyID: pi.back.ID(), Trust: "trust-on-first-use", Source: pi.from, Fresh: pi.isURL || pi.challengeB64u != "",
		AttesterDID: res.AttesterDID, Simulated: res.Simulated, Pinned: pi.pinned, Warnings: pi.warnings,
	}
	if sum.Warnings == nil {
		sum.Warnings = []string{}
	}
	if pi.asJSON {
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
	for _, p := range pi.pinned {
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
