package openclawrelease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
)

// Capture is what a released OpenClaw really assembled for one model call
// in the author's install and workspace (docs/spec/recipe-openclaw-release.md
// section 3). It is secret (it holds the whole prompt): call Wipe when done.
type Capture struct {
	// OpenClawVersion is the version of the openclaw npm package that ran,
	// e.g. "2026.9.6".
	OpenClawVersion string
	// RequestSHA256B64u is b64u(SHA-256) of the exact request body the
	// model endpoint received.
	RequestSHA256B64u string
	// SystemPrompt is the system message exactly as sent.
	SystemPrompt []byte
	// Tools are the tool definitions sent, in request order.
	Tools []captureTool
	// BootstrapFiles are the workspace's bootstrap files as on disk when
	// the capture ran, in capture order (names unique).
	BootstrapFiles []bootstrapFile
}

// captureTool is one tool definition sent to the model.
type captureTool struct {
	Name        string
	Description string
	// SchemaJCS is the JCS form of the tool's JSON Schema (parameters).
	SchemaJCS []byte
}

// bootstrapFile is one workspace bootstrap file (AGENTS.md, SOUL.md, ...).
type bootstrapFile struct {
	Name    string // file name relative to the workspace root, no directory
	Content []byte
}

// Wipe zeroes the prompt and the file contents.
func (c *Capture) Wipe() {
	if c == nil {
		return
	}
	clear(c.SystemPrompt)
	c.SystemPrompt = nil
	for i := range c.BootstrapFiles {
		clear(c.BootstrapFiles[i].Content)
	}
	c.BootstrapFiles = nil
	c.Tools = nil
}

// String describes the capture without its contents.
func (c *Capture) String() string {
	if c == nil {
		return "openclawrelease.Capture(nil)"
	}
	return fmt.Sprintf("openclawrelease.Capture{openclaw=%s tools=%d bootstrap=%d}", safetext.Clip(c.OpenClawVersion, maxVersionLen), len(c.Tools), len(c.BootstrapFiles))
}

// GoString is String.
func (c *Capture) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *Capture) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireFile struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

type wireCapture struct {
	CaptureVersion    string     `json:"capture_version"`
	OpenClawVersion   string     `json:"openclaw_version"`
	RequestSHA256B64u string     `json:"request_sha256_b64u"`
	SystemPrompt      string     `json:"system_prompt"`
	Tools             []wireTool `json:"tools"`
	BootstrapFiles    []wireFile `json:"bootstrap_files"`
}

