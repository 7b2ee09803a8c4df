package openclawrelease

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
)

// errInvalidLayout: a layout is malformed or breaks a rule of its release
// (a fragment that is not the release's fixed text, a slot in the wrong
// place, an unknown input).
var errInvalidLayout = errors.New("openclawrelease: invalid layout")

// Token kinds of a layout (docs/spec/recipe-openclaw-release.md section 4.2).
const (
	kindFragment = "f"    // one fragment of the release's fixed text
	kindNewline  = "nl"   // one LF
	kindTool     = "tool" // the name of the capture's tool Index
	kindFile     = "file" // the prompt form of bootstrap file Name
	kindSlot     = "slot" // the value of a named slot
)

// maxLayoutTokens bounds a layout.
const maxLayoutTokens = 1 << 20

// layoutToken is one piece of a layout. Rendering a layout concatenates its
// tokens' texts.
type layoutToken struct {
	Kind string
	// Frag is the b64u SHA-256 of the fragment's text (kindFragment).
	Frag string
	// Index is the tool's position in the capture's tools (kindTool).
	Index int
	// Name is the bootstrap file name (kindFile) or the slot name (kindSlot).
	Name string
	// Value is the slot's value (kindSlot).
	Value string
}

// slotRule says where a release puts a value that is an input rather than
// fixed text: right after the fragments After (b64u SHA-256 of each, in
// order), a value of 1..Max bytes of characters Class accepts.
type slotRule struct {
	Name  string
	After []string
	Class func(r rune) bool
	Max   int
}

// lineText accepts any character but a line break.
func lineText(r rune) bool { return r != '\n' && r != '\r' }

// xmlText accepts the characters of an escaped XML text node on one line.
func xmlText(r rune) bool { return lineText(r) && r != '<' && r != '>' }

// slotContextPath is the slot that names a bootstrap file in the project
// context; it must be followed by a line feed and that file.
const slotContextPath = "context.path"

// fragHash returns the b64u SHA-256 of a fragment's text.
func fragHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return b64u.Encode(h[:])
}

// inputs are the committed inputs a layout may refer to.
type inputs struct {
	Tools []captureTool
	Files []bootstrapFile
}

// promptForm is how a bootstrap file appears in the prompt: runs of three
// or more line feeds collapsed to two and trailing line feeds removed.
func promptForm(content []byte) string {
	b := make([]byte, 0, len(content))
	run := 0
	for _, c := range content {
		if c == '\n' {
			if run++; run > 2 {
				continue
			}
		} else {
			run = 0
		}
		b = append(b, c)
	}
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return string(b)
}

// forms returns the prompt form of each bootstrap file, by name.
func (in inputs) forms() map[string]string {
	m := make(map[string]string, len(in.Files))
	for _, f := range in.Files {
		m[f.Name] = promptForm(f.Content)
	}
	return m
}

// pool is the fixed text of a release, indexed for segmentation.
type pool struct {
	text  map[string]string // hash -> fragment
	short map[string]string // fragments shorter than 4 bytes, text -> hash
	long  map[string][]string
}

func newPool(frags []string) *pool {
	p := &pool{text: map[string]string{}, short: map[string]string{}, long: map[string][]string{}}
	for _, f := range frags {
		if f == "" {
			continue
		}
		h := fragHash(f)
		if _, dup := p.text[h]; dup {
			continue
		}
		p.text[h] = f
		if len(f) < 4 {
			p.short[f] = h
		} else {
			p.long[f[:4]] = append(p.long[f[:4]], f)
		}
	}
	return p
}

// step is one transition of the segmentation: the tokens it adds and the
// bytes it consumes.
type step struct {
	n    int
	toks []layoutToken
}

