package openclawrelease

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/safetext"
)

// pinnedFile is one file of a release's npm package that holds fixed text,
// pinned by the b64u SHA-256 of its bytes.
type pinnedFile struct {
	Path   string // relative to the package root, "/"-separated
	SHA256 string // b64u SHA-256 of the file
}

// maxPinnedFile bounds one pinned file.
const maxPinnedFile = 8 << 20

// Release is how one released OpenClaw version assembles its system
// prompt, as far as this recipe checks it: the package files that hold its
// fixed text (pinned), the table of the SHA-256 of every fragment of that
// text (embedded in this module, so that a rebuild needs no install), and
// the slots where inputs go.
type Release struct {
	OpenClawVersion string
	Files           []pinnedFile
	// TableFile names the fragment table in releases/; TableSHA256 is its
	// b64u SHA-256.
	TableFile   string
	TableSHA256 string
	Slots       []slotRule

	once      sync.Once
	tableData []byte // tests: the table itself instead of TableFile
	tbl       map[string]struct{}
	tblErr    error
}

//go:embed releases
var releaseFS embed.FS

// table returns the release's fragment table after checking it against
// its pinned hash: one b64u SHA-256 per line, strictly ascending.
func (r *Release) table() (map[string]struct{}, error) {
	r.once.Do(func() {
		data, err := r.tableData, error(nil)
		if data == nil {
			data, err = releaseFS.ReadFile("releases/" + r.TableFile)
		}
		if err != nil {
			r.tblErr = fmt.Errorf("%w: fragment table of OpenClaw %s: %w", ErrFixedText, r.OpenClawVersion, err)
			return
		}
		if b64u.SHA256(data) != r.TableSHA256 {
			r.tblErr = fmt.Errorf("%w: the fragment table of OpenClaw %s is not the pinned one", ErrFixedText, r.OpenClawVersion)
			return
		}
		t := map[string]struct{}{}
		prev := ""
		for line := range strings.Lines(string(data)) {
			h, ok := strings.CutSuffix(line, "\n")
			if !ok || len(h) != 43 || h <= prev {
				r.tblErr = fmt.Errorf("%w: the fragment table of OpenClaw %s is malformed", ErrFixedText, r.OpenClawVersion)
				return
			}
			if _, err := b64u.Decode(h); err != nil {
				r.tblErr = fmt.Errorf("%w: the fragment table of OpenClaw %s is malformed", ErrFixedText, r.OpenClawVersion)
				return
			}
			t[h] = struct{}{}
			prev = h
		}
		r.tbl = t
	})
	return r.tbl, r.tblErr
}

func (r *Release) slot(name string) (slotRule, bool) {
	for _, s := range r.Slots {
		if s.Name == name {
			return s, true
		}
	}
	return slotRule{}, false
}

// Supported returns the releases this recipe version checks, keyed by
// OpenClaw version.
func Supported() map[string]*Release {
	return map[string]*Release{release2026_9_6.OpenClawVersion: release2026_9_6}
}

// Lookup returns the Release for an exact OpenClaw version and refuses any
// other with ErrUnsupportedVersion: a neighbouring release is never used.
func Lookup(version string) (*Release, error) {
	rel := Supported()[version]
	if rel == nil {
		return nil, fmt.Errorf("%w: %q (recipe %s version %s supports %s)", ErrUnsupportedVersion, safetext.Clip(version, maxVersionLen), ID, Version, strings.Join(slices.Sorted(maps.Keys(Supported())), ", "))
	}
	return rel, nil
}

// fixedText is a release's fixed text loaded from an install: every fragment
// of its pinned files, by hash.
type fixedText struct {
	Release   *Release
	Fragments map[string]string // b64u SHA-256 -> text
}

