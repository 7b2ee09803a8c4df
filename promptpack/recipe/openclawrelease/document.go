package openclawrelease

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// documentVersion is the document_version of a release document.
const documentVersion = "1"

// maxDocumentSize bounds a release document.
const maxDocumentSize = 48 << 20

// Document is what a prompt pack of this recipe carries
// (docs/spec/recipe-openclaw-release.md section 6): the capture, the
// layout Reproduce found, and the text of every fragment the layout uses. A
// rebuild needs nothing else: the fragments are checked against the
// release's fragment table compiled into this module.
type Document struct {
	Capture   *Capture
	Layout    []layoutToken
	Fragments map[string]string
}

// Wipe zeroes the capture.
func (d *Document) Wipe() {
	if d != nil {
		d.Capture.Wipe()
	}
}

// String describes the document without its contents.
func (d *Document) String() string {
	if d == nil {
		return "openclawrelease.Document(nil)"
	}
	return fmt.Sprintf("openclawrelease.Document{openclaw=%s tokens=%d fragments=%d}", d.Capture.OpenClawVersion, len(d.Layout), len(d.Fragments))
}

// GoString is String.
func (d *Document) GoString() string { return d.String() }

// Format prints String for every verb.
func (d *Document) Format(f fmt.State, _ rune) { fmt.Fprint(f, d.String()) }

// encode returns the capture's canonical (JCS) form.
func (c *Capture) encode() ([]byte, error) {
	w := wireCapture{
		CaptureVersion:    captureVersion,
		OpenClawVersion:   c.OpenClawVersion,
		RequestSHA256B64u: c.RequestSHA256B64u,
		SystemPrompt:      string(c.SystemPrompt),
		Tools:             make([]wireTool, 0, len(c.Tools)),
		BootstrapFiles:    make([]wireFile, 0, len(c.BootstrapFiles)),
	}
	for _, t := range c.Tools {
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.SchemaJCS)})
	}
	for _, f := range c.BootstrapFiles {
		w.BootstrapFiles = append(w.BootstrapFiles, wireFile{Name: f.Name, Content: string(f.Content)})
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidCapture, err)
	}
	defer clear(raw)
	return jcs.Canonicalize(raw)
}

// encodeDocument returns the canonical (JCS) release document of a capture
// that build reproduced: {document_version, capture_json, layout,
// fragments}. Layout tokens are arrays: ["f", hash], ["nl"], ["tool",
// index], ["file", name], ["slot", name, value].
func encodeDocument(c *Capture, res *Result) ([]byte, error) {
	cj, err := c.encode()
	if err != nil {
		return nil, err
	}
	defer clear(cj)
	layout := make([][]any, 0, len(res.Layout))
	for _, t := range res.Layout {
		switch t.Kind {
		case kindFragment:
			layout = append(layout, []any{t.Kind, t.Frag})
		case kindNewline:
			layout = append(layout, []any{t.Kind})
		case kindTool:
			layout = append(layout, []any{t.Kind, t.Index})
		case KindFile:
			layout = append(layout, []any{t.Kind, t.Name})
		case KindSlot:
			layout = append(layout, []any{t.Kind, t.Name, t.Value})
		default:
			return nil, fmt.Errorf("%w: unknown kind %q", errInvalidLayout, clipName(t.Kind))
		}
	}
	raw, err := json.Marshal(map[string]any{
		"document_version": documentVersion,
		"capture_json":     string(cj),
		"layout":           layout,
		"fragments":        res.Fragments,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidLayout, err)
	}
	defer clear(raw)
	return jcs.Canonicalize(raw)
}

// ParseDocument reads a release document strictly (exact members, known
// token kinds, bounded sizes, the capture as ParseCapture reads it). It
// does not check the layout against a release: Rebuild does.
func ParseDocument(data []byte) (*Document, error) {
	if len(data) > maxDocumentSize {
		return nil, fmt.Errorf("%w: document larger than %d bytes", errInvalidLayout, maxDocumentSize)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxDocumentSize})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidLayout, err)
	}
	var r jsonobj.Reader
	m := r.Object(root, jsonobj.Root, map[string]bool{"document_version": true, "capture_json": true, "layout": true, "fragments": true})
	if s, ok := r.Str(m["document_version"], "$.document_version"); ok && s != documentVersion {
		r.Failf("$.document_version", jsonobj.ErrWrongType, "want %q", documentVersion)
	}
	cj := r.Bytes(m["capture_json"], "$.capture_json")
	d := &Document{Fragments: map[string]string{}}
	for _, fm := range r.Members(m["fragments"], "$.fragments", 0, maxLayoutTokens) {
		s, ok := fm.Value.Str()
		if !ok || s == "" {
			r.Failf(jsonobj.Key("$.fragments", fm.Key), jsonobj.ErrWrongType, "not a non-empty string")
			continue
		}
		d.Fragments[fm.Key] = s
	}
	for i, tv := range r.Array(m["layout"], "$.layout", 1, maxLayoutTokens) {
		p := jsonobj.Index("$.layout", i)
		parts := r.Array(tv, p, 1, 3)
		if len(parts) == 0 {
			continue
		}
		kind, _ := r.Str(parts[0], p+"[0]")
		t := layoutToken{Kind: kind}
		want := map[string]int{kindFragment: 2, kindNewline: 1, kindTool: 2, KindFile: 2, KindSlot: 3}[kind]
		if want == 0 || len(parts) != want {
			r.Failf(p, jsonobj.ErrWrongType, "not a token")
			continue
		}
		switch kind {
		case kindFragment:
			t.Frag, _ = r.Str(parts[1], p+"[1]")
		case kindTool:
			t.Index = int(r.Int(parts[1], p+"[1]", 0, maxTools-1))
		case KindFile:
			t.Name, _ = r.Str(parts[1], p+"[1]")
		case KindSlot:
			t.Name, _ = r.Str(parts[1], p+"[1]")
			t.Value, _ = r.Str(parts[2], p+"[2]")
		}
		d.Layout = append(d.Layout, t)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidLayout, err)
	}
	// Every fragment the document carries is one the layout uses.
	used := map[string]bool{}
	for _, t := range d.Layout {
		if t.Kind == kindFragment {
			used[t.Frag] = true
		}
	}
	for _, h := range slices.Sorted(maps.Keys(d.Fragments)) {
		if !used[h] {
			return nil, fmt.Errorf("%w: $.fragments: %s is not used by the layout", errInvalidLayout, clipHash(h))
		}
	}
	c, err := ParseCapture(cj)
	clear(cj)
	if err != nil {
		return nil, err
	}
	d.Capture = c
	return d, nil
}

// Rebuild checks the document against its release (Lookup of the
// capture's OpenClaw version; the fragment table compiled into this
// module) and re-renders the capture's system prompt from the layout
// (finish). It reads no install, clock or environment.
func (d *Document) Rebuild() (*Result, error) {
	rel, err := Lookup(d.Capture.OpenClawVersion)
	if err != nil {
		return nil, err
	}
	return finish(d.Capture, rel, d.Layout, d.Fragments)
}
