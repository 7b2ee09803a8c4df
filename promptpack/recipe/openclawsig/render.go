package openclawsig

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
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
	modeFull    = "full"
	modeMinimal = "minimal"
	modeNone    = "none"
)

// Result is a rendered prompt and what a SystemPromptReport needs about it.
type Result struct {
	Params      *Params // the params it was rendered from
	Prompt      []byte  // the exact UTF-8 bytes of the system prompt
	PromptChars int     // its length in UTF-16 code units (JS .length)
	Mode        string  // modeFull, modeMinimal or modeNone
	// ToolNames are the tools in the order listed, with their display
	// spelling; nil in modeNone (no tool list is rendered).
	ToolNames []string
	// ContextFiles are the context files as rendered, in order; nil in
	// modeNone.
	ContextFiles []renderedFile
	// SkillsPrompt and ExtraSystemPrompt are the trimmed values the
	// builder used ("" when the section is not rendered).
	SkillsPrompt      string
	ExtraSystemPrompt string
	// RuntimeLine is the {{runtime_line}} value; "" in modeNone.
	RuntimeLine string
}

// renderedFile is one context file as rendered.
type renderedFile struct {
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
	slices.SortStableFunc(unknown, jsstr.Compare) // as JS Array.prototype.sort
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
		ri = &runtimeParams{}
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

// Render checks h's templates against trusted (template file name ->
// "sha256:<hex>"; checkTemplates) and only then parses params (ParseParams)
// and rebuilds the system prompt (RECIPE.md sections 3-5): a harness whose
// templates the caller does not trust is never rendered. The first template
// that fails is returned as a *TemplateError. Result.Params is the parsed
// params. It reads no clock, environment or file, and the same inputs always
// give the same bytes.
func Render(h *Harness, trusted map[string]string, params []byte) (*Result, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil harness", ErrInvalidHarness)
	}
	if err := h.checkTemplates(trusted); err != nil {
		return nil, err
	}
	p, err := ParseParams(params)
	if err != nil {
		return nil, err
	}
	res, err := renderChecked(h, p)
	if err != nil {
		return nil, err
	}
	res.Params = p
	return res, nil
}

// renderChecked rebuilds the system prompt from harness data whose
// templates checkTemplates accepted, and params.
func renderChecked(h *Harness, p *Params) (*Result, error) {
	if p == nil {
		return nil, &confdoc.ConfigError{Doc: ErrInvalidParams, Err: jsonobj.ErrMissingField, Msg: "no params"}
	}
	if p.PromptMode == modeNone {
		out := h.lit.noneModeOutput
		return &Result{Prompt: []byte(out), PromptChars: jsstr.Len(out), Mode: modeNone}, nil
	}
	r := &render{h: h, p: p, l: &h.lit, b: &builder{h: h}, res: &Result{Mode: modeFull}}
	r.minimal = p.PromptMode == modeMinimal
	if r.minimal {
		r.res.Mode = modeMinimal
	}
	r.resolveTools()
	r.readParams()
	// The sections, in prompt order.
	for _, section := range []func(){
		r.baseSections,      // 1-7
		r.skillsAndMemory,   // 8-11
		r.workspaceSections, // 12-16
		r.userAndTime,       // 17-19
		r.messagingSections, // 20-22
		r.contextSections,   // 23-26
		r.closingSections,   // 27-29
	} {
		section()
	}
	r.res.Prompt = r.b.output()
	r.res.PromptChars = jsstr.Len(string(r.res.Prompt))
	return r.res, nil
}

// render is the state of one Render: the inputs, the values read from the
// params, and the prompt being built.
type render struct {
	h       *Harness
	p       *Params
	l       *literals
	b       *builder
	res     *Result
	minimal bool

	t                  tools
	toolList, readTool string

	owners, caps                       []string
	skills, timezone, docs, tts, extra string
	heartbeat, channel                 string
	inlineButtons                      bool
}