// steps calls fn for every way a token (or a slot with its preceding
// fragments) can start at offset at of s.
func (p *pool) steps(s string, at int, rel *Release, in inputs, forms map[string]string, fn func(step)) {
	rest := s[at:]
	if rest[0] == '\n' {
		fn(step{1, []layoutToken{{Kind: kindNewline}}})
	}
	for k := 1; k < 4 && k <= len(rest); k++ {
		if h, ok := p.short[rest[:k]]; ok {
			fn(step{k, []layoutToken{{Kind: kindFragment, Frag: h}}})
		}
	}
	if len(rest) >= 4 {
		for _, f := range p.long[rest[:4]] {
			if strings.HasPrefix(rest, f) {
				fn(step{len(f), []layoutToken{{Kind: kindFragment, Frag: fragHash(f)}}})
			}
		}
	}
	for i, t := range in.Tools {
		if t.Name != "" && strings.HasPrefix(rest, t.Name) {
			fn(step{len(t.Name), []layoutToken{{Kind: kindTool, Index: i}}})
		}
	}
	for _, f := range in.Files {
		if c := forms[f.Name]; c != "" && strings.HasPrefix(rest, c) {
			fn(step{len(c), []layoutToken{{Kind: kindFile, Name: f.Name}}})
		}
	}
	for _, r := range rel.Slots {
		pre, toks, ok := p.prefix(r)
		if !ok || !strings.HasPrefix(rest, pre) {
			continue
		}
		v := rest[len(pre):]
		for i, c := range v {
			if !r.Class(c) || i+utf8.RuneLen(c) > r.Max {
				break
			}
			end := i + utf8.RuneLen(c)
			fn(step{len(pre) + end, append(toks[:len(toks):len(toks)], layoutToken{Kind: kindSlot, Name: r.Name, Value: v[:end]})})
		}
	}
}

// prefix returns the text and tokens of a slot rule's preceding fragments.
func (p *pool) prefix(r slotRule) (string, []layoutToken, bool) {
	var b strings.Builder
	toks := make([]layoutToken, 0, len(r.After))
	for _, h := range r.After {
		f, ok := p.text[h]
		if !ok {
			return "", nil, false
		}
		b.WriteString(f)
		toks = append(toks, layoutToken{Kind: kindFragment, Frag: h})
	}
	return b.String(), toks, true
}

// segment finds the layout with the fewest tokens that renders s from the
// pool's fragments, the inputs and the release's slots; among equals it
// takes the longest token first. It returns the offset of the first byte it
// cannot cover when there is none.
func (p *pool) segment(s string, rel *Release, in inputs) ([]layoutToken, int, error) {
	n := len(s)
	if n == 0 {
		return nil, 0, fmt.Errorf("%w: empty prompt", errNotReproduced)
	}
	const inf = int(^uint(0) >> 1)
	cost := make([]int, n+1)
	choice := make([]step, n+1)
	for i := range n {
		cost[i] = inf
	}
	forms := in.forms()
	for at := n - 1; at >= 0; at-- {
		p.steps(s, at, rel, in, forms, func(st step) {
			next := cost[at+st.n]
			if next == inf {
				return
			}
			c := next + len(st.toks)
			if c < cost[at] || c == cost[at] && st.n > choice[at].n {
				cost[at] = c
				choice[at] = st
			}
		})
	}
	if cost[0] == inf {
		// The furthest offset reachable from the start is where the text
		// stops being fixed text or an input.
		reach := make([]bool, n+1)
		reach[0] = true
		far := 0
		for at := 0; at < n; at++ {
			if !reach[at] {
				continue
			}
			far = max(far, at)
			p.steps(s, at, rel, in, forms, func(st step) { reach[at+st.n] = true })
		}
		return nil, far, nil
	}
	var toks []layoutToken
	for at := 0; at < n; at += choice[at].n {
		toks = append(toks, choice[at].toks...)
	}
	return toks, -1, nil
}

// render checks a layout against its release's rules and the inputs
// (checkLayout) and returns the text it renders, looking fragments up in
// frags (hash -> text). A layout whose text would exceed limit bytes is
// refused as soon as it does (errNotReproduced), so a layout that repeats a
// long fragment cannot make the renderer allocate more than limit.
func render(rel *Release, toks []layoutToken, frags map[string]string, in inputs, limit int) ([]byte, error) {
	if err := checkLayout(rel, toks, frags, in); err != nil {
		return nil, err
	}
	forms := in.forms()
	var b []byte
	for _, t := range toks {
		switch t.Kind {
		case kindFragment:
			b = append(b, frags[t.Frag]...)
		case kindNewline:
			b = append(b, '\n')
		case kindTool:
			b = append(b, in.Tools[t.Index].Name...)
		case kindFile:
			b = append(b, forms[t.Name]...)
		case kindSlot:
			b = append(b, t.Value...)
		}
		if len(b) > limit {
			clear(b)
			return nil, fmt.Errorf("%w: the layout renders more than %d bytes", errNotReproduced, limit)
		}
	}
	return b, nil
}

