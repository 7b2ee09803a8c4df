package gate

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/charclass"
)

// maxToolNameBytes bounds a tool name or tool-list entry.
const maxToolNameBytes = 128

// verifyToolName is the owner-only verify tool (seed 000). It is never gated
// by the verification gate and not filtered by profiles or allow lists; an
// explicit deny entry still denies it.
const verifyToolName = "verify"

// toolAliases mirrors OpenClaw's TOOL_NAME_ALIASES.
var toolAliases = map[string]string{
	"bash":        "exec",
	"apply-patch": "apply_patch",
}

// normalizeToolName is OpenClaw's normalizeToolName: trim, lower-case, then
// the aliases bash -> exec and apply-patch -> apply_patch. A name that is not
// ASCII normalizes to "" (not a valid tool name): Go and JavaScript trim and
// lower-case some characters differently (Go maps U+0130 to "i" and trims
// U+0085, JavaScript gives "i\u0307" and keeps U+0085), so the gate would
// decide another name than the one OpenClaw looks up.
func normalizeToolName(name string) string {
	for i := range len(name) {
		if name[i] >= utf8.RuneSelf {
			return ""
		}
	}
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := toolAliases[n]; ok {
		return a
	}
	return n
}

// validToolName reports whether a normalized name is acceptable: 1 to
// maxToolNameBytes bytes of [a-z0-9_.:-]. glob additionally admits '*'.
func validToolName(n string, glob bool) bool {
	if n == "" || len(n) > maxToolNameBytes {
		return false
	}
	if glob {
		return toolGlobChars.All(n)
	}
	return toolNameChars.All(n)
}

var (
	toolNameChars = charclass.Lower().Or(charclass.Digit(), charclass.Of("_.:-"))
	toolGlobChars = toolNameChars.Or(charclass.Of("*"))
)

// toolGroups are OpenClaw's group:* shorthands (core tools only).
var toolGroups = map[string][]string{
	"group:memory":     {"memory_search", "memory_get"},
	"group:web":        {"web_search", "web_fetch"},
	"group:fs":         {"read", "write", "edit", "apply_patch"},
	"group:runtime":    {"exec", "process"},
	"group:sessions":   {"sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "session_status"},
	"group:ui":         {"browser", "canvas"},
	"group:automation": {"cron", "gateway"},
	"group:messaging":  {"message"},
	"group:nodes":      {"nodes"},
	"group:openclaw": {
		"read", "write", "edit", "apply_patch", "exec", "process",
		"web_search", "web_fetch", "memory_search", "memory_get",
		"sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "session_status",
		"browser", "canvas", "cron", "gateway", "message", "nodes",
		"agents_list", "subagents", "image", "tts",
	},
}

// toolProfiles are OpenClaw's tools.profile presets as allow lists. "full"
// (nil) places no restriction; it is also the behaviour when no profile is set.
var toolProfiles = map[string][]string{
	"minimal":   {"session_status"},
	"coding":    {"group:fs", "group:runtime", "group:sessions", "group:memory", "image"},
	"messaging": {"group:messaging", "sessions_list", "sessions_history", "sessions_send", "session_status"},
	"full":      nil,
}

// profileNames lists the accepted tools.profile values.
func profileNames() []string {
	out := make([]string, 0, len(toolProfiles))
	for k := range toolProfiles {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// toolMatcher matches normalized tool names against a list of entries:
// exact names, group:* shorthands (expanded) and '*' globs.
type toolMatcher struct {
	exact map[string]struct{}
	globs []string
}

func newToolMatcher(entries []string) *toolMatcher {
	m := &toolMatcher{exact: map[string]struct{}{}}
	for _, e := range entries {
		if g, ok := toolGroups[e]; ok {
			for _, t := range g {
				m.exact[t] = struct{}{}
			}
			continue
		}
		if strings.Contains(e, "*") {
			m.globs = append(m.globs, e)
			continue
		}
		m.exact[e] = struct{}{}
	}
	return m
}

func (m *toolMatcher) empty() bool { return len(m.exact) == 0 && len(m.globs) == 0 }

func (m *toolMatcher) match(tool string) bool {
	if _, ok := m.exact[tool]; ok {
		return true
	}
	for _, g := range m.globs {
		if globMatch(g, tool) {
			return true
		}
	}
	return false
}

// globMatch matches s against a pattern in which '*' matches any run of
// bytes (including none) and every other byte matches itself. Greedy
// matching with backtracking to the last star: O(len(pattern)*len(s)) at
// worst, and both are bounded by maxToolNameBytes.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// listPolicy is one allow/deny layer. An empty allow list allows everything;
// deny wins over allow.
type listPolicy struct {
	allow *toolMatcher
	deny  *toolMatcher
}

func newListPolicy(allow, deny []string) listPolicy {
	return listPolicy{allow: newToolMatcher(allow), deny: newToolMatcher(deny)}
}

// check returns "" when tool passes, else the reason it does not.
func (l listPolicy) check(tool, layer string) string {
	if l.deny.match(tool) {
		return "denied by " + layer + ".deny"
	}
	if tool != verifyToolName && !l.allow.empty() && !l.allow.match(tool) {
		return "not in " + layer + ".allow"
	}
	return ""
}