// resolveTools resolves the tools, the tool list and the read tool's name.
func (r *render) resolveTools() {
	h, l := r.h, r.l
	r.t = h.resolveTools(r.p)
	for _, k := range r.t.order {
		r.res.ToolNames = append(r.res.ToolNames, r.t.display[k])
	}
	if len(r.t.lines) > 0 {
		r.toolList = strings.Join(r.t.lines, l.toolLinesJoiner)
	} else {
		r.toolList = interpolate(string(h.files.Templates[tplToolingFallback]), map[string]string{
			"exec_tool":    l.defaultExecTool,
			"process_tool": l.defaultProcessTool,
		})
	}
	r.readTool = l.defaultReadTool
	if r.t.available[keyRead] {
		r.readTool = r.t.display[keyRead]
	}
}

// readParams trims the params the sections use and builds the runtime
// line.
func (r *render) readParams() {
	p, l := r.p, r.l
	for _, o := range p.OwnerNumbers {
		if o = jsstr.Trim(o); o != "" {
			r.owners = append(r.owners, o)
		}
	}
	r.skills = jsstr.Trim(p.SkillsPrompt)
	r.timezone = jsstr.Trim(p.UserTimezone)
	r.docs = jsstr.Trim(p.DocsPath)
	r.tts = jsstr.Trim(p.TTSHint)
	r.extra = jsstr.Trim(p.ExtraSystemPrompt)
	r.heartbeat = l.heartbeatLineDefault
	if hb := jsstr.Trim(p.HeartbeatPrompt); hb != "" {
		r.heartbeat = l.heartbeatLinePrefix + hb
	}
	if ri := p.RuntimeInfo; ri != nil {
		r.channel = jsstr.ToLower(jsstr.Trim(ri.Channel))
		for _, c := range ri.Capabilities {
			if c = jsstr.Trim(c); c != "" {
				r.caps = append(r.caps, c)
			}
		}
	}
	for _, c := range r.caps {
		if jsstr.ToLower(c) == l.inlineButtonsCap {
			r.inlineButtons = true
		}
	}
	r.res.RuntimeLine = r.h.runtimeLine(p, r.channel, r.caps)
}

// baseSections are sections 1-7: identity, tooling, safety, verification
// and the CLI reference.
func (r *render) baseSections() {
	b, t := r.b, &r.t
	// 1-4
	b.tpl(tplIdentity, nil)
	b.tpl(tplTooling, map[string]string{"tool_list": r.toolList})
	b.tpl(tplToolCallStyle, nil)
	b.tpl(tplSafety, nil)
	// 5-6
	if !r.minimal && t.available[keyVerify] {
		b.tpl(tplVerificationPreamble, nil)
		if t.available[keyUpdateAndSign] {
			b.tpl(tplProtectedFiles, nil)
		}
	}
	// 7
	b.tpl(tplCLIReference, nil)
}

// skillsAndMemory are sections 8-11: skills, memory, self-update and
// model aliases, none of them in minimal mode.
func (r *render) skillsAndMemory() {
	b, t, p := r.b, &r.t, r.p
	if r.minimal {
		return
	}
	// 8
	if r.skills != "" {
		b.tpl(tplSkills, map[string]string{"read_tool": r.readTool, "skills_prompt": r.skills})
		r.res.SkillsPrompt = r.skills
	}
	// 9
	if t.available[keyMemorySearch] || t.available[keyMemoryGet] {
		b.tpl(tplMemory, nil)
		if p.MemoryCitationsMode == "off" {
			b.tpl(tplMemoryCitationsOff, nil)
		} else {
			b.tpl(tplMemoryCitationsOn, nil)
		}
	}
	// 10
	if t.available[keyGateway] {
		b.tpl(tplSelfUpdate, nil)
	}
	// 11
	if len(p.ModelAliasLines) > 0 {
		b.tpl(tplModelAliases, map[string]string{
			"model_alias_lines": strings.Join(p.ModelAliasLines, r.l.modelAliasLinesJoiner),
		})
	}
}

