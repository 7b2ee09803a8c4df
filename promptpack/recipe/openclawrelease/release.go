package openclawrelease

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/safetext"
)

// FixedText is a release's own text, loaded from that release's files
// (never from this module): fixed-text name -> exact bytes.
type FixedText map[string][]byte

// Release knows how one released OpenClaw version assembles its system
// prompt.
type Release interface {
	// OpenClawVersion is the exact npm version this Release re-renders.
	OpenClawVersion() string
	// Pinned returns the SHA-256 of every fixed text the release's rules
	// read: name -> "sha256:<64 lower-case hex>".
	Pinned() map[string]string
	// Render re-renders the system prompt from the fixed text (already
	// checked against Pinned) and the capture's inputs. It reads no clock,
	// environment or file.
	Render(fixed FixedText, c *Capture) ([]byte, error)
}

// Supported returns the releases this recipe version re-renders, keyed by
// OpenClaw version. It is empty: the assembly rules of no released OpenClaw
// are implemented yet (docs/spec/recipe-openclaw-release.md section 6), so
// every capture is refused with ErrUnsupportedVersion.
func Supported() map[string]Release { return map[string]Release{} }

// Result is a capture that a Release reproduced, with its report.
type Result struct {
	Report     *Report
	ReportJCS  []byte
	ReportHash [32]byte
}

// ReportHashB64u returns b64u(ReportHash).
func (r *Result) ReportHashB64u() string { return b64u.Encode(r.ReportHash[:]) }

// Build checks a capture: the Release for its exact OpenClaw version (from
// releases; an absent version is ErrUnsupportedVersion), its fixed text
// against the pinned hashes (ErrFixedText), and that re-rendering reproduces
// the captured system prompt byte for byte (ErrNotReproduced). Only then
// does it return the capture's report.
func Build(c *Capture, releases map[string]Release, fixed FixedText) (*Result, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil capture", ErrInvalidCapture)
	}
	rel := releases[c.OpenClawVersion]
	if rel == nil || rel.OpenClawVersion() != c.OpenClawVersion {
		return nil, fmt.Errorf("%w: %q (recipe %s version %s)", ErrUnsupportedVersion, safetext.Clip(c.OpenClawVersion, MaxVersionLen), ID, Version)
	}
	pinned := rel.Pinned()
	if err := CheckFixed(fixed, pinned); err != nil {
		return nil, err
	}
	out, err := rel.Render(fixed, c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotReproduced, err)
	}
	same := len(out) == len(c.SystemPrompt) && subtle.ConstantTimeCompare(out, c.SystemPrompt) == 1
	if !same {
		at := firstDiff(out, c.SystemPrompt)
		clear(out)
		return nil, fmt.Errorf("%w: first difference at byte %d (rendered %d bytes, captured %d)", ErrNotReproduced, at, len(out), len(c.SystemPrompt))
	}
	clear(out)
	rep, err := NewReport(c, pinned)
	if err != nil {
		return nil, err
	}
	j, err := rep.Canonical()
	if err != nil {
		return nil, err
	}
	return &Result{Report: rep, ReportJCS: j, ReportHash: sha256.Sum256(j)}, nil
}

// CheckFixed checks that fixed holds exactly the pinned names, each with
// its pinned hash.
func CheckFixed(fixed FixedText, pinned map[string]string) error {
	if len(pinned) == 0 {
		return fmt.Errorf("%w: the release pins no fixed text", ErrFixedText)
	}
	for _, name := range slices.Sorted(maps.Keys(fixed)) {
		if _, ok := pinned[name]; !ok {
			return fmt.Errorf("%w: %q is not pinned", ErrFixedText, safetext.Clip(name, 64))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pinned)) {
		b, ok := fixed[name]
		if !ok {
			return fmt.Errorf("%w: %q is missing", ErrFixedText, safetext.Clip(name, 64))
		}
		if taggedSHA256(b) != pinned[name] {
			return fmt.Errorf("%w: %q", ErrFixedText, safetext.Clip(name, 64))
		}
	}
	return nil
}

func taggedSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
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

