package admission

import (
	"errors"
	"strings"

	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/jsstr"
)

// errSkills: the skills prompt does not follow the grammar of section 6.4.
var errSkills = errors.New("skills prompt does not follow the grammar")

// skillEntry is one <skill> element of a skills prompt.
type skillEntry struct {
	raw         string // "<skill>" ... "</skill>", exact bytes
	name        string // element text, as written (XML escapes kept)
	location    string
	hasLocation bool
}

type skillsPrompt struct {
	preamble string
	entries  []skillEntry
}

const (
	listOpen  = "<available_skills>"
	listClose = "</available_skills>"
	listEmpty = "<available_skills/>"
	skillOpen = "<skill>"
	skillEnd  = "</skill>"
)

// parseSkillsPrompt reads a trimmed skills prompt: a preamble, then either
// "<available_skills/>" or "<available_skills>" with <skill> elements
// separated by whitespace and "</available_skills>", nothing after. A
// <skill> holds <name> (required), <description> and <location>
// (optional), each at most once, in any order, separated by whitespace,
// with text that holds no '<'.
func parseSkillsPrompt(s string) (*skillsPrompt, error) {
	i := strings.Index(s, "<available_skills")
	if i < 0 {
		return nil, errSkills
	}
	out := &skillsPrompt{preamble: s[:i]}
	rest := s[i:]
	if rest == listEmpty {
		return out, nil
	}
	body, ok := strings.CutPrefix(rest, listOpen)
	if !ok {
		return nil, errSkills
	}
	if body, ok = strings.CutSuffix(body, listClose); !ok {
		return nil, errSkills
	}
	for {
		body = trimSpace(body)
		if body == "" {
			return out, nil
		}
		if !strings.HasPrefix(body, skillOpen) {
			return nil, errSkills
		}
		j := strings.Index(body, skillEnd)
		if j < 0 {
			return nil, errSkills
		}
		raw := body[:j+len(skillEnd)]
		e, err := parseSkill(raw)
		if err != nil {
			return nil, err
		}
		out.entries = append(out.entries, e)
		body = body[len(raw):]
	}
}

func parseSkill(raw string) (skillEntry, error) {
	e := skillEntry{raw: raw}
	inner := raw[len(skillOpen) : len(raw)-len(skillEnd)]
	seen := map[string]bool{}
	for {
		inner = trimSpace(inner)
		if inner == "" {
			break
		}
		var tag string
		for _, t := range []string{"name", "description", "location"} {
			if strings.HasPrefix(inner, "<"+t+">") {
				tag = t
			}
		}
		if tag == "" || seen[tag] {
			return e, errSkills
		}
		seen[tag] = true
		inner = inner[len(tag)+2:]
		k := strings.Index(inner, "</"+tag+">")
		if k < 0 || strings.ContainsRune(inner[:k], '<') {
			return e, errSkills
		}
		text := inner[:k]
		inner = inner[k+len(tag)+3:]
		switch tag {
		case "name":
			e.name = text
		case "location":
			e.location, e.hasLocation = text, true
		}
	}
	if !seen["name"] || jsstr.Trim(e.name) == "" {
		return e, errSkills
	}
	return e, nil
}

// trimSpace removes the whitespace the skills formatter puts between
// elements.
func trimSpace(s string) string { return strings.Trim(s, " \t\r\n") }

// isWorkspaceSkill reports whether a skill may come from the workspace
// (section 6.4): its location is missing, not an absolute path (a "~/"
// path names a home the pack does not state, so it is refused too), holds
// an empty ("//", a trailing "/"), "." or ".." segment or a backslash, has
// a project-local skills folder (".pi/skills", ".agents/skills"), or lies
// under a workspace folder the params name; a workspace folder that is not
// an absolute path in that same clean form makes every skill a workspace
// skill. Only clean paths can be compared by prefix: the file system
// resolves "/home//ws" and "/home/./ws" to "/home/ws". When in doubt it
// answers true.
func isWorkspaceSkill(e skillEntry, params *openclawsig.Params) bool {
	loc := e.location
	if !e.hasLocation || !strings.HasPrefix(loc, "/") || strings.ContainsRune(loc, '\\') {
		return true
	}
	if !cleanAbs(loc) {
		return true
	}
	segs := strings.Split(loc, "/")
	for i, seg := range segs {
		if (seg == ".pi" || seg == ".agents") && i+1 < len(segs) && segs[i+1] == "skills" {
			return true
		}
	}
	dirs := []string{params.WorkspaceDir}
	if ri := params.RuntimeInfo; ri != nil {
		dirs = append(dirs, ri.RepoRoot)
	}
	if si := params.SandboxInfo; si != nil {
		dirs = append(dirs, si.WorkspaceDir, si.AgentWorkspaceMount)
	}
	for _, d := range dirs {
		if d = jsstr.Trim(d); d == "" {
			continue
		}
		if !strings.HasPrefix(d, "/") {
			return true // a relative or "~" folder: where it is is unknown
		}
		if d = strings.TrimRight(d, "/"); d == "" || !cleanAbs(d) || under(loc, d) {
			return true
		}
	}
	return false
}

// cleanAbs reports whether p is an absolute path whose every segment
// after the leading "/" is neither empty nor "." nor "..": the only form in
// which one path lying under another is a prefix comparison.
func cleanAbs(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}
