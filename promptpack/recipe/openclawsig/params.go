package openclawsig

import "errors"

// Params are the resolved builder params (RECIPE.md section 1). Optional
// strings that the builder only uses trimmed or compares with a fixed value
// are plain strings: absent, null and "" behave the same for them. The
// pointer fields are those where absent/null and "" differ.
type Params struct {
	WorkspaceDir      string  // required, raw
	DefaultThinkLevel *string // nil: the default_think_level literal
	ReasoningLevel    *string // nil: the default_reasoning_level literal
	ExtraSystemPrompt string
	OwnerNumbers      []string
	ReasoningTagHint  bool
	ToolNames         []string
	// ToolSummaries holds the toolSummaries entries in document order.
	// Entries whose value is null are dropped: the builder skips them.
	ToolSummaries       []toolSummary
	ModelAliasLines     []string
	UserTimezone        string
	UserTime            string // accepted, never printed
	UserTimeFormat      string // accepted, never printed
	ContextFiles        []contextFile
	SkillsPrompt        string
	HeartbeatPrompt     string
	DocsPath            string
	WorkspaceNotes      []string
	TTSHint             string
	PromptMode          string
	RuntimeInfo         *runtimeParams
	MessageToolHints    []string
	SandboxInfo         *sandboxParams
	ReactionGuidance    *reactionGuidance
	MemoryCitationsMode string
}

// contextFile is one injected workspace file.
type contextFile struct {
	Path    string
	Content string
}

// runtimeParams is params.runtimeInfo.
type runtimeParams struct {
	AgentID, Host, OS, Arch, Node, Model, DefaultModel, Channel, RepoRoot string
	Capabilities                                                          []string
}

// sandboxParams is params.sandboxInfo.
type sandboxParams struct {
	Enabled             bool
	WorkspaceDir        string
	WorkspaceAccess     string
	AgentWorkspaceMount string
	BrowserBridgeURL    string
	BrowserNoVNCURL     string
	HostBrowserAllowed  *bool // only exactly true or false prints a line
	Elevated            *elevatedInfo
}

// elevatedInfo is params.sandboxInfo.elevated.
type elevatedInfo struct {
	Allowed      bool
	DefaultLevel string
}

// reactionGuidance is params.reactionGuidance.
type reactionGuidance struct {
	Level   string
	Channel string
}

// ParseParams parses the params JSON strictly: one JSON object, at most
// MaxParamsSize bytes, valid UTF-8 without unpaired surrogate escapes, no
// duplicate keys, keys matched case-sensitively, every key known, every
// value of the expected JSON type (null allowed where the builder treats
// it as absent). Where the builder would print "undefined" or "null"
// (RECIPE.md section 7) the input is refused with errMissingField: an
// absent or null workspaceDir, reactionGuidance.channel, or
// sandboxInfo.elevated.defaultLevel while the sandbox is enabled and
// elevated is allowed; and a context file without a string path or
// content. Errors are *paramsError and never contain values.
func ParseParams(data []byte) (*Params, error) {
	if len(data) > MaxParamsSize {
		return nil, &paramsError{Err: errTooLarge}
	}
	p, err := parseParams(data)
	if err != nil {
		if fe, ok := errors.AsType[*fieldError](err); ok {
			return nil, &paramsError{Path: fe.path, Err: fe.err}
		}
		return nil, &paramsError{Err: err}
	}
	return p, nil
}

