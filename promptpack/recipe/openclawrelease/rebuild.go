package openclawrelease

import (
	"errors"
	"strings"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsstr"
)

// errNoTrustCheck: Rebuild was called without a trust check.
var errNoTrustCheck = errors.New("openclawrelease: rebuild without a trust check")

// Rebuilt is a release document that rebuilt, with what its
// SystemPromptReport.v1 needs about the layout
// (docs/spec/recipe-openclaw-release.md section 6.2). Besides Capture it
// holds only hashes and the headings' paths, which the report publishes.
type Rebuilt struct {
	// Release is the document's release; the opener's trust check
	// accepted it.
	Release *Release
	// Capture is the document's capture: its SystemPrompt is what the
	// layout re-rendered byte for byte. It is secret: call Capture.Wipe
	// when done.
	Capture *Capture
	// Files are the bootstrap files the prompt holds, in prompt order.
	Files []promptFile
	// SkillsHashB64u, RuntimeHashB64u and TimeHashB64u are the b64u
	// SHA-256 of the JCS array of {name, value} of the layout's skill.*,
	// runtime.* and time.* slots, in prompt order; "" when it has none.
	SkillsHashB64u, RuntimeHashB64u, TimeHashB64u string
}

// promptFile is one bootstrap file as the prompt holds it.
type promptFile struct {
	// Path is the path its heading names (the context.path slot before it).
	Path string
	// ContentHashB64u is the b64u SHA-256 of its prompt form (promptForm),
	// RawContentHashB64u that of the file.
	ContentHashB64u, RawContentHashB64u string
	// Chars is the UTF-16 length of its prompt form.
	Chars int
}

// Rebuild is the recipe's rebuild side in one call
// (docs/spec/recipe-openclaw-release.md section 6.1, steps 1 and 2). It
// reads the release document doc strictly, looks up the release of its
// capture's exact OpenClaw version (any other is ErrUnsupportedVersion) and
// asks trust whether the opener trusts that release; only when trust
// returns nil does it check the layout against the release's fragment table
// compiled into this module and re-render the captured system prompt,
// which must come out byte for byte. trust's error is returned as it is;
// a nil trust is refused. It reads no install, clock or environment.
func Rebuild(doc []byte, trust func(*Release) error) (*Rebuilt, error) {
	return rebuild(doc, Lookup, trust)
}

// rebuild is Rebuild with the release lookup as a parameter, so that tests
// can rebuild documents of a toy release.
func rebuild(doc []byte, lookup func(string) (*Release, error), trust func(*Release) error) (*Rebuilt, error) {
	if trust == nil {
		return nil, errNoTrustCheck
	}
	d, err := parseDocument(doc)
	if err != nil {
		return nil, err
	}
	rb, err := d.rebuild(lookup, trust)
	if err != nil {
		d.Capture.Wipe()
		return nil, err
	}
	return rb, nil
}

// rebuild looks up the document's release, asks trust, re-renders the
// layout (finish) and collects the layout's report inputs.
func (d *document) rebuild(lookup func(string) (*Release, error), trust func(*Release) error) (*Rebuilt, error) {
	rel, err := lookup(d.Capture.OpenClawVersion)
	if err != nil {
		return nil, err
	}
	if err := trust(rel); err != nil {
		return nil, err
	}
	if _, err := finish(d.Capture, rel, d.Layout, d.Fragments); err != nil {
		return nil, err
	}
	rb := &Rebuilt{Release: rel, Capture: d.Capture, Files: []promptFile{}}
	type kv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	var skills, runtime, timeCtx []kv
	path := ""
	for _, t := range d.Layout {
		switch {
		case t.Kind == kindSlot && t.Name == slotContextPath:
			path = t.Value
		case t.Kind == kindSlot && strings.HasPrefix(t.Name, "skill."):
			skills = append(skills, kv{t.Name, t.Value})
		case t.Kind == kindSlot && strings.HasPrefix(t.Name, "runtime."):
			runtime = append(runtime, kv{t.Name, t.Value})
		case t.Kind == kindSlot && strings.HasPrefix(t.Name, "time."):
			timeCtx = append(timeCtx, kv{t.Name, t.Value})
		case t.Kind == kindFile:
			// finish checked that the file exists.
			f, _ := fileByName(d.Capture.BootstrapFiles, t.Name)
			form := promptForm(f.Content)
			rb.Files = append(rb.Files, promptFile{
				Path:               path,
				ContentHashB64u:    b64u.SHA256([]byte(form)),
				RawContentHashB64u: b64u.SHA256(f.Content),
				Chars:              jsstr.Len(form),
			})
		}
	}
	for _, s := range []struct {
		dst *string
		v   []kv
	}{{&rb.SkillsHashB64u, skills}, {&rb.RuntimeHashB64u, runtime}, {&rb.TimeHashB64u, timeCtx}} {
		if s.v == nil {
			continue
		}
		if *s.dst, err = jcsHash(s.v); err != nil {
			return nil, err
		}
	}
	return rb, nil
}
