package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/sealed"
)

// progressThreshold: packs above this size get progress lines on stderr.
const progressThreshold = 1 << 20

// packExit maps a prompt-pack error to an exit code (docs/spec/promptpack-v1.md
// section 7).
func packExit(err error) int {
	switch {
	case errors.Is(err, openclawsig.ErrTemplateUntrusted):
		return exitPolicy
	case errors.Is(err, promptpack.ErrUnknownRecipe),
		errors.Is(err, envelope.ErrNoMatchingRecipient),
		errors.Is(err, sealed.ErrLockFailed),
		errors.Is(err, sealed.ErrNotSupported),
		errors.Is(err, sealed.ErrAllocFailed):
		return exitCannot
	}
	return exitRejected
}

// loadAdmission reads and strictly parses an admission policy file: an
// unreadable file is exit 3, a malformed policy a usage error (1), as a
// malformed --trusted list.
func loadAdmission(path string, stderr io.Writer, cmd string) (*admission.Policy, int) {
	return readParsed(path, admission.MaxPolicySize, admission.Parse, exitUsage, stderr, cmd)
}

// readParsed reads the file at path (at most limit bytes) and parses it,
// reporting a failure on stderr: an unreadable file is exit 3, one that parse
// refuses is exit bad. On failure the value is T's zero value.
func readParsed[T any](path string, limit int64, parse func([]byte) (T, error), bad int, stderr io.Writer, cmd string) (T, int) {
	var zero T
	b, err := bounded.ReadFile(path, limit)
	if err != nil {
		errorf(stderr, "%s: %v", cmd, err)
		return zero, exitCannot
	}
	v, err := parse(b)
	if err != nil {
		errorf(stderr, "%s: %s: %v", cmd, path, err)
		return zero, bad
	}
	return v, exitOK
}

// readTrusted reads a --trusted file: template name -> sha256:hex.
func readTrusted(path string, stderr io.Writer, cmd string) (map[string]string, int) {
	return readParsed(path, 64<<10, promptpack.ParseTrusted, exitUsage, stderr, cmd)
}

// admissionExit maps an admission error to an exit code: a refusal is 4
// (refused by policy), a pack whose inputs cannot be checked is 2.
func admissionExit(err error) int {
	if errors.Is(err, admission.ErrRefused) {
		return exitPolicy
	}
	return exitRejected
}

// writeFile writes data to path with mode perm (stdout for "" or "-").
func writeFile(path string, data []byte, perm os.FileMode, stdout io.Writer) error {
	return writeOutput(path, data, perm, stdout, true)
}

// errExists is returned by writeOutput for an existing file it may not
// overwrite.
var errExists = errors.New("exists (use --force to overwrite)")

// writeOutput is writeFile that refuses an existing file unless overwrite.
func writeOutput(path string, data []byte, perm os.FileMode, stdout io.Writer, overwrite bool) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, perm)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s %w", path, errExists)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// createFile writes data to a new file at path with mode perm; an existing
// file is refused. A file it could not write whole is removed, and the
// error then names only the path (the data may be secret).
func createFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("cannot write %s", path)
	}
	return nil
}

// loadPack reads and strictly parses a plaintext pack file.
func loadPack(path string, stderr io.Writer, cmd string) (*promptpack.Pack, int) {
	raw, err := bounded.ReadFile(path, maxInputBytes)
	if err != nil {
		errorf(stderr, "%s: %v", cmd, err)
		return nil, exitCannot
	}
	defer sealed.Wipe(raw)
	p, err := promptpack.Parse(raw)
	if err != nil {
		errorf(stderr, "%s: %s: %v", cmd, path, err)
		// Only a file that is not a pack is sniffed (a pack is secret).
		if hint := inputHint(input{"the argument", path, raw, kindPack}); hint != "" {
			errorf(stderr, "%s: %s", cmd, hint)
		}
		return nil, packExit(err)
	}
	return p, exitOK
}