func parseParams(data []byte) (*Params, error) {
	r, err := newJSONReader(data)
	if err != nil {
		return nil, err
	}
	p := &Params{}
	var haveWorkspace bool
	present, err := r.object("", func(key, kp string) error {
		var err error
		switch key {
		case "workspaceDir":
			var s *string
			if s, err = r.str(kp); s != nil {
				p.WorkspaceDir, haveWorkspace = *s, true
			}
		case "defaultThinkLevel":
			p.DefaultThinkLevel, err = r.str(kp)
		case "reasoningLevel":
			p.ReasoningLevel, err = r.str(kp)
		case "extraSystemPrompt":
			p.ExtraSystemPrompt, err = r.optStr(kp)
		case "ownerNumbers":
			p.OwnerNumbers, err = r.strings(kp)
		case "reasoningTagHint":
			p.ReasoningTagHint, err = r.optBool(kp)
		case "toolNames":
			p.ToolNames, err = r.strings(kp)
		case "toolSummaries":
			_, err = r.object(kp, func(k, vp string) error {
				v, err := r.str(vp)
				if err == nil && v != nil {
					p.ToolSummaries = append(p.ToolSummaries, toolSummary{Name: k, Summary: *v})
				}
				return err
			})
		case "modelAliasLines":
			p.ModelAliasLines, err = r.strings(kp)
		case "userTimezone":
			p.UserTimezone, err = r.optStr(kp)
		case "userTime":
			p.UserTime, err = r.optStr(kp)
		case "userTimeFormat":
			p.UserTimeFormat, err = r.optStr(kp)
		case "contextFiles":
			p.ContextFiles, err = r.contextFiles(kp)
		case "skillsPrompt":
			p.SkillsPrompt, err = r.optStr(kp)
		case "heartbeatPrompt":
			p.HeartbeatPrompt, err = r.optStr(kp)
		case "docsPath":
			p.DocsPath, err = r.optStr(kp)
		case "workspaceNotes":
			p.WorkspaceNotes, err = r.strings(kp)
		case "ttsHint":
			p.TTSHint, err = r.optStr(kp)
		case "promptMode":
			p.PromptMode, err = r.optStr(kp)
		case "runtimeInfo":
			p.RuntimeInfo, err = r.runtimeInfo(kp)
		case "messageToolHints":
			p.MessageToolHints, err = r.strings(kp)
		case "sandboxInfo":
			p.SandboxInfo, err = r.sandboxInfo(kp)
		case "reactionGuidance":
			p.ReactionGuidance, err = r.reactionGuidance(kp)
		case "memoryCitationsMode":
			p.MemoryCitationsMode, err = r.optStr(kp)
		default:
			err = &fieldError{path: kp, err: errUnknownField}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, &fieldError{err: errWrongType}
	}
	if !haveWorkspace {
		return nil, &fieldError{path: "workspaceDir", err: errMissingField}
	}
	return p, nil
}

// optBool reads a boolean; null gives false.
func (r *jsonReader) optBool(path string) (bool, error) {
	b, err := r.boolean(path)
	if err != nil || b == nil {
		return false, err
	}
	return *b, nil
}

func (r *jsonReader) contextFiles(path string) ([]contextFile, error) {
	var out []contextFile
	_, err := r.array(path, func(_ int, ep string) error {
		var f contextFile
		var havePath, haveContent bool
		present, err := r.object(ep, func(key, kp string) error {
			var err error
			switch key {
			case "path":
				f.Path, err = r.reqStr(kp)
				havePath = true
			case "content":
				f.Content, err = r.reqStr(kp)
				haveContent = true
			default:
				err = &fieldError{path: kp, err: errUnknownField}
			}
			return err
		})
		if err != nil {
			return err
		}
		if !present {
			return &fieldError{path: ep, err: errMissingField}
		}
		if !havePath {
			return &fieldError{path: ep + ".path", err: errMissingField}
		}
		if !haveContent {
			return &fieldError{path: ep + ".content", err: errMissingField}
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

func (r *jsonReader) runtimeInfo(path string) (*runtimeParams, error) {
	ri := &runtimeParams{}
	present, err := r.object(path, func(key, kp string) error {
		var err error
		switch key {
		case "agentId":
			ri.AgentID, err = r.optStr(kp)
		case "host":
			ri.Host, err = r.optStr(kp)
		case "os":
			ri.OS, err = r.optStr(kp)
		case "arch":
			ri.Arch, err = r.optStr(kp)
		case "node":
			ri.Node, err = r.optStr(kp)
		case "model":
			ri.Model, err = r.optStr(kp)
		case "defaultModel":
			ri.DefaultModel, err = r.optStr(kp)
		case "channel":
			ri.Channel, err = r.optStr(kp)
		case "repoRoot":
			ri.RepoRoot, err = r.optStr(kp)
		case "capabilities":
			ri.Capabilities, err = r.strings(kp)
		default:
			err = &fieldError{path: kp, err: errUnknownField}
		}
		return err
	})
	if err != nil || !present {
		return nil, err
	}
	return ri, nil
}

func (r *jsonReader) sandboxInfo(path string) (*sandboxParams, error) {
	si := &sandboxParams{}
	var elevatedLevelSet bool
	present, err := r.object(path, func(key, kp string) error {
		var err error
		switch key {
		case "enabled":
			si.Enabled, err = r.optBool(kp)
		case "workspaceDir":
			si.WorkspaceDir, err = r.optStr(kp)
		case "workspaceAccess":
			si.WorkspaceAccess, err = r.optStr(kp)
		case "agentWorkspaceMount":
			si.AgentWorkspaceMount, err = r.optStr(kp)
		case "browserBridgeUrl":
			si.BrowserBridgeURL, err = r.optStr(kp)
		case "browserNoVncUrl":
			si.BrowserNoVNCURL, err = r.optStr(kp)
		case "hostBrowserAllowed":
			si.HostBrowserAllowed, err = r.boolean(kp)
		case "elevated":
			el := &elevatedInfo{}
			var present bool
			present, err = r.object(kp, func(k, ep string) error {
				var err error
				switch k {
				case "allowed":
					el.Allowed, err = r.optBool(ep)
				case "defaultLevel":
					var s *string
					if s, err = r.str(ep); s != nil {
						el.DefaultLevel, elevatedLevelSet = *s, true
					}
				default:
					err = &fieldError{path: ep, err: errUnknownField}
				}
				return err
			})
			if present {
				si.Elevated = el
			}
		default:
			err = &fieldError{path: kp, err: errUnknownField}
		}
		return err
	})
	if err != nil || !present {
		return nil, err
	}
	if si.Enabled && si.Elevated != nil && si.Elevated.Allowed && !elevatedLevelSet {
		return nil, &fieldError{path: path + ".elevated.defaultLevel", err: errMissingField}
	}
	return si, nil
}

func (r *jsonReader) reactionGuidance(path string) (*reactionGuidance, error) {
	rg := &reactionGuidance{}
	var haveChannel bool
	present, err := r.object(path, func(key, kp string) error {
		var err error
		switch key {
		case "level":
			rg.Level, err = r.optStr(kp)
		case "channel":
			var s *string
			if s, err = r.str(kp); s != nil {
				rg.Channel, haveChannel = *s, true
			}
		default:
			err = &fieldError{path: kp, err: errUnknownField}
		}
		return err
	})
	if err != nil || !present {
		return nil, err
	}
	if !haveChannel {
		return nil, &fieldError{path: path + ".channel", err: errMissingField}
	}
	return rg, nil
}
