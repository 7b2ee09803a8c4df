package openclawsig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
)

// HarnessFiles is the harness text as raw bytes, as carried in a prompt
// pack or laid out in a directory (see LoadHarnessDir).
type HarnessFiles struct {
	// Templates maps a template file name ("identity.txt") to its bytes.
	Templates map[string][]byte
	// Sigs maps a template file name to the bytes of its .sig.json.
	Sigs map[string][]byte
	// SigConfig is the sig tool's config.json; optional, kept verbatim
	// and not interpreted.
	SigConfig []byte
	// Literals is hardcoded-literals.json.
	Literals []byte
	// CoreToolSummaries is core-tool-summaries.json.
	CoreToolSummaries []byte
}

// templateSig is a parsed .sig.json: a content hash of one template. The
// conf tags declare the document (schema/confdoc; null is absent).
type templateSig struct {
	File           string `conf:"file,required,min=1"`            // e.g. "llm/prompts/identity.txt"
	Hash           string `conf:"hash,required"`                  // "sha256:" + 64 lower-case hex digits
	Algorithm      string `conf:"algorithm,required,enum=sha256"` // "sha256"
	SignedBy       string `conf:"signedBy"`
	SignedAt       string `conf:"signedAt"`
	ContentLength  int64  `conf:"contentLength,required,min=0"` // bytes
	TemplateEngine string `conf:"templateEngine"`
	Raw            []byte // the .sig.json bytes as received
}

// CheckConf refuses a hash that is not "sha256:" and 64 lower-case hex
// digits.
func (s *templateSig) CheckConf(d *confdoc.Decoder, path string) {
	if !validHash(s.Hash) {
		d.Fail(jsonobj.Key(path, "hash"), confdoc.ErrBadValue, "not sha256: and 64 lower-case hex digits")
	}
}

// toolSummary is one entry of core-tool-summaries.json.
type toolSummary struct {
	Name    string
	Summary string
}

// Harness is the harness data the recipe renders from. Its content is
// immutable after NewHarness (accessors return copies); Render checks its
// templates against the caller's trusted hashes each time.
type Harness struct {
	files     HarnessFiles
	sigs      map[string]templateSig
	lit       literals
	core      []toolSummary
	coreIndex map[string]string
}

// Files returns a deep copy of the raw harness bytes, e.g. to carry them in
// a pack or hash them into a report.
func (h *Harness) Files() HarnessFiles { return cloneFiles(h.files) }

// cloneFiles returns a deep copy of f.
func cloneFiles(f HarnessFiles) HarnessFiles {
	cp := func(m map[string][]byte) map[string][]byte {
		out := make(map[string][]byte, len(m))
		for k, v := range m {
			out[k] = bytes.Clone(v)
		}
		return out
	}
	return HarnessFiles{
		Templates:         cp(f.Templates),
		Sigs:              cp(f.Sigs),
		SigConfig:         bytes.Clone(f.SigConfig),
		Literals:          bytes.Clone(f.Literals),
		CoreToolSummaries: bytes.Clone(f.CoreToolSummaries),
	}
}

// TemplateNames returns the template file names, sorted.
func (h *Harness) TemplateNames() []string {
	return slices.Sorted(maps.Keys(h.files.Templates))
}

// Sig returns the parsed sig of a template.
func (h *Harness) Sig(name string) (templateSig, bool) {
	s, ok := h.sigs[name]
	s.Raw = bytes.Clone(s.Raw)
	return s, ok
}

// coreToolSummaries returns the built-in tool summaries in file order.
func (h *Harness) coreToolSummaries() []toolSummary {
	return slices.Clone(h.core)
}

// requiredTemplates are the templates Render can use; each must be present.
var requiredTemplates = []string{
	tplIdentity, tplTooling, tplToolingFallback, tplToolCallStyle, tplSafety,
	tplVerificationPreamble, tplProtectedFiles, tplCLIReference, tplSkills,
	tplMemory, tplMemoryCitationsOff, tplMemoryCitationsOn, tplSelfUpdate,
	tplModelAliases, tplWorkspace, tplDocumentation, tplSandbox, tplUserIdentity,
	tplTime, tplWorkspaceFiles, tplReplyTags, tplMessaging, tplMessageTool,
	tplMessageToolButtonsOn, tplMessageToolButtonsOff, tplVoice, tplSubagentContext,
	tplGroupContext, tplReactionsMinimal, tplReactionsExtensive, tplReasoningFormat,
	tplProjectContext, tplSoulGuidance, tplSilentReplies, tplHeartbeats, tplRuntime,
}

const sigSuffix = ".sig.json"

// validTemplateName accepts a plain file name ending in ".txt".
func validTemplateName(name string) bool {
	if len(name) <= len(".txt") || len(name) > maxNameLen || !strings.HasSuffix(name, ".txt") {
		return false
	}
	return templateNameChars.All(name) && !strings.HasPrefix(name, ".")
}