// ParseCapture reads a capture file strictly: one JSON object with exactly
// the members of the format, valid UTF-8, no duplicate keys, every value
// within its limit, tool names and bootstrap file names unique, bootstrap
// file names plain names (no directory, not "." or "..").
func ParseCapture(data []byte) (*Capture, error) {
	if len(data) > maxCaptureSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", errInvalidCapture, maxCaptureSize)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxCaptureSize, AllowFloats: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidCapture, err)
	}
	// The strict tree checks members, types and limits; encoding/json then
	// only copies the values out (it cannot see duplicates or bad UTF-8,
	// which the tree has already refused).
	var r jsonobj.Reader
	m := r.Object(root, jsonobj.Root, map[string]bool{
		"capture_version": true, "openclaw_version": true, "request_sha256_b64u": true,
		"system_prompt": true, "tools": true, "bootstrap_files": true,
	})
	if s, ok := r.Str(m["capture_version"], "$.capture_version"); ok && s != captureVersion {
		r.Failf("$.capture_version", jsonobj.ErrWrongType, "want %q", captureVersion)
	}
	r.Ident(m["openclaw_version"], "$.openclaw_version", maxVersionLen)
	r.B64u(m["request_sha256_b64u"], "$.request_sha256_b64u", 32)
	r.Str(m["system_prompt"], "$.system_prompt")
	for i, t := range r.Array(m["tools"], "$.tools", 0, maxTools) {
		p := jsonobj.Index("$.tools", i)
		tm := r.Object(t, p, map[string]bool{"name": true, "description": true, "parameters": true})
		r.Str(tm["name"], p+".name")
		r.Str(tm["description"], p+".description")
		if v := tm["parameters"]; v != nil && v.Kind() != pohjson.Object {
			r.Failf(p+".parameters", jsonobj.ErrWrongType, "not an object")
		}
	}
	for i, f := range r.Array(m["bootstrap_files"], "$.bootstrap_files", 0, maxBootstrapFiles) {
		p := jsonobj.Index("$.bootstrap_files", i)
		fm := r.Object(f, p, map[string]bool{"name": true, "content": true})
		r.Str(fm["name"], p+".name")
		r.Str(fm["content"], p+".content")
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidCapture, err)
	}
	var w wireCapture
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidCapture, err)
	}
	if !version(w.OpenClawVersion) {
		return nil, fmt.Errorf("%w: openclaw_version %q is not a release version", errInvalidCapture, safetext.Clip(w.OpenClawVersion, maxVersionLen))
	}
	if len(w.SystemPrompt) == 0 || len(w.SystemPrompt) > maxSystemPrompt {
		return nil, fmt.Errorf("%w: system_prompt: empty or larger than %d bytes", errInvalidCapture, maxSystemPrompt)
	}
	c := &Capture{
		OpenClawVersion:   w.OpenClawVersion,
		RequestSHA256B64u: w.RequestSHA256B64u,
		SystemPrompt:      []byte(w.SystemPrompt),
	}
	seen := map[string]bool{}
	for i, t := range w.Tools {
		if t.Name == "" || len(t.Name) > maxToolNameLen || seen[t.Name] || len(t.Description) > maxToolDescription {
			c.Wipe()
			return nil, fmt.Errorf("%w: tools[%d]: empty, duplicate or oversized name, or oversized description", errInvalidCapture, i)
		}
		seen[t.Name] = true
		schema, err := jcs.Canonicalize(t.Parameters)
		if err != nil {
			c.Wipe()
			return nil, fmt.Errorf("%w: tools[%d].parameters: %v", errInvalidCapture, i, err)
		}
		c.Tools = append(c.Tools, captureTool{Name: t.Name, Description: t.Description, SchemaJCS: schema})
	}
	clear(seen)
	for i, f := range w.BootstrapFiles {
		if !plainName(f.Name) || seen[f.Name] || len(f.Content) > maxBootstrapFile {
			c.Wipe()
			return nil, fmt.Errorf("%w: bootstrap_files[%d]: not a plain, unique file name, or larger than %d bytes", errInvalidCapture, i, maxBootstrapFile)
		}
		seen[f.Name] = true
		c.BootstrapFiles = append(c.BootstrapFiles, bootstrapFile{Name: f.Name, Content: []byte(f.Content)})
	}
	return c, nil
}

// version reports whether s looks like an npm release version of OpenClaw:
// digits and dots, then optionally "-" and [0-9A-Za-z.-] (a prerelease).
func version(s string) bool {
	if s == "" || len(s) > maxVersionLen {
		return false
	}
	core, pre, hasPre := strings.Cut(s, "-")
	if core == "" || core[0] == '.' || core[len(core)-1] == '.' || strings.Contains(core, "..") {
		return false
	}
	if !versionCoreChars.All(core) {
		return false
	}
	return !hasPre || pre != "" && prereleaseChars.All(pre)
}

var (
	versionCoreChars = charclass.Digit().Or(charclass.Of("."))
	prereleaseChars  = charclass.Alnum().Or(charclass.Of(".-"))
)

// plainName reports whether s is a file name without a directory.
func plainName(s string) bool {
	return s != "" && len(s) <= maxBootstrapNameLen && utf8.ValidString(s) && s != "." && s != ".." &&
		!strings.ContainsAny(s, "/\\\x00")
}