// trustedList returns the --trusted policy, or the pack's own sig hashes.
func trustedList(path string, p *promptpack.Pack, stderr io.Writer, cmd string) (map[string]string, int) {
	if path == "" {
		t, err := p.SigHashes()
		if err != nil {
			errorf(stderr, "%s: %v", cmd, err)
			return nil, packExit(err)
		}
		return t, exitOK
	}
	return readTrusted(path, stderr, cmd)
}

func runBuild(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("build", "build --params FILE --harness DIR [--admission POLICY] [flags] [-o pack.json]\n       build --recipe openclaw-release --capture FILE --openclaw DIR [--admission POLICY] [-o pack.json]\n\nBuilds a plaintext prompt pack (canonical JSON, secret: written mode 0600)\nand checks that it rebuilds. DIR is laid out as the openclaw-sig conformance\nfolder: templates/, sigs/, hardcoded-literals.json, core-tool-summaries.json.\nWith --recipe openclaw-release the pack is built from a capture of a released\nOpenClaw (hack/e2e-openclaw/capture.sh) and that release's install.\nWith --admission the pack is written only if the admission policy admits it\n(exit 4 and nothing written otherwise).", stderr)
	params := fs.String("params", "", "resolved builder params `file` (NAME.params.json shape; required)")
	harness := fs.String("harness", "", "harness `dir` (required)")
	recipeID := fs.String("recipe", openclawsig.ID, "recipe `id`: openclaw-sig, or openclaw-release with --capture")
	capture := fs.String("capture", "", "with --recipe openclaw-release: capture `file` of hack/e2e-openclaw/capture.sh (docs/spec/recipe-openclaw-release.md)")
	openclawDir := fs.String("openclaw", "", "with --recipe openclaw-release: the OpenClaw install `dir` the capture was taken with (the openclaw package, or a prefix holding node_modules/openclaw)")
	toolSchemas := fs.String("tool-schemas", "", "JSON `file`: tool name -> JSON Schema object (default {})")
	skillsEnv := fs.String("skills-env", "", "JSON `file`: skills env overrides, name -> string")
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex; default: the harness's own sigs")
	admissionPath := fs.String("admission", "", "admission policy `file` (docs/spec/admission-policy-v1.md); a refused pack is not written (exit 4)")
	out := fs.String("o", "", "output `file` (default stdout; an existing file is refused without --force)")
	force := fs.Bool("force", false, "overwrite an existing -o file")
	asJSON := fs.Bool("json", false, "with -o: print the pack id and hashes as JSON")
	reportVer := fs.Int("report-version", 1, "SystemPromptReport `version`: 1, or 2 for salted per-input commitments (docs/spec/report-v2.md)")
	def, _ := promptpack.DefaultProvenance(openclawsig.ID)
	hID := fs.String("harness-id", def.HarnessID, "harness id")
	hVer := fs.String("harness-version", def.HarnessVersion, "harness version")
	hCommit := fs.String("harness-commit", def.HarnessCommit, "harness git commit or build hash")
	bName := fs.String("builder-name", def.BuilderName, "prompt builder name")
	bVer := fs.String("builder-version", def.BuilderVersion, "prompt builder version")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o := packOutput{path: *out, force: *force, asJSON: *asJSON}
	if !o.valid(stderr, "build") {
		return exitUsage
	}
	release := *recipeID == openclawrelease.ID
	if release {
		if *params != "" || *harness != "" || *toolSchemas != "" || *skillsEnv != "" || *trusted != "" || *reportVer != 1 {
			errorf(stderr, "build: --recipe %s takes --capture and --openclaw, not --params, --harness, --tool-schemas, --skills-env, --trusted or --report-version", openclawrelease.ID)
			return exitUsage
		}
		if !requireFlags(fs, stderr, "capture", "openclaw") || !wantArgs(fs, stderr, 0, "") {
			return exitUsage
		}
	} else {
		if *capture != "" || *openclawDir != "" {
			errorf(stderr, "build: --capture and --openclaw go with --recipe %s", openclawrelease.ID)
			return exitUsage
		}
		if !requireFlags(fs, stderr, "params", "harness") || !wantArgs(fs, stderr, 0, "") {
			return exitUsage
		}
		if *reportVer != 1 && *reportVer != 2 {
			errorf(stderr, "build: --report-version: want 1 or 2, got %d", *reportVer)
			return exitUsage
		}
	}
	if *out != "" && *out != "-" && !*force {
		// Checked again when writing (O_EXCL); refusing here saves the build.
		if _, err := os.Lstat(*out); err == nil {
			errorf(stderr, "build: %s %v", *out, errExists)
			return exitUsage
		}
	}
	var policy *admission.Policy
	if *admissionPath != "" {
		var code int
		if policy, code = loadAdmission(*admissionPath, stderr, "build"); policy == nil {
			return code
		}
	}
	if release {
		return buildRelease(*capture, *openclawDir, o, policy, stdout, stderr)
	}
	pb, err := bounded.ReadFile(*params, openclawsig.MaxParamsSize)
	if err != nil {
		return fail(stderr, "build", exitCannot, err)
	}
	defer sealed.Wipe(pb)
	opts := promptpack.BuildOptions{Provenance: &promptpack.Provenance{
		HarnessID: *hID, HarnessVersion: *hVer, HarnessCommit: *hCommit, BuilderName: *bName, BuilderVersion: *bVer,
	}, ReportVersion: *reportVer}
	if *toolSchemas != "" {
		if opts.ToolSchemas, err = bounded.ReadFile(*toolSchemas, maxInputBytes); err != nil {
			return fail(stderr, "build", exitCannot, err)
		}
	}
	if *skillsEnv != "" {
		if opts.SkillsEnvOverrides, err = bounded.ReadFile(*skillsEnv, maxInputBytes); err != nil {
			return fail(stderr, "build", exitCannot, err)
		}
	}
	if *trusted != "" {
		var code int
		if opts.Trusted, code = readTrusted(*trusted, stderr, "build"); code != exitOK {
			return code
		}
	}
	if _, err := os.Stat(*harness); err != nil {
		return fail(stderr, "build", exitCannot, err)
	}
	p, err := promptpack.Build(pb, *harness, *recipeID, opts)
	if err != nil {
		return fail(stderr, "build", packExit(err), err)
	}
	defer p.Wipe()
	return admitAndWrite(p, policy, o, stdout, stderr)
}

