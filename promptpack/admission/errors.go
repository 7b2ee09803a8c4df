package admission

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/safetext"
)

// Rule codes (docs/spec/admission-policy-v1.md section 6). A *RuleError
// carries exactly one of them.
const (
	ruleRecipeNotAllowed      = "RECIPE_NOT_ALLOWED"
	RulePromptModeNotAllowed  = "PROMPT_MODE_NOT_ALLOWED"
	RuleBootstrapPath         = "BOOTSTRAP_PATH_NOT_ALLOWED"
	RuleBootstrapDuplicate    = "BOOTSTRAP_DUPLICATE_PATH"
	RuleBootstrapFileTooLarge = "BOOTSTRAP_FILE_TOO_LARGE"
	RuleBootstrapTotalTooBig  = "BOOTSTRAP_TOTAL_TOO_LARGE"
	RuleBootstrapBinary       = "BOOTSTRAP_BINARY"
	RuleBootstrapNul          = "BOOTSTRAP_NUL"
	RuleBootstrapNewlines     = "BOOTSTRAP_NEWLINES_NOT_NORMALISED"
	RuleBootstrapNotPinned    = "BOOTSTRAP_CONTENT_NOT_PINNED"
	RuleSkillsRefused         = "SKILLS_REFUSED"
	RuleSkillsMalformed       = "SKILLS_PROMPT_MALFORMED"
	RuleSkillsPreamble        = "SKILLS_PREAMBLE_NOT_PINNED"
	RuleSkillNotAllowed       = "SKILL_NOT_ALLOWED"
	RuleSkillNotPinned        = "SKILL_NOT_PINNED"
	RuleSkillWorkspace        = "SKILL_WORKSPACE"
	RuleSkillsEnvRefused      = "SKILLS_ENV_REFUSED"
	RuleSkillsEnvNotPinned    = "SKILLS_ENV_NOT_PINNED"
	RuleExtraSystemPrompt     = "EXTRA_SYSTEM_PROMPT_REFUSED"
	RuleToolSchemasNotPinned  = "TOOL_SCHEMAS_NOT_PINNED"
	RuleToolSummaryRefused    = "TOOL_SUMMARY_REFUSED"
	RuleToolNameNotAllowed    = "TOOL_NAME_NOT_ALLOWED"
	RuleOwnersRefused         = "OWNERS_REFUSED"
	RuleOwnerNotHMAC          = "OWNER_NOT_PINNED_HMAC"

	RuleRuntimeMemoryUnlocked = "RUNTIME_MEMORY_UNLOCKED"
	RuleRuntimeDevelopment    = "RUNTIME_DEVELOPMENT_OPTIONS"
	RuleRuntimeFailMode       = "RUNTIME_FAIL_MODE_NOT_DENY"
	RuleRuntimeVerification   = "RUNTIME_VERIFICATION_NOT_ENFORCED"
)

// KnownRule reports whether code is one of the rule codes above (for a
// refusal that crossed a process boundary).
func KnownRule(code string) bool {
	switch code {
	case ruleRecipeNotAllowed, RulePromptModeNotAllowed, RuleBootstrapPath, RuleBootstrapDuplicate,
		RuleBootstrapFileTooLarge, RuleBootstrapTotalTooBig, RuleBootstrapBinary, RuleBootstrapNul,
		RuleBootstrapNewlines, RuleBootstrapNotPinned, RuleSkillsRefused, RuleSkillsMalformed,
		RuleSkillsPreamble, RuleSkillNotAllowed, RuleSkillNotPinned, RuleSkillWorkspace,
		RuleSkillsEnvRefused, RuleSkillsEnvNotPinned, RuleExtraSystemPrompt, RuleToolSchemasNotPinned,
		RuleToolSummaryRefused, RuleToolNameNotAllowed, RuleOwnersRefused, RuleOwnerNotHMAC,
		RuleRuntimeMemoryUnlocked, RuleRuntimeDevelopment, RuleRuntimeFailMode, RuleRuntimeVerification:
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