// packageDir returns the openclaw package root under dir: dir itself when
// it holds the package (package.json with name "openclaw"), else
// dir/node_modules/openclaw.
func packageDir(dir string) string {
	if b, err := bounded.ReadFile(filepath.Join(dir, "package.json"), 1<<20); err == nil {
		var meta struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &meta) == nil && meta.Name == "openclaw" {
			return dir
		}
	}
	return filepath.Join(dir, "node_modules", "openclaw")
}

// loadFixed reads the release's pinned files from an installed openclaw
// package (packageDir), checks each against its pinned hash, extracts
// their fragments and checks that every one is in the release's fragment
// table. A changed, missing or oversized file is ErrFixedText.
func loadFixed(rel *Release, pkgDir string) (*fixedText, error) {
	table, err := rel.table()
	if err != nil {
		return nil, err
	}
	f := &fixedText{Release: rel, Fragments: map[string]string{}}
	for _, pf := range rel.Files {
		b, err := bounded.ReadFile(filepath.Join(pkgDir, filepath.FromSlash(pf.Path)), maxPinnedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s of OpenClaw %s: %w", ErrFixedText, pf.Path, rel.OpenClawVersion, err)
		}
		if b64u.SHA256(b) != pf.SHA256 {
			return nil, fmt.Errorf("%w: %s is not the file OpenClaw %s ships", ErrFixedText, pf.Path, rel.OpenClawVersion)
		}
		frags, err := extractFragments(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrFixedText, pf.Path, err)
		}
		for _, s := range frags {
			h := fragHash(s)
			if _, ok := table[h]; !ok {
				return nil, fmt.Errorf("%w: a fragment of %s is not in the table of OpenClaw %s", ErrFixedText, pf.Path, rel.OpenClawVersion)
			}
			f.Fragments[h] = s
		}
	}
	return f, nil
}

// tableOf returns the fragment table (the file content) of a set of
// fragments: the sorted b64u SHA-256 of each, one per line.
func tableOf(frags map[string]string) []byte {
	var b []byte
	for _, h := range slices.Sorted(maps.Keys(frags)) {
		b = append(b, h...)
		b = append(b, '\n')
	}
	return b
}

// result is a capture that its Release reproduced: the layout, the
// fragments it uses, and the report.
type result struct {
	Layout     []layoutToken
	Fragments  map[string]string // the fragments the layout uses, by hash
	Report     *releaseReport
	ReportJCS  []byte
	ReportHash [32]byte
}

// build checks a capture against the fixed text of its exact OpenClaw
// version (fixed.Release, from Lookup and loadFixed; a capture of another
// version is ErrUnsupportedVersion): it
// finds a layout that renders the captured system prompt byte for byte
// from the release's fragments, the capture's tools and bootstrap files and
// the release's slots (errNotReproduced, naming only the offset where no
// fixed text or input fits), re-renders it through the same check the
// rebuild uses, and only then returns the report.
func build(c *Capture, fixed *fixedText) (*result, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil capture", errInvalidCapture)
	}
	if fixed == nil || fixed.Release == nil {
		return nil, fmt.Errorf("%w: no fixed text", ErrFixedText)
	}
	rel := fixed.Release
	if rel.OpenClawVersion != c.OpenClawVersion {
		return nil, fmt.Errorf("%w: the fixed text is OpenClaw %s's, the capture is %s's", ErrUnsupportedVersion, rel.OpenClawVersion, safetext.Clip(c.OpenClawVersion, maxVersionLen))
	}
	in := inputs{Tools: c.Tools, Files: c.BootstrapFiles}
	p := newPool(slices.Collect(maps.Values(fixed.Fragments)))
	toks, at, err := p.segment(string(c.SystemPrompt), rel, in)
	if err != nil {
		return nil, err
	}
	if toks == nil {
		return nil, fmt.Errorf("%w: byte %d of %d is neither fixed text of OpenClaw %s nor a committed input", errNotReproduced, at, len(c.SystemPrompt), rel.OpenClawVersion)
	}
	used := map[string]string{}
	for _, t := range toks {
		if t.Kind == kindFragment {
			used[t.Frag] = fixed.Fragments[t.Frag]
		}
	}
	res, err := finish(c, rel, toks, used)
	if err != nil && !errors.Is(err, errNotReproduced) {
		// The cheapest layout breaks a placement rule (a file outside its
		// header, a header without its file): the capture is not reproduced.
		return nil, fmt.Errorf("%w: %w", errNotReproduced, err)
	}
	return res, err
}