// packOutput is where a built pack goes: a file (or stdout), and with
// --json a summary of it on stdout, which needs the pack in a file.
type packOutput struct {
	path          string
	force, asJSON bool
}

func (o packOutput) valid(stderr io.Writer, cmd string) bool {
	if o.asJSON && (o.path == "" || o.path == "-") {
		errorf(stderr, "%s: --json needs -o FILE: without it the output itself goes to stdout", cmd)
		return false
	}
	return true
}

// admitAndWrite is the end of every build: the admission policy, if any,
// must admit the pack (exit 4 otherwise), then its canonical bytes are
// written mode 0600 (an existing file only with force).
func admitAndWrite(p *promptpack.Pack, policy *admission.Policy, o packOutput, stdout, stderr io.Writer) int {
	if policy != nil {
		if err := policy.Admit(p); err != nil {
			return fail(stderr, "build", admissionExit(err), err)
		}
	}
	enc, err := p.Encode()
	if err != nil {
		return fail(stderr, "build", exitRejected, err)
	}
	defer sealed.Wipe(enc)
	if err := writeOutput(o.path, enc, 0o600, stdout, o.force); err != nil {
		errorf(stderr, "build: %v", err)
		if errors.Is(err, errExists) {
			return exitUsage
		}
		return exitCannot
	}
	if o.asJSON {
		return printPackSummary(p, o.path, stdout, stderr)
	}
	return exitOK
}