// workspaceSections are sections 12-16: the date hint, the workspace and
// its notes, the documentation and the sandbox.
func (r *render) workspaceSections() {
	b, p := r.b, r.p
	// 12
	if r.timezone != "" {
		b.direct(r.l.dateTimeHintLine)
	}
	// 13-14
	b.tpl(tplWorkspace, map[string]string{"workspace_dir": p.WorkspaceDir})
	for _, n := range p.WorkspaceNotes {
		if n = jsstr.Trim(n); n != "" {
			b.direct(n)
		}
	}
	// 15
	if !r.minimal && r.docs != "" {
		b.tpl(tplDocumentation, map[string]string{"docs_path": r.docs})
	}
	// 16
	if si := p.SandboxInfo; si != nil && si.Enabled {
		b.tpl(tplSandbox, nil)
		r.h.sandboxLines(b, si)
	}
}

// userAndTime are sections 17-19: the owners, the time zone and the
// workspace files.
func (r *render) userAndTime() {
	b, l := r.b, r.l
	// 17
	if !r.minimal && len(r.owners) > 0 {
		b.tpl(tplUserIdentity, map[string]string{
			"owner_line": l.ownerLinePrefix + strings.Join(r.owners, l.ownerNumbersJoiner) + l.ownerLineSuffix,
		})
	}
	// 18-19
	if r.timezone != "" {
		b.tpl(tplTime, map[string]string{"user_timezone": r.timezone})
	}
	b.tpl(tplWorkspaceFiles, nil)
}

// messagingSections are sections 20-22: reply tags, messaging and voice,
// none of them in minimal mode.
func (r *render) messagingSections() {
	b, l := r.b, r.l
	if r.minimal {
		return
	}
	b.tpl(tplReplyTags, nil)
	b.tpl(tplMessaging, nil)
	if r.t.available[keyMessage] {
		b.tpl(tplMessageTool, map[string]string{
			"channel_options":    l.messageChannelOptions,
			"silent_reply_token": l.silentReplyToken,
		})
		if r.inlineButtons {
			b.tpl(tplMessageToolButtonsOn, nil)
		} else if r.channel != "" {
			b.tpl(tplMessageToolButtonsOff, map[string]string{"runtime_channel": r.channel})
		}
		for _, hint := range r.p.MessageToolHints {
			b.direct(hint)
		}
	}
	if r.tts != "" {
		b.tpl(tplVoice, map[string]string{"tts_hint": r.tts})
	}
}

// contextSections are sections 23-26: the extra system prompt, reactions,
// the reasoning format and the project context files.
func (r *render) contextSections() {
	b, p, l := r.b, r.p, r.l
	// 23
	if r.extra != "" {
		if r.minimal {
			b.tpl(tplSubagentContext, nil)
		} else {
			b.tpl(tplGroupContext, nil)
		}
		b.direct(r.extra)
		r.res.ExtraSystemPrompt = r.extra
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
			if r.h.isSoul(f.Path) {
				b.tpl(tplSoulGuidance, nil)
				break
			}
		}
		for _, f := range p.ContextFiles {
			b.direct(l.contextHeaderPrefix + f.Path)
			b.direct(f.Content)
			r.res.ContextFiles = append(r.res.ContextFiles, renderedFile{
				Path: f.Path, Content: []byte(f.Content), Chars: jsstr.Len(f.Content),
			})
		}
	}
}

// closingSections are sections 27-29: silent replies and heartbeats (not
// in minimal mode), then the runtime line.
func (r *render) closingSections() {
	b, l := r.b, r.l
	// 27-28
	if !r.minimal {
		b.tpl(tplSilentReplies, map[string]string{"silent_reply_token": l.silentReplyToken})
		b.tpl(tplHeartbeats, map[string]string{"heartbeat_prompt_line": r.heartbeat})
	}
	// 29
	reasoning := l.defaultReasoningLevel
	if r.p.ReasoningLevel != nil {
		reasoning = *r.p.ReasoningLevel
	}
	b.tpl(tplRuntime, map[string]string{"runtime_line": r.res.RuntimeLine, "reasoning_level": reasoning})
}

// sandboxLines adds the 9 direct sandbox elements (RECIPE.md section 4.5).
func (h *Harness) sandboxLines(b *builder, si *sandboxParams) {
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
		b.direct(l.sandboxLevelPrefix + *el.DefaultLevel + l.sandboxLevelSuffix)
	}
}