// Reproduce is the recipe's build side in one call
// (docs/spec/recipe-openclaw-release.md section 4): it looks up c's exact
// OpenClaw release (Lookup), loads that release's fixed text from the
// install at installDir (the openclaw package, or a prefix holding
// node_modules/openclaw), each pinned file checked against its hash, finds
// the layout that reproduces the captured system prompt byte for byte and
// returns the release with its canonical release document
// ({document_version, capture_json, layout, fragments}; layout tokens are
// arrays: ["f", hash], ["nl"], ["tool", index], ["file", name], ["slot",
// name, value]). An unknown version is ErrUnsupportedVersion, a missing or
// changed install ErrFixedText. logf, if not nil, gets progress lines that
// name sizes and counts, never the capture's text.
func Reproduce(c *Capture, installDir string, logf func(format string, args ...any)) (*Release, []byte, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if c == nil {
		return nil, nil, fmt.Errorf("%w: nil capture", errInvalidCapture)
	}
	rel, err := Lookup(c.OpenClawVersion)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(installDir); err != nil {
		return nil, nil, fmt.Errorf("%w: OpenClaw install: %w", ErrFixedText, err)
	}
	pkg := packageDir(installDir)
	logf("reading the fixed text of OpenClaw %s from %s", rel.OpenClawVersion, pkg)
	fixed, err := loadFixed(rel, pkg)
	if err != nil {
		return nil, nil, err
	}
	logf("%d fragments; reproducing the captured prompt (%d bytes)", len(fixed.Fragments), len(c.SystemPrompt))
	res, err := build(c, fixed)
	if err != nil {
		return nil, nil, err
	}
	doc, err := encodeDocument(c, res)
	if err != nil {
		return nil, nil, err
	}
	by := res.Report.Layout.BytesByKind
	logf("reproduced: %d of %d bytes are OpenClaw %s's own text; %d come from bootstrap files, %d from tool names, %d from %d slot values, %d are line feeds",
		by[kindFragment], len(c.SystemPrompt), rel.OpenClawVersion, by[kindFile], by[kindTool], by[kindSlot], len(res.Report.Slots), by[kindNewline])
	return rel, doc, nil
}