// printPackSummary prints what build --json says about the pack it wrote:
// its id and hashes (from a rebuild against its own sig hashes), never its
// content.
func printPackSummary(p *promptpack.Pack, path string, stdout, stderr io.Writer) int {
	t, err := p.SigHashes()
	if err != nil {
		return fail(stderr, "build", exitRejected, err)
	}
	rb, err := p.Rebuild(t)
	if err != nil {
		return fail(stderr, "build", packExit(err), err)
	}
	defer rb.Wipe()
	printJSON(stdout, map[string]any{"pack": path, "pack_id": rb.PackID, "report_hash_b64u": rb.ReportHashB64u(),
		"system_prompt_hash_b64u": rb.PromptHashB64u(), "system_prompt_bytes": len(rb.Prompt), "report_version": rb.Report.ReportVersion, "recipe": rb.Report.Recipe})
	return exitOK
}

func runAdmission(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("admission", "admission [--sensitive] [-o policy.json] pack.json\n\nWrites the strictest admission policy that admits the pack: every input it\ncarries pinned or allowlisted, every other refused (docs/spec/admission-policy-v1.md).\nReview it before use. With --sensitive the policy is sensitive; a pack that no\nsensitive policy admits is refused (exit 4), naming the input in the way.", stderr)
	sensitive := fs.Bool("sensitive", false, "suggest a sensitive policy")
	out := fs.String("o", "", "output `file` (default stdout)")
	asJSON := fs.Bool("json", false, "with -o: print the policy's hash and sensitivity as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 1, "pack.json") || !(packOutput{path: *out, asJSON: *asJSON}).valid(stderr, "admission") {
		return exitUsage
	}
	p, code := loadPack(fs.Arg(0), stderr, "admission")
	if p == nil {
		return code
	}
	defer p.Wipe()
	doc, err := admission.Suggest(p, *sensitive)
	if err != nil {
		return fail(stderr, "admission", admissionExit(err), err)
	}
	if err := writeFile(*out, doc, 0o644, stdout); err != nil {
		return fail(stderr, "admission", exitCannot, err)
	}
	if *asJSON {
		pol, err := admission.Parse(doc)
		if err != nil {
			return fail(stderr, "admission", exitRejected, err)
		}
		printJSON(stdout, map[string]any{"policy": *out, "admission_policy_hash_b64u": pol.Hash(), "sensitive": pol.Sensitive()})
	}
	return exitOK
}

func runRender(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("render", "render [--trusted FILE] [--json] pack.json\n\nWrites the rebuilt system prompt to stdout: exactly its bytes, nothing added.\nWithout --trusted the pack's own sig hashes are checked for consistency only.\nWith --json: {system_prompt, system_prompt_hash_b64u, report_hash_b64u, pack_id}.", stderr)
	asJSON := fs.Bool("json", false, "print the prompt with its hashes as JSON")
	rb, code := rebuildArg(fs, args, stderr, "render")
	if rb == nil {
		return code
	}
	defer rb.Wipe()
	if *asJSON {
		printJSON(stdout, map[string]any{"system_prompt": string(rb.Prompt), "system_prompt_hash_b64u": rb.PromptHashB64u(),
			"report_hash_b64u": rb.ReportHashB64u(), "pack_id": rb.PackID})
		return exitOK
	}
	if _, err := stdout.Write(rb.Prompt); err != nil {
		return fail(stderr, "render", exitCannot, err)
	}
	return exitOK
}

// rebuildArg adds --trusted to fs, parses args and rebuilds the one pack.json
// argument (render, report). A nil result ends the command with the code.
func rebuildArg(fs *flag.FlagSet, args []string, stderr io.Writer, cmd string) (*promptpack.Rebuilt, int) {
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex (policy)")
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code
	}
	if !wantArgs(fs, stderr, 1, "pack.json") {
		return nil, exitUsage
	}
	return rebuildFile(fs.Arg(0), *trusted, stderr, cmd)
}