var templateNameChars = charclass.Alnum().Or(charclass.Of("-_."))

func harnessErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidHarness}, args...)...)
}

// NewHarness validates and copies harness files. It parses every sig, the
// literals and the core tool summaries, and checks that every template the
// recipe needs is present. It does not check hashes: Render does.
func NewHarness(f HarnessFiles) (*Harness, error) {
	if err := checkFileLimits(f); err != nil {
		return nil, err
	}
	tplBytes, err := checkTemplateFiles(f.Templates)
	if err != nil {
		return nil, err
	}
	h := &Harness{}
	sigBytes, err := h.parseSigs(f)
	if err != nil {
		return nil, err
	}
	if len(f.SigConfig)+len(f.Literals)+len(f.CoreToolSummaries)+tplBytes+sigBytes > maxHarnessSize {
		return nil, harnessErr("%w", jsonobj.ErrTooLarge)
	}
	for _, name := range requiredTemplates {
		if _, ok := f.Templates[name]; !ok {
			return nil, &TemplateError{Name: name, Err: ErrTemplateMissing}
		}
	}
	if err := h.parseDataFiles(f); err != nil {
		return nil, err
	}
	h.files = cloneFiles(f)
	return h, nil
}

// checkFileLimits checks the template and sig counts and the sizes of the
// files that are not templates or sigs.
func checkFileLimits(f HarnessFiles) error {
	switch {
	case len(f.Templates) > MaxTemplates || len(f.Sigs) > MaxTemplates:
		return harnessErr("more than %d templates", MaxTemplates)
	case len(f.SigConfig) > maxSigSize:
		return harnessErr("sig config: %w", jsonobj.ErrTooLarge)
	case len(f.Literals) > maxDataFileSize || len(f.CoreToolSummaries) > maxDataFileSize:
		return harnessErr("data file: %w", jsonobj.ErrTooLarge)
	}
	return nil
}

// checkTemplateFiles checks each template's name, size and UTF-8, in name
// order, and returns their total size.
func checkTemplateFiles(tpls map[string][]byte) (int, error) {
	total := 0
	for _, name := range slices.Sorted(maps.Keys(tpls)) {
		b := tpls[name]
		if !validTemplateName(name) {
			return 0, harnessErr("bad template name %q", quoteKey(name))
		}
		if len(b) > maxTemplateSize {
			return 0, harnessErr("template %q: %w", name, jsonobj.ErrTooLarge)
		}
		if !utf8.Valid(b) {
			return 0, harnessErr("template %q: invalid utf-8", name)
		}
		total += len(b)
	}
	return total, nil
}

// parseSigs parses the sig of each template, in name order, into h.sigs
// and returns their total size. A sig must belong to a template and name
// its file.
func (h *Harness) parseSigs(f HarnessFiles) (int, error) {
	h.sigs = make(map[string]templateSig, len(f.Sigs))
	total := 0
	for _, name := range slices.Sorted(maps.Keys(f.Sigs)) {
		b := f.Sigs[name]
		if _, ok := f.Templates[name]; !ok || !validTemplateName(name) {
			return 0, harnessErr("sig for unknown template %q", quoteKey(name))
		}
		if len(b) > maxSigSize {
			return 0, harnessErr("sig %q: %w", name, jsonobj.ErrTooLarge)
		}
		total += len(b)
		s, err := parseSig(b)
		if err != nil {
			return 0, harnessErr("sig %q: %w", name, err)
		}
		if path.Base(s.File) != name {
			return 0, harnessErr("sig %q names another file", name)
		}
		s.Raw = bytes.Clone(b)
		h.sigs[name] = s
	}
	return total, nil
}

// parseDataFiles parses the literals and the core tool summaries.
func (h *Harness) parseDataFiles(f HarnessFiles) error {
	lit, err := parseLiterals(f.Literals)
	if err != nil {
		return harnessErr("hardcoded literals: %w", err)
	}
	core, err := parseCoreSummaries(f.CoreToolSummaries)
	if err != nil {
		return harnessErr("core tool summaries: %w", err)
	}
	h.lit, h.core = lit, core
	h.coreIndex = make(map[string]string, len(core))
	for _, c := range core {
		h.coreIndex[c.Name] = c.Summary
	}
	return nil
}

func parseSig(b []byte) (templateSig, error) {
	var s templateSig
	err := confdoc.Parse(b, jsonOptions(maxSigSize), &s, confdoc.Options{NullIsAbsent: true})
	return s, err
}

// validHash accepts "sha256:" followed by 64 lower-case hex digits.
func validHash(h string) bool {
	hexPart, ok := strings.CutPrefix(h, "sha256:")
	return ok && len(hexPart) == 2*sha256.Size && charclass.LowerHex().All(hexPart)
}