// finish re-renders a layout with render (every rule of checkLayout), checks
// that it gives the captured system prompt byte for byte and returns the
// report. It is the rebuild: it needs the layout, the fragments it uses and
// the inputs, and no install.
func finish(c *Capture, rel *Release, toks []layoutToken, frags map[string]string) (*result, error) {
	in := inputs{Tools: c.Tools, Files: c.BootstrapFiles}
	out, err := render(rel, toks, frags, in, len(c.SystemPrompt))
	if err != nil {
		return nil, err
	}
	same := len(out) == len(c.SystemPrompt) && subtle.ConstantTimeCompare(out, c.SystemPrompt) == 1
	if !same {
		at := firstDiff(out, c.SystemPrompt)
		n := len(out)
		clear(out)
		return nil, fmt.Errorf("%w: first difference at byte %d (rendered %d bytes, captured %d)", errNotReproduced, at, n, len(c.SystemPrompt))
	}
	clear(out)
	rep, err := newReport(c, rel, toks, frags)
	if err != nil {
		return nil, err
	}
	j, err := rep.canonical()
	if err != nil {
		return nil, err
	}
	return &result{Layout: toks, Fragments: frags, Report: rep, ReportJCS: j, ReportHash: sha256.Sum256(j)}, nil
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// releaseReport is the hash-only commitment to a reproduced capture
// (docs/spec/recipe-openclaw-release.md section 5).
type releaseReport struct {
	ReportVersion        string            `json:"report_version"`
	Recipe               reportRecipe      `json:"recipe"`
	Harness              reportHarness     `json:"harness"`
	Release              reportRelease     `json:"release"`
	RequestHashB64u      string            `json:"request_sha256_b64u"`
	SystemPromptHashB64u string            `json:"system_prompt_hash_b64u"`
	Layout               reportLayout      `json:"layout"`
	Slots                []reportSlot      `json:"slots"`
	Tools                reportTools       `json:"tools"`
	Bootstrap            []reportBootstrap `json:"bootstrap_files"`
}

// reportRelease pins the release's fixed text: its files and its fragment
// table.
type reportRelease struct {
	Files          []reportFile `json:"files"`
	FragmentsTable string       `json:"fragment_table_sha256_b64u"`
}

// reportFile is one pinned package file.
type reportFile struct {
	Path       string `json:"path"`
	SHA256B64u string `json:"sha256_b64u"`
}

// reportLayout commits the prompt's layout: the b64u SHA-256 of the JCS
// array of its tokens (fragments by hash, tools by index, files by name,
// slots by name and the hash of the value), and how many bytes of the
// prompt each kind of token gave.
type reportLayout struct {
	HashB64u    string         `json:"sha256_b64u"`
	Tokens      int            `json:"tokens"`
	Fragments   int            `json:"distinct_fragments"`
	BytesByKind map[string]int `json:"bytes"`
}

// reportSlot is one slot value, in prompt order (seed 001 runtime, time,
// workspace and skills inputs).
type reportSlot struct {
	Name       string `json:"name"`
	SHA256B64u string `json:"sha256_b64u"`
	Bytes      int    `json:"bytes"`
}

// reportRecipe names the recipe.
type reportRecipe struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// reportHarness names the OpenClaw release.
type reportHarness struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// reportTools commits the tools three ways (seed 001 item 7): the ordered
// names, the ordered summaries and the ordered schemas, each the b64u
// SHA-256 of a JCS array, plus one entry per tool.
type reportTools struct {
	Count           int          `json:"count"`
	NamesHashB64u   string       `json:"names_hash_b64u"`
	SummariesHash   string       `json:"summaries_hash_b64u"`
	SchemasHashB64u string       `json:"schemas_hash_b64u"`
	List            []reportTool `json:"list"`
}

// reportTool is one tool, in request order.
type reportTool struct {
	Name                string `json:"name"`
	DescriptionHashB64u string `json:"description_hash_b64u"`
	SchemaHashB64u      string `json:"schema_hash_b64u"`
}

// reportBootstrap is one bootstrap file.
type reportBootstrap struct {
	Name       string `json:"name"`
	SHA256B64u string `json:"sha256_b64u"`
	Bytes      int    `json:"bytes"`
	Chars      int    `json:"chars"`
	ValidUTF8  bool   `json:"valid_utf8"`
	InPrompt   bool   `json:"in_prompt"`
}

// newReport commits every input of c, the release's pinned fixed text and
// the layout (a layout checkLayout accepted).
func newReport(c *Capture, rel *Release, toks []layoutToken, frags map[string]string) (*releaseReport, error) {
	if c == nil || rel == nil {
		return nil, fmt.Errorf("%w: nil capture or release", errInvalidCapture)
	}
	r := &releaseReport{
		ReportVersion:        reportVersion,
		Recipe:               reportRecipe{ID: ID, Version: Version},
		Harness:              reportHarness{ID: "openclaw", Version: c.OpenClawVersion},
		Release:              reportRelease{Files: []reportFile{}, FragmentsTable: rel.TableSHA256},
		RequestHashB64u:      c.RequestSHA256B64u,
		SystemPromptHashB64u: b64u.SHA256(c.SystemPrompt),
		Slots:                []reportSlot{},
		Bootstrap:            []reportBootstrap{},
	}
	for _, f := range rel.Files {
		r.Release.Files = append(r.Release.Files, reportFile{Path: f.Path, SHA256B64u: f.SHA256})
	}
	type wireTok struct {
		Kind  string `json:"kind"`
		Frag  string `json:"fragment,omitempty"`
		Index *int   `json:"index,omitempty"`
		Name  string `json:"name,omitempty"`
		Value string `json:"value_sha256_b64u,omitempty"`
	}
	wt := make([]wireTok, 0, len(toks))
	bytesBy := map[string]int{kindFragment: 0, kindNewline: 0, kindTool: 0, kindFile: 0, kindSlot: 0}
	inPrompt := map[string]bool{}
	for _, t := range toks {
		w := wireTok{Kind: t.Kind}
		switch t.Kind {
		case kindFragment:
			w.Frag = t.Frag
			bytesBy[t.Kind] += len(frags[t.Frag])
		case kindNewline:
			bytesBy[t.Kind]++
		case kindTool:
			i := t.Index
			w.Index = &i
			bytesBy[t.Kind] += len(c.Tools[i].Name)
		case kindFile:
			w.Name = t.Name
			f, _ := fileByName(c.BootstrapFiles, t.Name)
			bytesBy[t.Kind] += len(promptForm(f.Content))
			inPrompt[t.Name] = true
		case kindSlot:
			w.Name = t.Name
			w.Value = b64u.SHA256([]byte(t.Value))
			bytesBy[t.Kind] += len(t.Value)
			r.Slots = append(r.Slots, reportSlot{Name: t.Name, SHA256B64u: w.Value, Bytes: len(t.Value)})
		}
		wt = append(wt, w)
	}
	var err error
	if r.Layout.HashB64u, err = jcsHash(wt); err != nil {
		return nil, err
	}
	r.Layout.Tokens = len(toks)
	r.Layout.Fragments = len(frags)
	r.Layout.BytesByKind = bytesBy
	names := make([]string, 0, len(c.Tools))
	type summary struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	type schema struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	sums := make([]summary, 0, len(c.Tools))
	schemas := make([]schema, 0, len(c.Tools))
	r.Tools.List = []reportTool{}
	for _, t := range c.Tools {
		names = append(names, t.Name)
		sums = append(sums, summary{t.Name, t.Description})
		schemas = append(schemas, schema{t.Name, t.SchemaJCS})
		r.Tools.List = append(r.Tools.List, reportTool{
			Name:                t.Name,
			DescriptionHashB64u: b64u.SHA256([]byte(t.Description)),
			SchemaHashB64u:      b64u.SHA256(t.SchemaJCS),
		})
	}
	r.Tools.Count = len(c.Tools)
	if r.Tools.NamesHashB64u, err = jcsHash(names); err != nil {
		return nil, err
	}
	if r.Tools.SummariesHash, err = jcsHash(sums); err != nil {
		return nil, err
	}
	if r.Tools.SchemasHashB64u, err = jcsHash(schemas); err != nil {
		return nil, err
	}
	for _, f := range c.BootstrapFiles {
		r.Bootstrap = append(r.Bootstrap, reportBootstrap{
			Name:       f.Name,
			SHA256B64u: b64u.SHA256(f.Content),
			Bytes:      len(f.Content),
			Chars:      utf8.RuneCount(f.Content),
			ValidUTF8:  utf8.Valid(f.Content),
			InPrompt:   inPrompt[f.Name],
		})
	}
	return r, nil
}

// canonical returns the report's JCS bytes.
func (r *releaseReport) canonical() ([]byte, error) {
	c, err := jcs.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("openclawrelease: report: %w", err)
	}
	return c, nil
}

func jcsHash(v any) (string, error) {
	c, err := jcs.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("openclawrelease: report: %w", err)
	}
	return b64u.SHA256(c), nil
}
