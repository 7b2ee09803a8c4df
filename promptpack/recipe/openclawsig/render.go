package openclawsig

import (
	"regexp"
	"strings"

	"github.com/clawea/attester/schema/jsstr"
)

// Template file names used by the assembly rules.
const (
	tplIdentity              = "identity.txt"
	tplTooling               = "tooling.txt"
	tplToolingFallback       = "tooling-fallback.txt"
	tplToolCallStyle         = "tool-call-style.txt"
	tplSafety                = "safety.txt"
	tplVerificationPreamble  = "verification-preamble.txt"
	tplProtectedFiles        = "protected-files.txt"
	tplCLIReference          = "cli-reference.txt"
	tplSkills                = "skills.txt"
	tplMemory                = "memory.txt"
	tplMemoryCitationsOff    = "memory-citations-off.txt"
	tplMemoryCitationsOn     = "memory-citations-on.txt"
	tplSelfUpdate            = "self-update.txt"
	tplModelAliases          = "model-aliases.txt"
	tplWorkspace             = "workspace.txt"
	tplDocumentation         = "documentation.txt"
	tplSandbox               = "sandbox.txt"
	tplUserIdentity          = "user-identity.txt"
	tplTime                  = "time.txt"
	tplWorkspaceFiles        = "workspace-files.txt"
	tplReplyTags             = "reply-tags.txt"
	tplMessaging             = "messaging.txt"
	tplMessageTool           = "message-tool.txt"
	tplMessageToolButtonsOn  = "message-tool-buttons-on.txt"
	tplMessageToolButtonsOff = "message-tool-buttons-off.txt"
	tplVoice                 = "voice.txt"
	tplSubagentContext       = "subagent-context.txt"
	tplGroupContext          = "group-context.txt"
	tplReactionsMinimal      = "reactions-minimal.txt"
	tplReactionsExtensive    = "reactions-extensive.txt"
	tplReasoningFormat       = "reasoning-format.txt"
	tplProjectContext        = "project-context.txt"
	tplSoulGuidance          = "soul-guidance.txt"
	tplSilentReplies         = "silent-replies.txt"
	tplHeartbeats            = "heartbeats.txt"
	tplRuntime               = "runtime.txt"
)

// Tool keys that gate sections (RECIPE.md section 5).
const (
	keyRead          = "read"
	keyVerify        = "verify"
	keyUpdateAndSign = "update_and_sign"
	keyMemorySearch  = "memory_search"
	keyMemoryGet     = "memory_get"
	keyGateway       = "gateway"
	keyMessage       = "message"
)

// Prompt modes as resolved.
const (
	ModeFull    = "full"
	ModeMinimal = "minimal"
	ModeNone    = "none"
)

// Result is a rendered prompt and what a SystemPromptReport needs about it.
type Result struct {
	Prompt      []byte // the exact UTF-8 bytes of the system prompt
	PromptChars int    // its length in UTF-16 code units (JS .length)
	Mode        string // ModeFull, ModeMinimal or ModeNone
	// ToolNames are the tools in the order listed, with their display
	// spelling; nil in ModeNone (no tool list is rendered).
	ToolNames []string
	// ContextFiles are the context files as rendered, in order; nil in
	// ModeNone.
	ContextFiles []RenderedFile
	// SkillsPrompt and ExtraSystemPrompt are the trimmed values the
	// builder used ("" when the section is not rendered).
	SkillsPrompt      string
	ExtraSystemPrompt string
	// RuntimeLine is the {{runtime_line}} value; "" in ModeNone.
	RuntimeLine string
}

// RenderedFile is one context file as rendered.
type RenderedFile struct {
	Path    string
	Content []byte
	Chars   int // UTF-16 code units of Content
}

var placeholderRE = regexp.MustCompile(`\{\{(\w+)\}\}`)

// interpolate replaces {{name}} tokens whose name is in data; others stay.
// Inserted values are not scanned again and "$" is not special.
func interpolate(tpl string, data map[string]string) string {
	if len(data) == 0 {
		return tpl
	}
	return placeholderRE.ReplaceAllStringFunc(tpl, func(tok string) string {
		if v, ok := data[tok[2:len(tok)-2]]; ok {
			return v
		}
		return tok
	})
}

type builder struct {
	h     *Harness
	elems []string
}

// tpl adds the lines of an interpolated template.
func (b *builder) tpl(name string, data map[string]string) {
	text := interpolate(string(b.h.files.Templates[name]), data)
	b.elems = append(b.elems, strings.Split(text, "\n")...)
}

