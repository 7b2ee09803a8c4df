package openclawsig

import (
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Params are the resolved builder params (RECIPE.md section 1), declared
// for schema/confdoc: the conf tags are the document's keys. Optional
// strings that the builder only uses trimmed or compares with a fixed value
// are plain strings: absent, null and "" behave the same for them. The
// pointer fields are those where absent/null and "" differ. Every array
// holds at most maxJSONContainerLen (1,048,576) entries.
type Params struct {
	WorkspaceDir      string   `conf:"workspaceDir,required"` // raw
	DefaultThinkLevel *string  `conf:"defaultThinkLevel"`     // nil: the default_think_level literal
	ReasoningLevel    *string  `conf:"reasoningLevel"`        // nil: the default_reasoning_level literal
	ExtraSystemPrompt string   `conf:"extraSystemPrompt"`
	OwnerNumbers      []string `conf:"ownerNumbers,max=1048576"`
	ReasoningTagHint  bool     `conf:"reasoningTagHint"`
	ToolNames         []string `conf:"toolNames,max=1048576"`
	// ToolSummaries holds the toolSummaries entries in document order.
	// Entries whose value is null are dropped: the builder skips them.
	ToolSummaries       toolSummaries     `conf:"toolSummaries"`
	ModelAliasLines     []string          `conf:"modelAliasLines,max=1048576"`
	UserTimezone        string            `conf:"userTimezone"`
	UserTime            string            `conf:"userTime"`       // accepted, never printed
	UserTimeFormat      string            `conf:"userTimeFormat"` // accepted, never printed
	ContextFiles        []contextFile     `conf:"contextFiles,max=1048576"`
	SkillsPrompt        string            `conf:"skillsPrompt"`
	HeartbeatPrompt     string            `conf:"heartbeatPrompt"`
	DocsPath            string            `conf:"docsPath"`
	WorkspaceNotes      []string          `conf:"workspaceNotes,max=1048576"`
	TTSHint             string            `conf:"ttsHint"`
	PromptMode          string            `conf:"promptMode"`
	RuntimeInfo         *runtimeParams    `conf:"runtimeInfo"`
	MessageToolHints    []string          `conf:"messageToolHints,max=1048576"`
	SandboxInfo         *sandboxParams    `conf:"sandboxInfo"`
	ReactionGuidance    *reactionGuidance `conf:"reactionGuidance"`
	MemoryCitationsMode string            `conf:"memoryCitationsMode"`
}

// contextFile is one injected workspace file.
type contextFile struct {
	Path    string `conf:"path,required"`
	Content string `conf:"content,required"`
}

// runtimeParams is params.runtimeInfo.
type runtimeParams struct {
	AgentID      string   `conf:"agentId"`
	Host         string   `conf:"host"`
	OS           string   `conf:"os"`
	Arch         string   `conf:"arch"`
	Node         string   `conf:"node"`
	Model        string   `conf:"model"`
	DefaultModel string   `conf:"defaultModel"`
	Channel      string   `conf:"channel"`
	RepoRoot     string   `conf:"repoRoot"`
	Capabilities []string `conf:"capabilities,max=1048576"`
}

// sandboxParams is params.sandboxInfo.
type sandboxParams struct {
	Enabled             bool          `conf:"enabled"`
	WorkspaceDir        string        `conf:"workspaceDir"`
	WorkspaceAccess     string        `conf:"workspaceAccess"`
	AgentWorkspaceMount string        `conf:"agentWorkspaceMount"`
	BrowserBridgeURL    string        `conf:"browserBridgeUrl"`
	BrowserNoVNCURL     string        `conf:"browserNoVncUrl"`
	HostBrowserAllowed  *bool         `conf:"hostBrowserAllowed"` // only exactly true or false prints a line
	Elevated            *elevatedInfo `conf:"elevated"`
}

// CheckConf refuses an enabled sandbox whose elevated mode is allowed
// without a defaultLevel: the builder would print "undefined".
func (si *sandboxParams) CheckConf(d *confdoc.Decoder, path string) {
	if si.Enabled && si.Elevated != nil && si.Elevated.Allowed && si.Elevated.DefaultLevel == nil {
		d.Fail(jsonobj.Key(jsonobj.Key(path, "elevated"), "defaultLevel"), jsonobj.ErrMissingField,
			"is required when the sandbox is enabled and elevated is allowed")
	}
}

// elevatedInfo is params.sandboxInfo.elevated.
type elevatedInfo struct {
	Allowed      bool    `conf:"allowed"`
	DefaultLevel *string `conf:"defaultLevel"` // never nil where it is printed
}

// reactionGuidance is params.reactionGuidance.
type reactionGuidance struct {
	Level   string `conf:"level"`
	Channel string `conf:"channel,required"`
}

// toolSummaries is params.toolSummaries: an object of strings or nulls,
// kept in document order without the null entries.
type toolSummaries []toolSummary

// UnmarshalConf reads the object v.
func (ts *toolSummaries) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	if v.Kind() != pohjson.Object {
		d.Fail(path, jsonobj.ErrWrongType, "not an object")
		return
	}
	ms := v.Members()
	if len(ms) > maxJSONContainerLen {
		d.Fail(path, jsonobj.ErrTooLarge, "more than %d entries", maxJSONContainerLen)
		return
	}
	out := make(toolSummaries, 0, len(ms))
	for _, m := range ms {
		if m.Value.Kind() == pohjson.Null {
			continue
		}
		s, ok := m.Value.Str()
		if !ok {
			d.Fail(jsonobj.Key(path, m.Key), jsonobj.ErrWrongType, "not a string")
			return
		}
		out = append(out, toolSummary{Name: m.Key, Summary: s})
	}
	*ts = out
}

// ParseParams parses the params JSON strictly: one JSON object, at most
// MaxParamsSize bytes, valid UTF-8 without unpaired surrogate escapes, no
// duplicate keys, keys matched case-sensitively, every key known, every
// value of the expected JSON type (null allowed where the builder treats
// it as absent, refused as an array element). Where the builder would
// print "undefined" or "null" (RECIPE.md section 7) the input is refused
// as missing (jsonobj.ErrMissingField): an absent or null workspaceDir,
// reactionGuidance.channel, or sandboxInfo.elevated.defaultLevel while the
// sandbox is enabled and elevated is allowed; and a context file without a
// string path or content. Errors are *confdoc.ConfigError matching
// ErrInvalidParams, named by JSON path, and never contain values.
func ParseParams(data []byte) (*Params, error) {
	p := &Params{}
	err := confdoc.Parse(data, jsonOptions(MaxParamsSize), p, confdoc.Options{Doc: ErrInvalidParams, NullIsAbsent: true})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// jsonOptions are the parse options of every JSON input of the package:
// at most limit bytes, and a non-integer number is a value of the wrong
// type rather than a syntax error.
func jsonOptions(limit int) pohjson.ParseOptions {
	return pohjson.ParseOptions{MaxBytes: limit, AllowFloats: true}
}