func fileByName(files []bootstrapFile, name string) (bootstrapFile, bool) {
	for _, f := range files {
		if f.Name == name {
			return f, true
		}
	}
	return bootstrapFile{}, false
}

// checkLayout enforces the layout rules (docs/spec/recipe-openclaw-release.md
// section 4.2): every fragment is the release's fixed text (its hash is in
// the release's fragment table and frags holds the text with that hash),
// tools and files exist, every slot is a slot of the release, right after
// its fragments, with a value its class accepts, and a bootstrap file
// appears only as "context.path slot naming it, LF, file", and is not empty
// there (every token renders at least one byte).
func checkLayout(rel *Release, toks []layoutToken, frags map[string]string, in inputs) error {
	if rel == nil {
		return fmt.Errorf("%w: no release", errInvalidLayout)
	}
	if len(toks) == 0 || len(toks) > maxLayoutTokens {
		return fmt.Errorf("%w: %d tokens", errInvalidLayout, len(toks))
	}
	table, err := rel.table()
	if err != nil {
		return err
	}
	for h, f := range frags {
		if fragHash(f) != h {
			return fmt.Errorf("%w: a fragment's text does not have its hash %s", errInvalidLayout, clipHash(h))
		}
	}
	forms := in.forms()
	for i, t := range toks {
		switch t.Kind {
		case kindFragment:
			if _, ok := table[t.Frag]; !ok {
				return fmt.Errorf("%w: token %d: fragment %s is not fixed text of OpenClaw %s", errInvalidLayout, i, clipHash(t.Frag), rel.OpenClawVersion)
			}
			if _, ok := frags[t.Frag]; !ok {
				return fmt.Errorf("%w: token %d: fragment %s is missing", errInvalidLayout, i, clipHash(t.Frag))
			}
		case kindNewline:
		case kindTool:
			if t.Index < 0 || t.Index >= len(in.Tools) {
				return fmt.Errorf("%w: token %d: no tool %d", errInvalidLayout, i, t.Index)
			}
		case kindFile:
			if _, ok := forms[t.Name]; !ok {
				return fmt.Errorf("%w: token %d: no bootstrap file %q", errInvalidLayout, i, clipName(t.Name))
			}
			if forms[t.Name] == "" {
				return fmt.Errorf("%w: token %d: bootstrap file %q is empty in the prompt", errInvalidLayout, i, clipName(t.Name))
			}
			if i < 2 || toks[i-1].Kind != kindNewline || toks[i-2].Kind != kindSlot || toks[i-2].Name != slotContextPath ||
				!strings.HasSuffix(toks[i-2].Value, "/"+t.Name) {
				return fmt.Errorf("%w: token %d: bootstrap file %q is not under its own context header", errInvalidLayout, i, clipName(t.Name))
			}
		case kindSlot:
			r, ok := rel.slot(t.Name)
			if !ok {
				return fmt.Errorf("%w: token %d: OpenClaw %s has no slot %q", errInvalidLayout, i, rel.OpenClawVersion, clipName(t.Name))
			}
			if t.Value == "" || len(t.Value) > r.Max || !utf8.ValidString(t.Value) || strings.IndexFunc(t.Value, func(c rune) bool { return !r.Class(c) }) >= 0 {
				return fmt.Errorf("%w: token %d: slot %q has a value its rule refuses", errInvalidLayout, i, r.Name)
			}
			if i < len(r.After) {
				return fmt.Errorf("%w: token %d: slot %q without its preceding text", errInvalidLayout, i, r.Name)
			}
			for k, h := range r.After {
				pt := toks[i-len(r.After)+k]
				if pt.Kind != kindFragment || pt.Frag != h {
					return fmt.Errorf("%w: token %d: slot %q without its preceding text", errInvalidLayout, i, r.Name)
				}
			}
			if r.Name == slotContextPath {
				if i+2 >= len(toks) || toks[i+1].Kind != kindNewline || toks[i+2].Kind != kindFile {
					return fmt.Errorf("%w: token %d: a context header without its file", errInvalidLayout, i)
				}
			}
		default:
			return fmt.Errorf("%w: token %d: unknown kind %q", errInvalidLayout, i, clipName(t.Kind))
		}
	}
	return nil
}

func clipHash(h string) string {
	if len(h) > 43 {
		h = h[:43]
	}
	return strings.ToValidUTF8(h, "?")
}

func clipName(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.ToValidUTF8(s, "?")
}
