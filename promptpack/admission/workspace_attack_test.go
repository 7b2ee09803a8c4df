package admission

import (
	"errors"
	"testing"
)

// TestDisguisedWorkspaceSkillAttack: a pack author spells a workspace
// skill's location, or the workspace folder, with an empty segment ("//")
// or a "." segment, which the file system resolves to the workspace but a
// prefix comparison does not. A sensitive policy suggested from such a pack
// (packctl admission --sensitive) must refuse it as a workspace skill,
// never pin it as an outside one (section 6.4).
func TestDisguisedWorkspaceSkillAttack(t *testing.T) {
	skills := func(loc string) string {
		return "\n\nThe following skills provide specialized instructions for specific tasks.\n\n<available_skills>\n" +
			"  <skill>\n    <name>notes</name>\n    <description>Take notes</description>\n    <location>" + loc +
			"</location>\n  </skill>\n</available_skills>"
	}
	const inWS = "/home/agent/workspace/skills/notes/SKILL.md" // base params: workspaceDir /home/agent/workspace
	for name, set := range map[string]map[string]any{
		"empty segment before the workspace": {"skillsPrompt": skills("/home/agent//workspace/skills/notes/SKILL.md")},
		"leading double slash":               {"skillsPrompt": skills("//home/agent/workspace/skills/notes/SKILL.md")},
		"project-local with empty segment":   {"skillsPrompt": skills("/opt/x/.agents//skills/notes/SKILL.md")},
		"trailing slash":                     {"skillsPrompt": skills("/opt/skills/notes/")},
		"workspace folder with a . segment":  {"skillsPrompt": skills(inWS), "workspaceDir": "/home/agent/./workspace"},
		"workspace folder with //":           {"skillsPrompt": skills(inWS), "workspaceDir": "/home//agent/workspace"},
		"workspace folder with ..":           {"skillsPrompt": skills(inWS), "workspaceDir": "/home/agent/x/../workspace"},
	} {
		_, err := Suggest(testPack(t, set, nil), true)
		if re, ok := errors.AsType[*RuleError](err); !ok || re.Rule != ruleSkillWorkspace || re.Input != "skill:notes" {
			t.Errorf("%s: got %v, want %s for skill:notes", name, err, ruleSkillWorkspace)
		}
	}
	// The same skill outside the workspace, spelled plainly, is suggested.
	if _, err := Suggest(testPack(t, map[string]any{"skillsPrompt": skills("/opt/skills/notes/SKILL.md")}, nil), true); err != nil {
		t.Fatalf("plain outside skill: %v", err)
	}
}