// rebuildFile loads the pack at path and rebuilds it with the --trusted
// policy at trustedPath (default: the pack's own sig hashes).
func rebuildFile(path, trustedPath string, stderr io.Writer, cmd string) (*promptpack.Rebuilt, int) {
	p, code := loadPack(path, stderr, cmd)
	if p == nil {
		return nil, code
	}
	defer p.Wipe()
	t, code := trustedList(trustedPath, p, stderr, cmd)
	if t == nil {
		return nil, code
	}
	rb, err := p.Rebuild(t)
	if err != nil {
		errorf(stderr, "%s: %v", cmd, err)
		return nil, packExit(err)
	}
	return rb, exitOK
}

func runReport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", "report [--json] [--trusted FILE] pack.json\n\nRebuilds the pack and prints its SystemPromptReport (v1, or v2 for a pack built\nwith --report-version 2). With --json stdout\nis exactly the report's JCS bytes (their SHA-256 is the report hash).", stderr)
	asJSON := fs.Bool("json", false, "print the report's canonical JSON only")
	rb, code := rebuildArg(fs, args, stderr, "report")
	if rb == nil {
		return code
	}
	rb.Wipe()
	if *asJSON {
		stdout.Write(rb.ReportJCS)
		return exitOK
	}
	r := rb.Report
	fmt.Fprintf(stdout, "report_hash_b64u: %s\n", rb.ReportHashB64u())
	fmt.Fprintf(stdout, "pack_id: %s\n", rb.PackID)
	fmt.Fprintf(stdout, "recipe: %s %s\n", r.Recipe.ID, r.Recipe.Version)
	fmt.Fprintf(stdout, "prompt_mode: %s\n", r.PromptMode)
	fmt.Fprintf(stdout, "system_prompt_hash_b64u: %s\n", r.Final.SystemPromptHashB64u)
	fmt.Fprintf(stdout, "system_prompt_chars: %d\n", r.Final.SystemPromptChars)
	if r.V2 != nil {
		fmt.Fprintf(stdout, "report_version: %s (salted)\n", r.ReportVersion)
		fmt.Fprintf(stdout, "templates: %d\n", len(r.V2.Templates))
		fmt.Fprintf(stdout, "inputs: %d\n", len(r.V2.Commitments))
	} else {
		fmt.Fprintf(stdout, "templates: %d\n", len(r.Inputs.Templates))
		fmt.Fprintf(stdout, "bootstrap_files: %d\n", len(r.Inputs.Bootstrap))
	}
	fmt.Fprintf(stdout, "report: %s\n", rb.ReportJCS)
	return exitOK
}

// sealCmd is the state of packctl seal: its flags, then what each step
// learns for the next.
type sealCmd struct {
	stdout, stderr io.Writer

	recips, recipFiles                                 stringList
	attester, policyPath, challenge, out, manifest, in string
	asJSON                                             bool

	keys []*envelope.PublicKey
	big  bool // progress lines on stderr
	pack *promptpack.Pack
	enc  []byte // the envelope
	m    *envelope.Manifest
	mj   []byte // the manifest's JSON
}

func runSeal(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	s := &sealCmd{stdout: stdout, stderr: stderr}
	fs := s.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	defer s.wipe()
	return runSteps(func() int { return s.checkFlags(fs) }, s.readRecipients, s.readPack, s.seal, s.write, s.print)
}

