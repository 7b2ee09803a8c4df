package openclawsig

import (
	"fmt"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// literals are the strings the builder hardcodes, read from
// hardcoded-literals.json by id. Field comments give the id.
type literals struct {
	noneModeOutput         string // none_mode_output
	toolOrder              []string
	defaultReadTool        string // default_read_tool_name
	defaultExecTool        string // default_exec_tool_name
	defaultProcessTool     string // default_process_tool_name
	toolLinePrefix         string
	toolLineSummarySep     string // tool_line_summary_separator
	toolLinesJoiner        string
	inheritedSummaries     map[string]string // inherited_member_summaries
	silentReplyToken       string
	messageChannelOptions  string
	inlineButtonsCap       string // inline_buttons_capability
	ownerLinePrefix        string
	ownerNumbersJoiner     string
	ownerLineSuffix        string
	reasoningHintSentences []string
	reasoningHintJoiner    string
	dateTimeHintLine       string
	heartbeatLinePrefix    string
	heartbeatLineDefault   string
	defaultReasoningLevel  string
	sandboxWorkspacePrefix string
	sandboxAccessPrefix    string
	sandboxMountOpen       string
	sandboxMountClose      string
	sandboxBrowserEnabled  string
	sandboxNoVNCPrefix     string
	sandboxHostAllowed     string // sandbox_host_browser_allowed
	sandboxHostBlocked     string // sandbox_host_browser_blocked
	sandboxElevated1       string // sandbox_elevated_line_1
	sandboxElevated2       string
	sandboxElevated3       string
	sandboxLevelPrefix     string // sandbox_elevated_level_prefix
	sandboxLevelSuffix     string // sandbox_elevated_level_suffix
	contextHeaderPrefix    string // context_file_header_prefix
	soulBasename           string // soul_file_basename
	runtimeLinePrefix      string
	runtimePartsJoiner     string
	runtimePartKeys        map[string]string
	runtimeOSArchOpen      string
	runtimeOSArchClose     string
	runtimeCapsJoiner      string // runtime_capabilities_joiner
	runtimeCapsNone        string // runtime_capabilities_none
	defaultThinkLevel      string
	modelAliasLinesJoiner  string
	outputJoiner           string
}

// runtimePartKeyNames are the keys runtime_part_keys must have.
var runtimePartKeyNames = []string{
	"agentId", "host", "repoRoot", "os", "arch_only", "node", "model",
	"defaultModel", "channel", "capabilities", "thinking",
}

// literalsDoc is hardcoded-literals.json, declared for schema/confdoc.
type literalsDoc struct {
	About    ignoredText    `conf:"about"`
	Literals []literalEntry `conf:"literals,required,max=1048576"`
}

// literalEntry is one entry of hardcoded-literals.json's literals.
type literalEntry struct {
	ID    string       `conf:"id,required"`
	Value literalValue `conf:"value,required"`
	Where ignoredText  `conf:"where"`
}

// ignoredText is a string or null that the recipe does not use.
type ignoredText struct{}

// UnmarshalConf accepts a string or null.
func (ignoredText) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	if _, ok := v.Str(); !ok && v.Kind() != pohjson.Null {
		d.Fail(path, jsonobj.ErrWrongType, "not a string")
	}
}

// literalValue is a decoded literal: a string, a list or an object of
// strings.
type literalValue struct {
	str  *string
	list []string
	obj  map[string]string
}

// UnmarshalConf reads a string, an array of strings or an object of
// strings.
func (lv *literalValue) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	switch v.Kind() {
	case pohjson.String:
		s, _ := v.Str()
		lv.str = &s
	case pohjson.Array:
		d.Decode(v, path, &lv.list)
	case pohjson.Object:
		d.Decode(v, path, &lv.obj)
	default:
		d.Fail(path, jsonobj.ErrWrongType, "not a string, an array or an object")
	}
}