// parseCoreSummaries reads core-tool-summaries.json: an object of
// strings, kept in document order.
func parseCoreSummaries(b []byte) ([]toolSummary, error) {
	root, err := jsonobj.ParseObject(b, jsonOptions(maxDataFileSize))
	if err != nil {
		return nil, err
	}
	var r jsonobj.Reader
	ms := r.Members(root, jsonobj.Root, 0, maxJSONContainerLen)
	out := make([]toolSummary, 0, len(ms))
	for _, m := range ms {
		s, ok := r.Str(m.Value, jsonobj.Key(jsonobj.Root, m.Key))
		if !ok {
			break
		}
		out = append(out, toolSummary{Name: m.Key, Summary: s})
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTemplates checks every template of the harness: its SHA-256 must
// equal its sig's hash, its length the sig's contentLength, and the hash
// must be the trusted one for its name. trusted maps a template file name
// to "sha256:<hex>". The first failure, in template name order, is
// returned as a *TemplateError wrapping ErrTemplateMissing,
// ErrTemplateUnsigned, ErrTemplateModified or ErrTemplateUntrusted. Render
// runs it before anything else.
func (h *Harness) checkTemplates(trusted map[string]string) error {
	for _, name := range requiredTemplates {
		if _, ok := h.files.Templates[name]; !ok {
			return &TemplateError{Name: name, Err: ErrTemplateMissing}
		}
	}
	for _, name := range h.TemplateNames() {
		content := h.files.Templates[name]
		sig, ok := h.sigs[name]
		if !ok {
			return &TemplateError{Name: name, Err: ErrTemplateUnsigned}
		}
		sum := sha256.Sum256(content)
		if "sha256:"+hex.EncodeToString(sum[:]) != sig.Hash || int64(len(content)) != sig.ContentLength {
			return &TemplateError{Name: name, Err: ErrTemplateModified}
		}
		if want, ok := trusted[name]; !ok || want != sig.Hash {
			return &TemplateError{Name: name, Err: ErrTemplateUntrusted}
		}
	}
	return nil
}

// LoadHarnessDir reads a harness laid out as the conformance folder:
//
//	templates/*.txt
//	sigs/config.json                        (optional)
//	sigs/sigs/llm/prompts/<name>.txt.sig.json
//	hardcoded-literals.json
//	core-tool-summaries.json
//
// Anything else in templates/ or the prompts sig folder is refused. Each
// file is size-limited before it is read. The result is NewHarness's.
func LoadHarnessDir(dir string) (*Harness, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, harnessErr("open %q: %v", filepath.Base(dir), err)
	}
	defer root.Close()
	fsys := root.FS()
	f := HarnessFiles{Templates: map[string][]byte{}, Sigs: map[string][]byte{}}

	tpls, err := fs.ReadDir(fsys, "templates")
	if err != nil {
		return nil, harnessErr("templates: %v", err)
	}
	if len(tpls) > MaxTemplates {
		return nil, harnessErr("more than %d templates", MaxTemplates)
	}
	for _, e := range tpls {
		if !e.Type().IsRegular() || !validTemplateName(e.Name()) {
			return nil, harnessErr("unexpected entry %q in templates", quoteKey(e.Name()))
		}
		if f.Templates[e.Name()], err = readLimited(fsys, "templates/"+e.Name(), maxTemplateSize); err != nil {
			return nil, err
		}
	}
	const sigDir = "sigs/sigs/llm/prompts"
	sigs, err := fs.ReadDir(fsys, sigDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, harnessErr("sigs: %v", err)
	}
	if len(sigs) > MaxTemplates {
		return nil, harnessErr("more than %d sigs", MaxTemplates)
	}
	for _, e := range sigs {
		name, ok := strings.CutSuffix(e.Name(), sigSuffix)
		if !e.Type().IsRegular() || !ok || !validTemplateName(name) {
			return nil, harnessErr("unexpected entry %q in sigs", quoteKey(e.Name()))
		}
		if f.Sigs[name], err = readLimited(fsys, sigDir+"/"+e.Name(), maxSigSize); err != nil {
			return nil, err
		}
	}
	if f.SigConfig, err = readLimited(fsys, "sigs/config.json", maxSigSize); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if f.Literals, err = readLimited(fsys, "hardcoded-literals.json", maxDataFileSize); err != nil {
		return nil, err
	}
	if f.CoreToolSummaries, err = readLimited(fsys, "core-tool-summaries.json", maxDataFileSize); err != nil {
		return nil, err
	}
	return NewHarness(f)
}

// readLimited reads one harness file of at most limit bytes.
func readLimited(fsys fs.FS, name string, limit int64) ([]byte, error) {
	b, err := bounded.ReadFS(fsys, name, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidHarness, name, fs.ErrNotExist)
	case errors.Is(err, bounded.ErrTooLarge):
		return nil, harnessErr("%s: %w", name, jsonobj.ErrTooLarge)
	case err != nil:
		return nil, harnessErr("%s: %v", name, err)
	}
	return b, nil
}