func (s *sealCmd) flagSet() *flag.FlagSet {
	fs := newFlagSet("seal", "seal (--attester URL|FILE --policy FILE | --recipient PUBKEY[,...] | --recipient-file F) -o prompt_pack.enc --manifest prompt_pack_manifest.json pack.json\n\nRebuilds the pack (consistency check), then encrypts it bound to its pack id\nand report hash. With --attester it first verifies the attester's key\nattestation against --policy (offline for a FILE; a fresh challenge for a\nURL) and seals to the attested key. Prints the pack id and report hash.", s.stderr)
	fs.Var(&s.recips, "recipient", "recipient public `key`(s), comma-separated (repeatable; e.g. a recovery key)")
	fs.Var(&s.recipFiles, "recipient-file", "`file` of recipient public keys, one per line (repeatable)")
	fs.StringVar(&s.attester, "attester", "", "attester identity: an http(s) `URL` of its API, or a FILE with its GET /v1/identity response")
	fs.StringVar(&s.policyPath, "policy", "", "verification policy `file` for the attester's key attestation (required with --attester)")
	fs.StringVar(&s.challenge, "challenge", "", "with --attester FILE: the b64u `challenge` the identity was fetched with")
	fs.StringVar(&s.out, "o", "", "envelope output `file` (required)")
	fs.StringVar(&s.manifest, "manifest", "", "manifest output `file` (required)")
	fs.BoolVar(&s.asJSON, "json", false, "print the pack id and report hash as JSON")
	return fs
}

// checkFlags refuses a missing output, a --policy without --attester and
// a seal to no recipient (exit 1).
func (s *sealCmd) checkFlags(fs *flag.FlagSet) int {
	if !requireFlags(fs, s.stderr, "o", "manifest") || !wantArgs(fs, s.stderr, 1, "pack.json") {
		return exitUsage
	}
	s.in = fs.Arg(0)
	if s.attester != "" && !requireFlags(fs, s.stderr, "policy") {
		return exitUsage
	}
	if s.attester == "" && s.policyPath != "" {
		errorf(s.stderr, "seal: --policy is for --attester")
		fs.Usage()
		return exitUsage
	}
	if s.attester == "" && len(s.recips)+len(s.recipFiles) == 0 {
		errorf(s.stderr, "seal: no recipient: give --attester URL|FILE with --policy, or --recipient")
		return exitUsage
	}
	return exitOK
}

// readRecipients reads the recipient keys; an attested key (checked
// against --policy) comes first.
func (s *sealCmd) readRecipients() int {
	if len(s.recips)+len(s.recipFiles) > 0 {
		keys, err := parseRecipients(s.recips, s.recipFiles)
		if err != nil {
			return fail(s.stderr, "seal", exitUsage, err)
		}
		s.keys = keys
	}
	if s.attester != "" {
		k, code := attestedRecipient(s.attester, s.policyPath, s.challenge, s.stderr)
		if k == nil {
			return code
		}
		s.keys = append([]*envelope.PublicKey{k}, s.keys...)
	}
	return exitOK
}

// readPack reads and rebuilds the plaintext pack; a large one gets progress
// lines.
func (s *sealCmd) readPack() int {
	info, err := os.Stat(s.in)
	if err != nil {
		return fail(s.stderr, "seal", exitCannot, err)
	}
	if s.big = info.Size() > progressThreshold; s.big {
		errorf(s.stderr, "seal: reading and rebuilding %d bytes", info.Size())
	}
	var code int
	s.pack, code = loadPack(s.in, s.stderr, "seal")
	return code
}

// seal encrypts the pack to the keys and encodes its manifest.
func (s *sealCmd) seal() int {
	if s.big {
		errorf(s.stderr, "seal: encrypting for %d recipient(s)", len(s.keys))
	}
	var err error
	if s.enc, s.m, err = promptpack.SealPack(s.pack, s.keys...); err != nil {
		return fail(s.stderr, "seal", packExit(err), err)
	}
	if s.mj, err = s.m.MarshalJSON(); err != nil {
		return fail(s.stderr, "seal", exitRejected, err)
	}
	return exitOK
}