func (l *literals) targets() (map[string]*string, map[string]*[]string, map[string]*map[string]string) {
	strs := map[string]*string{
		"none_mode_output":              &l.noneModeOutput,
		"default_read_tool_name":        &l.defaultReadTool,
		"default_exec_tool_name":        &l.defaultExecTool,
		"default_process_tool_name":     &l.defaultProcessTool,
		"tool_line_prefix":              &l.toolLinePrefix,
		"tool_line_summary_separator":   &l.toolLineSummarySep,
		"tool_lines_joiner":             &l.toolLinesJoiner,
		"silent_reply_token":            &l.silentReplyToken,
		"message_channel_options":       &l.messageChannelOptions,
		"inline_buttons_capability":     &l.inlineButtonsCap,
		"owner_line_prefix":             &l.ownerLinePrefix,
		"owner_numbers_joiner":          &l.ownerNumbersJoiner,
		"owner_line_suffix":             &l.ownerLineSuffix,
		"reasoning_hint_joiner":         &l.reasoningHintJoiner,
		"date_time_hint_line":           &l.dateTimeHintLine,
		"heartbeat_line_prefix":         &l.heartbeatLinePrefix,
		"heartbeat_line_default":        &l.heartbeatLineDefault,
		"default_reasoning_level":       &l.defaultReasoningLevel,
		"sandbox_workspace_prefix":      &l.sandboxWorkspacePrefix,
		"sandbox_access_prefix":         &l.sandboxAccessPrefix,
		"sandbox_mount_open":            &l.sandboxMountOpen,
		"sandbox_mount_close":           &l.sandboxMountClose,
		"sandbox_browser_enabled":       &l.sandboxBrowserEnabled,
		"sandbox_novnc_prefix":          &l.sandboxNoVNCPrefix,
		"sandbox_host_browser_allowed":  &l.sandboxHostAllowed,
		"sandbox_host_browser_blocked":  &l.sandboxHostBlocked,
		"sandbox_elevated_line_1":       &l.sandboxElevated1,
		"sandbox_elevated_line_2":       &l.sandboxElevated2,
		"sandbox_elevated_line_3":       &l.sandboxElevated3,
		"sandbox_elevated_level_prefix": &l.sandboxLevelPrefix,
		"sandbox_elevated_level_suffix": &l.sandboxLevelSuffix,
		"context_file_header_prefix":    &l.contextHeaderPrefix,
		"soul_file_basename":            &l.soulBasename,
		"runtime_line_prefix":           &l.runtimeLinePrefix,
		"runtime_parts_joiner":          &l.runtimePartsJoiner,
		"runtime_os_arch_open":          &l.runtimeOSArchOpen,
		"runtime_os_arch_close":         &l.runtimeOSArchClose,
		"runtime_capabilities_joiner":   &l.runtimeCapsJoiner,
		"runtime_capabilities_none":     &l.runtimeCapsNone,
		"default_think_level":           &l.defaultThinkLevel,
		"model_alias_lines_joiner":      &l.modelAliasLinesJoiner,
		"output_joiner":                 &l.outputJoiner,
	}
	lists := map[string]*[]string{
		"tool_order":               &l.toolOrder,
		"reasoning_hint_sentences": &l.reasoningHintSentences,
	}
	objs := map[string]*map[string]string{
		"inherited_member_summaries": &l.inheritedSummaries,
		"runtime_part_keys":          &l.runtimePartKeys,
	}
	return strs, lists, objs
}

// parseLiterals decodes hardcoded-literals.json:
// {"about": string, "literals": [{"id", "value", "where"}...]}. Every id
// the recipe uses must be present exactly once with the right JSON type;
// an unknown id is refused (it would mean builder behaviour this recipe
// version does not know). Errors are *confdoc.ConfigError.
func parseLiterals(b []byte) (literals, error) {
	var l literals
	var doc literalsDoc
	if err := confdoc.Parse(b, jsonOptions(maxDataFileSize), &doc, confdoc.Options{}); err != nil {
		return l, err
	}
	if err := l.assign(doc.Literals); err != nil {
		return l, err
	}
	return l, l.complete()
}

// assign sets the literal of each entry, refusing an id given twice, an
// unknown id and a value of the wrong JSON type.
func (l *literals) assign(entries []literalEntry) error {
	strs, lists, objs := l.targets()
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		idKey := fmt.Sprintf("literals[%d].id", i)
		if seen[e.ID] {
			return &confdoc.ConfigError{Key: idKey, Err: pohjson.ErrDuplicateKey, Msg: "id given twice"}
		}
		seen[e.ID] = true
		if err := assignLiteral(e.ID, &e.Value, strs, lists, objs); err != nil {
			err.Key = fmt.Sprintf("literals[%d]", i) + err.Key
			return err
		}
	}
	for _, m := range []map[string]bool{keysOf(strs), keysOf(lists), keysOf(objs)} {
		for id := range m {
			if !seen[id] {
				return &confdoc.ConfigError{Key: "literals", Err: jsonobj.ErrMissingField, Msg: "no literal " + id}
			}
		}
	}
	return nil
}

// complete checks the literals the rules need beyond their presence.
func (l *literals) complete() error {
	for _, k := range runtimePartKeyNames {
		if _, ok := l.runtimePartKeys[k]; !ok {
			return &confdoc.ConfigError{Key: "literals", Err: jsonobj.ErrMissingField, Msg: "runtime_part_keys has no " + k}
		}
	}
	if len(l.toolOrder) == 0 {
		return &confdoc.ConfigError{Key: "literals", Err: jsonobj.ErrMissingField, Msg: "tool_order is empty"}
	}
	return nil
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// assignLiteral sets the target of id to v. Errors are keyed relative to
// the entry (".id", ".value").
func assignLiteral(id string, v *literalValue, strs map[string]*string, lists map[string]*[]string, objs map[string]*map[string]string) *confdoc.ConfigError {
	wrong := &confdoc.ConfigError{Key: ".value", Err: jsonobj.ErrWrongType, Msg: "wrong JSON type for its id"}
	if p, ok := strs[id]; ok {
		if v.str == nil {
			return wrong
		}
		*p = *v.str
		return nil
	}
	if p, ok := lists[id]; ok {
		if v.list == nil {
			return wrong
		}
		*p = v.list
		return nil
	}
	if p, ok := objs[id]; ok {
		if v.obj == nil {
			return wrong
		}
		*p = v.obj
		return nil
	}
	return &confdoc.ConfigError{Key: ".id", Err: jsonobj.ErrUnknownField, Msg: "unknown literal id"}
}

// runtimeKey returns a runtime part label; parseLiterals guarantees that
// every key of runtimePartKeyNames is present.
func (l *literals) runtimeKey(k string) string {
	return l.runtimePartKeys[k]
}
