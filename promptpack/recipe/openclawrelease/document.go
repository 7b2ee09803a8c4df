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

// document is what a prompt pack of this recipe carries
// (docs/spec/recipe-openclaw-release.md section 6): the capture, the
// layout Reproduce found, and the text of every fragment the layout uses. A
// rebuild needs nothing else: the fragments are checked against the
// release's fragment table compiled into this module. It stays in this
// package: Rebuild hands on the capture and what a report needs of the
// layout.
type document struct {
	Capture   *Capture
	Layout    []layoutToken
	Fragments map[string]string
}

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
	out, err := jcs.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidCapture, err)
	}
	return out, nil
}

// encodeDocument returns the canonical (JCS) release document of a capture
// that build reproduced: {document_version, capture_json, layout,
// fragments}. Layout tokens are arrays: ["f", hash], ["nl"], ["tool",
// index], ["file", name], ["slot", name, value].
func encodeDocument(c *Capture, res *result) ([]byte, error) {
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
		case kindFile:
			layout = append(layout, []any{t.Kind, t.Name})
		case kindSlot:
			layout = append(layout, []any{t.Kind, t.Name, t.Value})
		default:
			return nil, fmt.Errorf("%w: unknown kind %q", errInvalidLayout, clipName(t.Kind))
		}
	}
	out, err := jcs.Marshal(map[string]any{
		"document_version": documentVersion,
		"capture_json":     string(cj),
		"layout":           layout,
		"fragments":        res.Fragments,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalidLayout, err)
	}
	return out, nil
}

// parseDocument reads a release document strictly (exact members, known
// token kinds, bounded sizes, the capture as ParseCapture reads it). It
// does not check the layout against a release: Rebuild does.
func parseDocument(data []byte) (*document, error) {
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
	d := &document{Fragments: map[string]string{}}
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
		want := map[string]int{kindFragment: 2, kindNewline: 1, kindTool: 2, kindFile: 2, kindSlot: 3}[kind]
		if want == 0 || len(parts) != want {
			r.Failf(p, jsonobj.ErrWrongType, "not a token")
			continue
		}
		switch kind {
		case kindFragment:
			t.Frag, _ = r.Str(parts[1], p+"[1]")
		case kindTool:
			t.Index = int(r.Int(parts[1], p+"[1]", 0, maxTools-1))
		case kindFile:
			t.Name, _ = r.Str(parts[1], p+"[1]")
		case kindSlot:
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