// Report is the hash-only commitment to a reproduced capture
// (docs/spec/recipe-openclaw-release.md section 5).
type Report struct {
	ReportVersion        string            `json:"report_version"`
	Recipe               ReportRecipe      `json:"recipe"`
	Harness              ReportHarness     `json:"harness"`
	FixedText            []ReportFixed     `json:"fixed_text"`
	RequestHashB64u      string            `json:"request_sha256_b64u"`
	SystemPromptHashB64u string            `json:"system_prompt_hash_b64u"`
	Tools                ReportTools       `json:"tools"`
	Bootstrap            []ReportBootstrap `json:"bootstrap_files"`
}

// ReportRecipe names the recipe.
type ReportRecipe struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// ReportHarness names the OpenClaw release.
type ReportHarness struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// ReportFixed is one pinned fixed text.
type ReportFixed struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// ReportTools commits the tools three ways (seed 001 item 7): the ordered
// names, the ordered summaries and the ordered schemas, each the b64u
// SHA-256 of a JCS array, plus one entry per tool.
type ReportTools struct {
	Count           int          `json:"count"`
	NamesHashB64u   string       `json:"names_hash_b64u"`
	SummariesHash   string       `json:"summaries_hash_b64u"`
	SchemasHashB64u string       `json:"schemas_hash_b64u"`
	List            []ReportTool `json:"list"`
}

// ReportTool is one tool, in request order.
type ReportTool struct {
	Name                string `json:"name"`
	DescriptionHashB64u string `json:"description_hash_b64u"`
	SchemaHashB64u      string `json:"schema_hash_b64u"`
}

// ReportBootstrap is one bootstrap file.
type ReportBootstrap struct {
	Name       string `json:"name"`
	SHA256B64u string `json:"sha256_b64u"`
	Bytes      int    `json:"bytes"`
	Chars      int    `json:"chars"`
	ValidUTF8  bool   `json:"valid_utf8"`
}

// NewReport commits every input of c, and the pinned fixed text.
func NewReport(c *Capture, pinned map[string]string) (*Report, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil capture", ErrInvalidCapture)
	}
	r := &Report{
		ReportVersion:        ReportVersion,
		Recipe:               ReportRecipe{ID: ID, Version: Version},
		Harness:              ReportHarness{ID: "openclaw", Version: c.OpenClawVersion},
		FixedText:            []ReportFixed{},
		RequestHashB64u:      c.RequestSHA256B64u,
		SystemPromptHashB64u: b64u.SHA256(c.SystemPrompt),
		Bootstrap:            []ReportBootstrap{},
	}
	for _, name := range slices.Sorted(maps.Keys(pinned)) {
		r.FixedText = append(r.FixedText, ReportFixed{Name: name, Hash: pinned[name]})
	}
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
	r.Tools.List = []ReportTool{}
	for _, t := range c.Tools {
		names = append(names, t.Name)
		sums = append(sums, summary{t.Name, t.Description})
		schemas = append(schemas, schema{t.Name, t.SchemaJCS})
		r.Tools.List = append(r.Tools.List, ReportTool{
			Name:                t.Name,
			DescriptionHashB64u: b64u.SHA256([]byte(t.Description)),
			SchemaHashB64u:      b64u.SHA256(t.SchemaJCS),
		})
	}
	r.Tools.Count = len(c.Tools)
	var err error
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
		r.Bootstrap = append(r.Bootstrap, ReportBootstrap{
			Name:       f.Name,
			SHA256B64u: b64u.SHA256(f.Content),
			Bytes:      len(f.Content),
			Chars:      utf8.RuneCount(f.Content),
			ValidUTF8:  utf8.Valid(f.Content),
		})
	}
	return r, nil
}

// Canonical returns the report's JCS bytes.
func (r *Report) Canonical() ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("openclawrelease: report: %w", err)
	}
	return jcs.Canonicalize(raw)
}

func jcsHash(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("openclawrelease: report: %w", err)
	}
	c, err := jcs.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("openclawrelease: report: %w", err)
	}
	return b64u.SHA256(c), nil
}
