package openclawrelease

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/clawea/attester/schema/jsstr"
	tdparse "github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/js"
)

// errJSSource: a release file is not JavaScript this package can read.
var errJSSource = errors.New("openclawrelease: unreadable release source")

// extractFragments returns the fixed text of one JavaScript source file of
// a release: the value of every string literal and every literal chunk of
// every template literal (the text between its substitutions), as the
// JavaScript engine evaluates them (escapes applied), with their trimmed
// forms, deduplicated and in byte order. Empty strings are left out. The file is parsed as an ES
// module by a real JavaScript parser (github.com/tdewolff/parse/v2/js), so
// text inside comments and regular expressions is never a fragment.
func extractFragments(src []byte) ([]string, error) {
	ast, err := js.Parse(tdparse.NewInputBytes(src), js.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errJSSource, clipErr(err))
	}
	v := &fragVisitor{seen: map[string]struct{}{}}
	js.Walk(v, ast)
	out := make([]string, 0, len(v.seen))
	for s := range v.seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func clipErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}

type fragVisitor struct {
	seen map[string]struct{}
}

// add records one fragment and the forms JavaScript's trim, trimStart and
// trimEnd give it (builders trim assembled sections, so a literal's
// leading or trailing line feeds can be gone from the prompt). A literal
// whose value is not text (a lone surrogate, or a tagged template's chunk
// with an escape that has no value) cannot occur in a UTF-8 prompt and is
// left out.
func (v *fragVisitor) add(s string, ok bool) {
	if !ok {
		return
	}
	for _, f := range []string{s, jsstr.Trim(s), strings.TrimLeftFunc(s, jsstr.IsSpace), strings.TrimRightFunc(s, jsstr.IsSpace)} {
		if f != "" {
			v.seen[f] = struct{}{}
		}
	}
}

func (v *fragVisitor) Enter(n js.INode) js.IVisitor {
	switch n := n.(type) {
	case *js.LiteralExpr:
		if n.TokenType == js.StringToken {
			raw := n.Data
			if len(raw) < 2 {
				v.add("", false)
				break
			}
			s, ok := cookJS(raw[1:len(raw)-1], false)
			v.add(s, ok)
		}
	case *js.TemplateExpr:
		// Value of each part is "`text${" or "}text${"; Tail is "}text`"
		// or "`text`".
		for _, p := range n.List {
			if len(p.Value) < 3 {
				v.add("", false)
				continue
			}
			s, ok := cookJS(p.Value[1:len(p.Value)-2], true)
			v.add(s, ok)
		}
		if len(n.Tail) < 2 {
			v.add("", false)
			break
		}
		s, ok := cookJS(n.Tail[1:len(n.Tail)-1], true)
		v.add(s, ok)
	}
	return v
}

func (v *fragVisitor) Exit(js.INode) {}

// cookJS returns the value of the body of a JavaScript string literal or
// template chunk (ECMA-262 SV / TV): escapes applied, line continuations
// removed and, in templates, CR and CRLF read as LF. It reports false for
// an escape a template literal cannot cook (the value is undefined) and for
// a result that is not valid UTF-16 text (a lone surrogate), which this
// recipe cannot carry.
func cookJS(raw []byte, template bool) (string, bool) {
	var units []uint16
	appendRune := func(r rune) {
		units = utf16.AppendRune(units, r)
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\r' && template {
			appendRune('\n')
			i++
			if i < len(raw) && raw[i] == '\n' {
				i++
			}
			continue
		}
		if c != '\\' {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			appendRune(r)
			i += size
			continue
		}
		i++
		if i >= len(raw) {
			return "", false
		}
		e := raw[i]
		i++
		switch e {
		case 'n':
			appendRune('\n')
		case 't':
			appendRune('\t')
		case 'r':
			appendRune('\r')
		case 'b':
			appendRune('\b')
		case 'f':
			appendRune('\f')
		case 'v':
			appendRune('\v')
		case '\r':
			if i < len(raw) && raw[i] == '\n' {
				i++
			}
		case '\n':
		case '0':
			if i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
				return "", false // legacy octal: not in modules, not in templates
			}
			appendRune(0)
		case 'x':
			u, ok := hexUnit(raw[i:], 2)
			if !ok {
				return "", false
			}
			units = append(units, u)
			i += 2
		case 'u':
			if i < len(raw) && raw[i] == '{' {
				end := strings.IndexByte(string(raw[i:]), '}')
				if end < 2 || end > 7 {
					return "", false
				}
				n, err := strconv.ParseUint(string(raw[i+1:i+end]), 16, 32)
				if err != nil || n > 0x10FFFF {
					return "", false
				}
				if n >= 0xD800 && n <= 0xDFFF {
					units = append(units, uint16(n))
				} else {
					appendRune(rune(n))
				}
				i += end + 1
				continue
			}
			u, ok := hexUnit(raw[i:], 4)
			if !ok {
				return "", false
			}
			units = append(units, u)
			i += 4
		default:
			if e >= '1' && e <= '9' {
				return "", false // octal and \8 \9: not allowed in modules
			}
			// Any other character stands for itself (\" \' \\ \` \$ ...),
			// including a multi-byte one.
			r, size := utf8.DecodeRune(raw[i-1:])
			if r == utf8.RuneError && size <= 1 {
				return "", false
			}
			appendRune(r)
			i += size - 1
		}
	}
	// The value must be well-formed UTF-16 to become UTF-8 text.
	for j := 0; j < len(units); j++ {
		u := units[j]
		if utf16.IsSurrogate(rune(u)) {
			if u >= 0xDC00 || j+1 >= len(units) || units[j+1] < 0xDC00 || units[j+1] > 0xDFFF {
				return "", false
			}
			j++
		}
	}
	return string(utf16.Decode(units)), true
}

// hexUnit reads the n hex digits at the start of raw, the digits of \xHH
// (n = 2) or \uHHHH (n = 4), as one UTF-16 code unit. It reports false when
// raw is shorter or a digit is not hex.
func hexUnit(raw []byte, n int) (uint16, bool) {
	if n > len(raw) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[:n]), 16, 4*n)
	return uint16(v), err == nil
}
