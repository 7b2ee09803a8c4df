package admission

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/safetext"
)

// Rule codes (docs/spec/admission-policy-v1.md section 6). A *RuleError
// carries exactly one of them in its Rule field. They are wire values that
// other packages compare with the spec's strings, or check with KnownRule.
const (
	ruleRecipeNotAllowed      = "RECIPE_NOT_ALLOWED"
	rulePromptModeNotAllowed  = "PROMPT_MODE_NOT_ALLOWED"
	ruleBootstrapPath         = "BOOTSTRAP_PATH_NOT_ALLOWED"
	ruleBootstrapDuplicate    = "BOOTSTRAP_DUPLICATE_PATH"
	ruleBootstrapFileTooLarge = "BOOTSTRAP_FILE_TOO_LARGE"
	ruleBootstrapTotalTooBig  = "BOOTSTRAP_TOTAL_TOO_LARGE"
	ruleBootstrapBinary       = "BOOTSTRAP_BINARY"
	ruleBootstrapNul          = "BOOTSTRAP_NUL"
	ruleBootstrapNewlines     = "BOOTSTRAP_NEWLINES_NOT_NORMALISED"
	ruleBootstrapNotPinned    = "BOOTSTRAP_CONTENT_NOT_PINNED"
	ruleSkillsRefused         = "SKILLS_REFUSED"
	ruleSkillsMalformed       = "SKILLS_PROMPT_MALFORMED"
	ruleSkillsPreamble        = "SKILLS_PREAMBLE_NOT_PINNED"
	ruleSkillNotAllowed       = "SKILL_NOT_ALLOWED"
	ruleSkillNotPinned        = "SKILL_NOT_PINNED"
	ruleSkillWorkspace        = "SKILL_WORKSPACE"
	ruleSkillsEnvRefused      = "SKILLS_ENV_REFUSED"
	ruleSkillsEnvNotPinned    = "SKILLS_ENV_NOT_PINNED"
	ruleExtraSystemPrompt     = "EXTRA_SYSTEM_PROMPT_REFUSED"
	ruleToolSchemasNotPinned  = "TOOL_SCHEMAS_NOT_PINNED"
	ruleToolSummaryRefused    = "TOOL_SUMMARY_REFUSED"
	ruleToolNameNotAllowed    = "TOOL_NAME_NOT_ALLOWED"
	ruleOwnersRefused         = "OWNERS_REFUSED"
	ruleOwnerNotHMAC          = "OWNER_NOT_PINNED_HMAC"

	ruleRuntimeMemoryUnlocked = "RUNTIME_MEMORY_UNLOCKED"
	ruleRuntimeDevelopment    = "RUNTIME_DEVELOPMENT_OPTIONS"
	ruleRuntimeFailMode       = "RUNTIME_FAIL_MODE_NOT_DENY"
	ruleRuntimeVerification   = "RUNTIME_VERIFICATION_NOT_ENFORCED"
)

// KnownRule reports whether code is one of the rule codes above (for a
// refusal that crossed a process boundary).
func KnownRule(code string) bool {
	switch code {
	case ruleRecipeNotAllowed, rulePromptModeNotAllowed, ruleBootstrapPath, ruleBootstrapDuplicate,
		ruleBootstrapFileTooLarge, ruleBootstrapTotalTooBig, ruleBootstrapBinary, ruleBootstrapNul,
		ruleBootstrapNewlines, ruleBootstrapNotPinned, ruleSkillsRefused, ruleSkillsMalformed,
		ruleSkillsPreamble, ruleSkillNotAllowed, ruleSkillNotPinned, ruleSkillWorkspace,
		ruleSkillsEnvRefused, ruleSkillsEnvNotPinned, ruleExtraSystemPrompt, ruleToolSchemasNotPinned,
		ruleToolSummaryRefused, ruleToolNameNotAllowed, ruleOwnersRefused, ruleOwnerNotHMAC,
		ruleRuntimeMemoryUnlocked, ruleRuntimeDevelopment, ruleRuntimeFailMode, ruleRuntimeVerification:
		return true
	}
	return false
}

var (
	// ErrRefused is matched (errors.Is) by every *RuleError: the pack or
	// the run is refused by policy.
	ErrRefused = errors.New("admission: refused by policy")
	// ErrUnreadable: the pack's inputs cannot be read for admission (an
	// unsupported recipe, params that do not parse). Admission fails
	// closed: the pack is not admitted.
	ErrUnreadable = errors.New("admission: pack inputs cannot be checked")
)

// maxInputInError bounds the input name quoted in an error.
const maxInputInError = 64

// RuleError says which rule refused which input. Input names the input
// ("bootstrap:AGENTS.md", "skill:weather", "tool:exec", "owner[1]",
// "extra_system_prompt"); it never holds the input's content.
type RuleError struct {
	Rule  string
	Input string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("admission: refused by policy: %s: %q", e.Rule, e.Input)
}

// Unwrap returns ErrRefused.
func (e *RuleError) Unwrap() error { return ErrRefused }

func refuse(rule, kind, name string) error {
	in := kind
	if name != "" || kind == "bootstrap" {
		in = kind + ":" + safetext.Clip(name, maxInputInError)
	}
	return &RuleError{Rule: rule, Input: in}
}