// direct adds one element without splitting it.
func (b *builder) direct(s string) { b.elems = append(b.elems, s) }

func (b *builder) output() []byte {
	var sb strings.Builder
	first := true
	for _, e := range b.elems {
		if e == "" {
			continue
		}
		if !first {
			sb.WriteString(b.h.lit.outputJoiner)
		}
		first = false
		sb.WriteString(e)
	}
	return []byte(sb.String())
}

type tools struct {
	order     []string          // keys in rendered order
	display   map[string]string // key -> first spelling
	available map[string]bool
	lines     []string
}

func (h *Harness) resolveTools(p *Params) tools {
	l := &h.lit
	t := tools{display: map[string]string{}, available: map[string]bool{}}
	var seenOrder []string
	for _, n := range p.ToolNames {
		n = jsstr.Trim(n)
		if n == "" {
			continue
		}
		k := jsstr.ToLower(n)
		if t.available[k] {
			continue
		}
		t.available[k] = true
		t.display[k] = n
		seenOrder = append(seenOrder, k)
	}
	keys := make([]string, len(p.ToolSummaries))
	for i, e := range p.ToolSummaries {
		keys[i] = e.Name
	}
	external := map[string]string{}
	for _, i := range jsstr.PropertyOrder(keys) {
		k := jsstr.ToLower(jsstr.Trim(p.ToolSummaries[i].Name))
		v := jsstr.Trim(p.ToolSummaries[i].Summary)
		if k == "" || v == "" {
			continue
		}
		external[k] = v
	}
	known := map[string]bool{}
	for _, k := range l.toolOrder {
		known[k] = true
		if t.available[k] {
			t.order = append(t.order, k)
		}
	}
	var unknown []string
	for _, k := range seenOrder {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	jsstr.Sort(unknown)
	t.order = append(t.order, unknown...)
	for _, k := range t.order {
		summary, ok := h.coreIndex[k]
		if !ok {
			summary, ok = l.inheritedSummaries[k]
		}
		if !ok {
			summary, ok = external[k]
		}
		line := l.toolLinePrefix + t.display[k]
		if ok {
			line += l.toolLineSummarySep + summary
		}
		t.lines = append(t.lines, line)
	}
	return t
}

func (h *Harness) runtimeLine(p *Params, channel string, caps []string) string {
	l := &h.lit
	var parts []string
	add := func(key, v string) {
		if v != "" {
			parts = append(parts, l.runtimeKey(key)+v)
		}
	}
	ri := p.RuntimeInfo
	if ri == nil {
		ri = &RuntimeInfo{}
	}
	add("agentId", ri.AgentID)
	add("host", ri.Host)
	add("repoRoot", ri.RepoRoot)
	switch {
	case ri.OS != "" && ri.Arch != "":
		add("os", ri.OS+l.runtimeOSArchOpen+ri.Arch+l.runtimeOSArchClose)
	case ri.OS != "":
		add("os", ri.OS)
	case ri.Arch != "":
		add("arch_only", ri.Arch)
	}
	add("node", ri.Node)
	add("model", ri.Model)
	add("defaultModel", ri.DefaultModel)
	if channel != "" {
		add("channel", channel)
		c := l.runtimeCapsNone
		if len(caps) > 0 {
			c = strings.Join(caps, l.runtimeCapsJoiner)
		}
		add("capabilities", c)
	}
	think := l.defaultThinkLevel
	if p.DefaultThinkLevel != nil {
		think = *p.DefaultThinkLevel
	}
	parts = append(parts, l.runtimeKey("thinking")+think)
	return l.runtimeLinePrefix + strings.Join(parts, l.runtimePartsJoiner)
}

func (h *Harness) isSoul(path string) bool {
	p := strings.ReplaceAll(jsstr.Trim(path), `\`, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	return jsstr.ToLower(p) == h.lit.soulBasename
}

// Render rebuilds the system prompt from checked harness data and params
// (RECIPE.md sections 3-5). It reads no clock, environment or file, and
// the same inputs always give the same bytes. It returns
// ErrTemplatesNotChecked unless CheckTemplates succeeded on h.
func Render(h *Harness, p *Params) (*Result, error) {
	if h == nil || !h.checked {
		return nil, ErrTemplatesNotChecked
	}
	if p == nil {
		return nil, &ParamsError{Err: ErrMissingField}
	}
	l := &h.lit
	if p.PromptMode == ModeNone {
		out := l.noneModeOutput
		return &Result{Prompt: []byte(out), PromptChars: jsstr.Len(out), Mode: ModeNone}, nil
	}
	minimal := p.PromptMode == ModeMinimal
	res := &Result{Mode: ModeFull}
	if minimal {
		res.Mode = ModeMinimal
	}
	b := &builder{h: h}

	t := h.resolveTools(p)
	for _, k := range t.order {
		res.ToolNames = append(res.ToolNames, t.display[k])
	}
	var toolList string
	if len(t.lines) > 0 {
		toolList = strings.Join(t.lines, l.toolLinesJoiner)
	} else {
		toolList = interpolate(string(h.files.Templates[tplToolingFallback]), map[string]string{
			"exec_tool":    l.defaultExecTool,
			"process_tool": l.defaultProcessTool,
		})
	}
	readTool := l.defaultReadTool
	if t.available[keyRead] {
		readTool = t.display[keyRead]
	}

	var owners []string
	for _, o := range p.OwnerNumbers {
		if o = jsstr.Trim(o); o != "" {
			owners = append(owners, o)
		}
	}
	skills := jsstr.Trim(p.SkillsPrompt)
	timezone := jsstr.Trim(p.UserTimezone)
	docs := jsstr.Trim(p.DocsPath)
	tts := jsstr.Trim(p.TTSHint)
	extra := jsstr.Trim(p.ExtraSystemPrompt)
	heartbeat := l.heartbeatLineDefault
	if hb := jsstr.Trim(p.HeartbeatPrompt); hb != "" {
		heartbeat = l.heartbeatLinePrefix + hb
	}
	var channel string
	var caps []string
	if ri := p.RuntimeInfo; ri != nil {
		channel = jsstr.ToLower(jsstr.Trim(ri.Channel))
		for _, c := range ri.Capabilities {
			if c = jsstr.Trim(c); c != "" {
				caps = append(caps, c)
			}
		}
	}
	inlineButtons := false
	for _, c := range caps {
		if jsstr.ToLower(c) == l.inlineButtonsCap {
			inlineButtons = true
		}
	}
	res.RuntimeLine = h.runtimeLine(p, channel, caps)

	// 1-4
	b.tpl(tplIdentity, nil)
	b.tpl(tplTooling, map[string]string{"tool_list": toolList})
	b.tpl(tplToolCallStyle, nil)
	b.tpl(tplSafety, nil)
	// 5-6
	if !minimal && t.available[keyVerify] {
		b.tpl(tplVerificationPreamble, nil)
		if t.available[keyUpdateAndSign] {
			b.tpl(tplProtectedFiles, nil)
		}
	}
	// 7
	b.tpl(tplCLIReference, nil)
	// 8
	if !minimal && skills != "" {
		b.tpl(tplSkills, map[string]string{"read_tool": readTool, "skills_prompt": skills})
		res.SkillsPrompt = skills
	}
	// 9
	if !minimal && (t.available[keyMemorySearch] || t.available[keyMemoryGet]) {
		b.tpl(tplMemory, nil)
		if p.MemoryCitationsMode == "off" {
			b.tpl(tplMemoryCitationsOff, nil)
		} else {
			b.tpl(tplMemoryCitationsOn, nil)
		}
	}
	// 10
	if !minimal && t.available[keyGateway] {
		b.tpl(tplSelfUpdate, nil)
	}
	// 11
	if !minimal && len(p.ModelAliasLines) > 0 {
		b.tpl(tplModelAliases, map[string]string{
			"model_alias_lines": strings.Join(p.ModelAliasLines, l.modelAliasLinesJoiner),
		})
	}
	// 12
	if timezone != "" {
		b.direct(l.dateTimeHintLine)
	}
	// 13-14
	b.tpl(tplWorkspace, map[string]string{"workspace_dir": p.WorkspaceDir})
	for _, n := range p.WorkspaceNotes {
		if n = jsstr.Trim(n); n != "" {
			b.direct(n)
		}
	}
	// 15
	if !minimal && docs != "" {
		b.tpl(tplDocumentation, map[string]string{"docs_path": docs})
	}
	// 16
	if si := p.SandboxInfo; si != nil && si.Enabled {
		b.tpl(tplSandbox, nil)
		h.sandboxLines(b, si)
	}
	// 17
	if !minimal && len(owners) > 0 {
		b.tpl(tplUserIdentity, map[string]string{
			"owner_line": l.ownerLinePrefix + strings.Join(owners, l.ownerNumbersJoiner) + l.ownerLineSuffix,
		})
	}
	// 18-19
	if timezone != "" {
		b.tpl(tplTime, map[string]string{"user_timezone": timezone})
	}
	b.tpl(tplWorkspaceFiles, nil)
	// 20-22
	if !minimal {
		b.tpl(tplReplyTags, nil)
		b.tpl(tplMessaging, nil)
		if t.available[keyMessage] {
			b.tpl(tplMessageTool, map[string]string{
				"channel_options":    l.messageChannelOptions,
				"silent_reply_token": l.silentReplyToken,
			})
			if inlineButtons {
				b.tpl(tplMessageToolButtonsOn, nil)
			} else if channel != "" {
				b.tpl(tplMessageToolButtonsOff, map[string]string{"runtime_channel": channel})
			}
			for _, hint := range p.MessageToolHints {
				b.direct(hint)
			}
		}
		if tts != "" {
			b.tpl(tplVoice, map[string]string{"tts_hint": tts})
		}
	}
	// 23
	if extra != "" {
		if minimal {
			b.tpl(tplSubagentContext, nil)
		} else {
			b.tpl(tplGroupContext, nil)
		}
		b.direct(extra)
		res.ExtraSystemPrompt = extra
	}
	// 24
	if rg := p.ReactionGuidance; rg != nil {
		name := tplReactionsExtensive
		if rg.Level == "minimal" {
			name = tplReactionsMinimal
		}
		b.tpl(name, map[string]string{"channel": rg.Channel})
	}
	// 25
	if p.ReasoningTagHint {
		b.tpl(tplReasoningFormat, map[string]string{
			"reasoning_hint": strings.Join(l.reasoningHintSentences, l.reasoningHintJoiner),
		})
	}
	// 26
	if len(p.ContextFiles) > 0 {
		b.tpl(tplProjectContext, nil)
		for _, f := range p.ContextFiles {
			if h.isSoul(f.Path) {
				b.tpl(tplSoulGuidance, nil)
				break
			}
		}
		for _, f := range p.ContextFiles {
			b.direct(l.contextHeaderPrefix + f.Path)
			b.direct(f.Content)
			res.ContextFiles = append(res.ContextFiles, RenderedFile{
				Path: f.Path, Content: []byte(f.Content), Chars: jsstr.Len(f.Content),
			})
		}
	}
	// 27-28
	if !minimal {
		b.tpl(tplSilentReplies, map[string]string{"silent_reply_token": l.silentReplyToken})
		b.tpl(tplHeartbeats, map[string]string{"heartbeat_prompt_line": heartbeat})
	}
	// 29
	reasoning := l.defaultReasoningLevel
	if p.ReasoningLevel != nil {
		reasoning = *p.ReasoningLevel
	}
	b.tpl(tplRuntime, map[string]string{"runtime_line": res.RuntimeLine, "reasoning_level": reasoning})

	res.Prompt = b.output()
	res.PromptChars = jsstr.Len(string(res.Prompt))
	return res, nil
}

// sandboxLines adds the 9 direct sandbox elements (RECIPE.md section 4.5).
func (h *Harness) sandboxLines(b *builder, si *SandboxInfo) {
	l := &h.lit
	if si.WorkspaceDir != "" {
		b.direct(l.sandboxWorkspacePrefix + si.WorkspaceDir)
	}
	if si.WorkspaceAccess != "" {
		line := l.sandboxAccessPrefix + si.WorkspaceAccess
		if si.AgentWorkspaceMount != "" {
			line += l.sandboxMountOpen + si.AgentWorkspaceMount + l.sandboxMountClose
		}
		b.direct(line)
	}
	if si.BrowserBridgeURL != "" {
		b.direct(l.sandboxBrowserEnabled)
	}
	if si.BrowserNoVNCURL != "" {
		b.direct(l.sandboxNoVNCPrefix + si.BrowserNoVNCURL)
	}
	if si.HostBrowserAllowed != nil {
		if *si.HostBrowserAllowed {
			b.direct(l.sandboxHostAllowed)
		} else {
			b.direct(l.sandboxHostBlocked)
		}
	}
	if el := si.Elevated; el != nil && el.Allowed {
		b.direct(l.sandboxElevated1)
		b.direct(l.sandboxElevated2)
		b.direct(l.sandboxElevated3)
		b.direct(l.sandboxLevelPrefix + el.DefaultLevel + l.sandboxLevelSuffix)
	}
}