// write writes the envelope, then the manifest.
func (s *sealCmd) write() int {
	if err := writeFile(s.out, s.enc, 0o644, s.stdout); err != nil {
		return fail(s.stderr, "seal", exitCannot, err)
	}
	if err := writeFile(s.manifest, s.mj, 0o644, s.stdout); err != nil {
		return fail(s.stderr, "seal", exitCannot, err)
	}
	if s.big {
		errorf(s.stderr, "seal: wrote %d bytes", len(s.enc))
	}
	return exitOK
}

// print prints the pack id and report hash (with --json, also the outputs
// and the recipients' key ids).
func (s *sealCmd) print() int {
	rh := b64u.Encode(s.m.ReportHash[:])
	if !s.asJSON {
		fmt.Fprintf(s.stdout, "pack_id: %s\nreport_hash_b64u: %s\n", s.m.PackID, rh)
		return exitOK
	}
	ids := []string{}
	for _, id := range s.m.RecipientKeyIDs {
		ids = append(ids, id.String())
	}
	printJSON(s.stdout, map[string]any{"pack_id": s.m.PackID, "report_hash_b64u": rh, "envelope": s.out, "manifest": s.manifest, "recipient_key_ids_b64u": ids})
	return exitOK
}

// wipe clears the plaintext pack.
func (s *sealCmd) wipe() {
	if s.pack != nil {
		s.pack.Wipe()
	}
}

func runOpen(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("open", "open --key KEY --manifest M [--report-hash B64U] [--trusted FILE] prompt_pack.enc\n\nDEBUG ONLY: decrypts the envelope in sealed memory, checks the pack id,\nrebuilds and compares the report hash, then prints the plaintext pack JSON.", stderr)
	keyPath := fs.String("key", "", "private key `file` (required)")
	manifest := fs.String("manifest", "", "manifest `file` (required)")
	reportHash := fs.String("report-hash", "", "expected report hash (b64u); default: the manifest's")
	trusted := fs.String("trusted", "", "JSON `file`: template name -> sha256:hex (policy); default: the pack's own sigs")
	allowUnlocked := fs.Bool("allow-unlocked", false, "accept sealed memory that cannot be locked into RAM")
	asJSON := fs.Bool("json", false, "print {pack_id, report_hash_b64u, pack} as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !requireFlags(fs, stderr, "key", "manifest") || !wantArgs(fs, stderr, 1, "prompt_pack.enc") {
		return exitUsage
	}
	key, err := readPrivateKey(*keyPath)
	if err != nil {
		return fail(stderr, "open", exitCannot, err)
	}
	m, code := readParsed(*manifest, maxInputBytes, envelope.ParseManifest, exitRejected, stderr, "open")
	if code != exitOK {
		return code
	}
	want := m.ReportHash
	if *reportHash != "" {
		if want, err = b64u.DecodeHash(*reportHash); err != nil {
			errorf(stderr, "open: --report-hash: %v", err)
			return exitUsage
		}
	}
	enc, err := readArgOrStdin(fs.Arg(0), maxInputBytes+(64<<10))
	if err != nil {
		return fail(stderr, "open", exitCannot, err)
	}
	o, err := promptpack.OpenPack(enc, m, key, want, promptpack.OpenOptions{AllowUnlocked: *allowUnlocked})
	if err != nil {
		return fail(stderr, "open", packExit(err), err)
	}
	defer o.Destroy()
	t, code := trustedList(*trusted, o.Pack(), stderr, "open")
	if t == nil {
		return code
	}
	rb, err := o.Rebuild(t)
	if err != nil {
		return fail(stderr, "open", packExit(err), err)
	}
	defer rb.Wipe()
	errorf(stderr, "open: debug output: the plaintext pack follows on stdout")
	if *asJSON {
		printJSON(stdout, map[string]any{"pack_id": rb.PackID, "report_hash_b64u": rb.ReportHashB64u(), "pack": json.RawMessage(o.Bytes())})
		return exitOK
	}
	if _, err := stdout.Write(o.Bytes()); err != nil {
		return fail(stderr, "open", exitCannot, err)
	}
	return exitOK
}
