package gateway

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/pohjson"
)

// The provider APIs the gateway speaks (docs/spec/model-gateway.md
// section 1).
const (
	apiOpenAIChat        = "openai-chat-completions"
	apiAnthropicMessages = "anthropic-messages"
)

// maxRequestDepth bounds a request body's nesting.
const maxRequestDepth = 64

// msgKind classifies a message of a request after the system text.
type msgKind uint8

const (
	kindUser msgKind = iota
	kindAssistant
	// kindResults carries tool results only (an OpenAI tool message, an
	// Anthropic user message of tool_result blocks).
	kindResults
	// kindInternal is OpenClaw's internal-context user message (3.5).
	kindInternal
)

// message is what the rules read of one message: its canonical hash and
// the parts the rules compare. No text outlives the request but the
// user's (hashed at once) and the tool results' (searched at once).
type message struct {
	kind  msgKind
	canon [32]byte
	// text is the concatenation of the text parts; textOnly says there
	// was no other part.
	text     string
	textOnly bool
	calls    []toolCall
	results  []toolResult
}

// toolCall is one tool call the model asked for: its id, its tool and the
// hash of its arguments' JCS form (the gate's params_hash).
type toolCall struct {
	id, name string
	params   [32]byte
}

// toolResult answers the tool call id with text: its content's string, or
// the concatenation of its text parts. textOnly: the content is a string
// or text parts only (no image or other part beside them).
type toolResult struct {
	id, text string
	textOnly bool
}

// request is a provider request as the rules read it.
type request struct {
	model  string
	stream bool
	// system is S, the system text (3.2); split says Anthropic sent it as
	// two blocks (block 0 then block 1, joined by a line feed in S), first
	// the length of block 0.
	system string
	split  bool
	first  int
	// tools maps a tool name to its schema's JCS hash; toolsHash is
	// H(JCS({name: schema})), descHash the hash of the descriptions.
	toolsHash [32]byte
	descHash  [32]byte
	msgs      []message
}

// malformed is the refusal of a request body the rules cannot read.
func malformed(format string, a ...any) *refusal {
	return refuse(reasonRequestMalformed, fmt.Sprintf(format, a...))
}

// parseRequest parses body strictly (one JSON object, floats allowed for
// sampling parameters) and reads it for api. Its strings are the body's
// own bytes (pohjson Borrow): the call owns body, which nothing writes
// while the call may read it (the request hashes and the upstream only
// read it). The caller reuses the buffer once Facts.BodyDone is called,
// so the texts, tool calls and results the rules read are dropped after
// the rules (check), and what the call keeps while the answer streams
// (the model) is cloned. With release set, the parsed values are in
// pohjson's pool (ParseOptions.Release), and *release gives them back:
// the request keeps none of them, only strings and hashes. A request's
// parsed values are most of what the gateway allocates per call, and they
// live exactly as long as the rules.
func parseRequest(api string, body []byte, release *func()) (*request, error) {
	root, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: len(body) + 1, MaxDepth: maxRequestDepth, AllowFloats: true, Borrow: true, Release: release})
	if err != nil {
		return nil, malformed("the body is not a strict JSON object")
	}
	if k, bad := unknownMember(root, bodyMembers[api]...); bad {
		return nil, malformed("the body has the member %s, which the gateway does not check", k)
	}
	q := &request{}
	var ok bool
	if q.model, ok = root.GetString("model"); !ok || q.model == "" {
		return nil, malformed("model must be a non-empty string")
	}
	q.model = strings.Clone(q.model)
	if s := root.Get("stream"); s != nil {
		if q.stream, ok = s.Bool(); !ok {
			return nil, malformed("stream must be a boolean")
		}
	}
	switch api {
	case apiOpenAIChat:
		err = q.readOpenAI(root)
	case apiAnthropicMessages:
		err = q.readAnthropic(root)
	default:
		return nil, refuse(reasonUpstreamUnknown, "unknown api")
	}
	if err != nil {
		return nil, err
	}
	return q, nil
}

// bodyMembers are the members a request body may have, by api (section 1):
// those the rules read, and sampling parameters that change no text the
// model reads and name no tool. Any other member could be one the provider
// honours and the rules never saw (OpenAI's legacy functions, Anthropic's
// mcp_servers): it is refused.
var bodyMembers = map[string][]string{
	apiOpenAIChat:        {"model", "messages", "stream", "stream_options", "tools", "max_tokens", "max_completion_tokens", "temperature", "top_p"},
	apiAnthropicMessages: {"model", "messages", "system", "stream", "tools", "max_tokens", "temperature", "top_p"},
}

// unknownMember returns the first member of the object v not in allowed,
// named for an error message (quoted when at most 64 bytes, else "with a
// long name"), and whether there is one.
func unknownMember(v *pohjson.Value, allowed ...string) (string, bool) {
	for _, m := range v.Members() {
		if !slices.Contains(allowed, m.Key) {
			if len(m.Key) > 64 {
				return "with a long name", true
			}
			return strconv.Quote(m.Key), true
		}
	}
	return "", false
}

func (q *request) readOpenAI(root *pohjson.Value) error {
	msgs := root.Get("messages")
	if msgs.Kind() != pohjson.Array || len(msgs.Elems()) == 0 {
		return malformed("messages must be a non-empty array")
	}
	q.msgs = make([]message, 0, len(msgs.Elems())-1)
	canon := messageHashes(msgs.Elems()[1:])
	for i, m := range msgs.Elems() {
		role, _ := m.GetString("role")
		if i == 0 {
			if role != "system" && role != "developer" {
				return refuse(reasonSystemMismatch, "messages[0] is not the system text")
			}
			s, ok := m.GetString("content")
			if !ok {
				return refuse(reasonSystemMismatch, "messages[0].content is not a string")
			}
			if k, bad := unknownMember(m, "role", "content"); bad {
				return malformed("messages[0] has the member %s, which the gateway does not check", k)
			}
			q.system = s
			continue
		}
		msg, err := openAIMessage(i, role, m, canon[i-1])
		if err != nil {
			return err
		}
		q.msgs = append(q.msgs, msg)
	}
	return q.readTools(root.Get("tools"), openAITool)
}

// minSplitHash is the message count from which messageHashes shares the
// hashing with a second goroutine.
const minSplitHash = 8

// canonSum is a message's canon hash, or none (ok false) when it has no
// canonical form.
type canonSum struct {
	sum [32]byte
	ok  bool
}

// messageHashes returns the canon hash of each message of vals (section
// 3.4). They are most of the rules' work: from minSplitHash messages on, a
// second goroutine takes messages from the same queue, so that a free core
// shares the work. The caller waits only for messages the helper has taken:
// a helper not yet scheduled (a busy machine) delays nothing, and when it
// runs it finds the queue empty. The readers refuse a message without a
// canonical form where they come to it, in order.
func messageHashes(vals []*pohjson.Value) []canonSum {
	out := make([]canonSum, len(vals))
	var next atomic.Int64
	var done sync.WaitGroup
	done.Add(len(vals))
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(vals)) {
				return
			}
			h, err := messageHash(vals[i])
			out[i] = canonSum{sum: h, ok: err == nil}
			done.Done()
		}
	}
	if len(vals) >= minSplitHash {
		go work()
	}
	work()
	done.Wait()
	return out
}

// openAIMessage reads messages[i] of an OpenAI request, whose canon hash
// is canon.
func openAIMessage(i int, role string, m *pohjson.Value, canon canonSum) (message, error) {
	var msg message
	if m.Kind() != pohjson.Object {
		return msg, malformed("messages[%d] is not an object", i)
	}
	if !canon.ok {
		return msg, malformed("messages[%d] has no canonical form", i)
	}
	msg.canon = canon.sum
	var err error
	c := m.Get("content")
	switch role {
	case "system", "developer":
		return msg, refuse(reasonSystemMismatch, fmt.Sprintf("messages[%d] is a second system message", i))
	case "user":
		msg.kind = kindUser
		if msg.text, msg.textOnly, err = textParts(c, "text"); err != nil {
			return msg, malformed("messages[%d].content: %v", i, err)
		}
		if internalContext(msg.text, msg.textOnly) {
			msg.kind = kindInternal
		}
	case "assistant":
		msg.kind = kindAssistant
		if c.Kind() != pohjson.Null && c != nil {
			if msg.text, err = assistantText(c, ""); err != nil {
				return msg, malformed("messages[%d].content: %v", i, err)
			}
		}
		if tcs := m.Get("tool_calls"); tcs != nil && tcs.Kind() != pohjson.Array {
			return msg, malformed("messages[%d].tool_calls is not an array", i)
		}
		for j, tc := range m.Get("tool_calls").Elems() {
			call, err := openAICall(tc)
			if err != nil {
				return msg, malformed("messages[%d].tool_calls[%d]: %v", i, j, err)
			}
			msg.calls = append(msg.calls, call)
		}
	case "tool":
		msg.kind = kindResults
		id, ok := m.GetString("tool_call_id")
		if !ok {
			return msg, malformed("messages[%d].tool_call_id must be a string", i)
		}
		text, only, err := textParts(c, "text")
		if err != nil {
			return msg, malformed("messages[%d].content: %v", i, err)
		}
		msg.results = []toolResult{{id: id, text: text, textOnly: only}}
	default:
		return msg, malformed("messages[%d].role is not a known role", i)
	}
	if k, bad := unknownMember(m, openAIMembers[role]...); bad {
		return msg, malformed("messages[%d] has the member %s, which the gateway does not check", i, k)
	}
	return msg, nil
}

// openAIMembers are the members a message may have, by role: a member the
// rules do not read (a participant name, a legacy function_call, a
// refusal) is text the model reads that no rule checked.
var openAIMembers = map[string][]string{
	"user":      {"role", "content"},
	"assistant": {"role", "content", "tool_calls"},
	"tool":      {"role", "tool_call_id", "content"},
}

// assistantText is the text of an assistant message's content: a string,
// or an array of text parts only (a part of another type, an OpenAI
// refusal or an Anthropic server tool's result, is not what the gateway
// compared with the model's answer), each part with only type, text and
// cache_control; parts of type skip (read by the caller) are passed over.
func assistantText(c *pohjson.Value, skip string) (string, error) {
	if s, ok := c.Str(); ok {
		return s, nil
	}
	if c.Kind() != pohjson.Array {
		return "", fmt.Errorf("not a string or an array of parts")
	}
	var b strings.Builder
	for j, p := range c.Elems() {
		typ, _ := p.GetString("type")
		if skip != "" && typ == skip {
			continue
		}
		t, ok := p.GetString("text")
		if _, bad := unknownMember(p, "type", "text", "cache_control"); typ != "text" || !ok || bad {
			return "", fmt.Errorf("part %d is not a text part", j)
		}
		b.WriteString(t)
	}
	return b.String(), nil
}

// openAICall reads an assistant message's tool call: arguments is a string
// holding one JSON object; it has only id, type ("function") and function
// (only name and arguments).
func openAICall(tc *pohjson.Value) (toolCall, error) {
	if typ := tc.Get("type"); typ != nil {
		if s, _ := typ.Str(); s != "function" {
			return toolCall{}, fmt.Errorf("type must be function")
		}
	}
	id, ok1 := tc.GetString("id")
	fn := tc.Get("function")
	_, bad1 := unknownMember(tc, "id", "type", "function")
	_, bad2 := unknownMember(fn, "name", "arguments")
	if bad1 || bad2 {
		return toolCall{}, fmt.Errorf("a member other than id, type, function.name and function.arguments")
	}
	name, ok2 := fn.GetString("name")
	args, ok3 := fn.GetString("arguments")
	if !ok1 || !ok2 || !ok3 {
		return toolCall{}, fmt.Errorf("id, function.name and function.arguments must be strings")
	}
	h, err := argumentsHash(args)
	if err != nil {
		return toolCall{}, err
	}
	return toolCall{id: id, name: name, params: h}, nil
}

// argumentsHash is the gate's params hash of a tool call's arguments text:
// H(JCS(arguments)), the arguments one JSON object ("" counts as {}).
func argumentsHash(args string) ([32]byte, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	v, err := jsonobj.ParseObject([]byte(args), pohjson.ParseOptions{MaxBytes: len(args) + 1, MaxDepth: maxRequestDepth, AllowFloats: true})
	if err != nil {
		return [32]byte{}, fmt.Errorf("the arguments are not one JSON object")
	}
	return canonHash(v)
}

// textParts reads a content member: a string, or an array of parts of
// which those of type textType contribute their text. textOnly says every
// part was text. A text part has only type, text and cache_control: the
// gateway reads its text, and a member beside it spelt another way (a
// "Text", which a case-insensitive decoder such as Go's encoding/json
// reads as the text) would be text the model reads and no rule checked.
func textParts(c *pohjson.Value, textType string) (text string, textOnly bool, err error) {
	if s, ok := c.Str(); ok {
		return s, true, nil
	}
	if c.Kind() != pohjson.Array {
		return "", false, fmt.Errorf("not a string or an array of parts")
	}
	var b strings.Builder
	textOnly = true
	for _, p := range c.Elems() {
		typ, _ := p.GetString("type")
		if typ != textType {
			textOnly = false
			continue
		}
		t, ok := p.GetString("text")
		if !ok {
			return "", false, fmt.Errorf("a text part without a text string")
		}
		if _, bad := unknownMember(p, "type", "text", "cache_control"); bad {
			return "", false, fmt.Errorf("a text part has a member other than type, text and cache_control")
		}
		b.WriteString(t)
	}
	return b.String(), textOnly, nil
}

// OpenClaw's internal-context message (3.5).
const (
	internalBegin = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n"
	internalEnd   = "\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
)

func internalContext(text string, textOnly bool) bool {
	return textOnly && len(text) >= len(internalBegin)+len(internalEnd) &&
		strings.HasPrefix(text, internalBegin) && strings.HasSuffix(text, internalEnd)
}

func (q *request) readAnthropic(root *pohjson.Value) error {
	if err := q.readAnthropicSystem(root.Get("system")); err != nil {
		return err
	}
	msgs := root.Get("messages")
	if msgs.Kind() != pohjson.Array || len(msgs.Elems()) == 0 {
		return malformed("messages must be a non-empty array")
	}
	q.msgs = make([]message, 0, len(msgs.Elems()))
	canon := messageHashes(msgs.Elems())
	for i, m := range msgs.Elems() {
		msg, err := anthropicMessage(i, m, canon[i])
		if err != nil {
			return err
		}
		q.msgs = append(q.msgs, msg)
	}
	return q.readTools(root.Get("tools"), anthropicTool)
}

// readAnthropicSystem reads system: a string, or one or two text blocks
// (OpenClaw splits at its cache boundary).
func (q *request) readAnthropicSystem(sys *pohjson.Value) error {
	if s, ok := sys.Str(); ok {
		q.system = s
		return nil
	}
	blocks := sys.Elems()
	if sys.Kind() != pohjson.Array || len(blocks) < 1 || len(blocks) > 2 {
		return refuse(reasonSystemMismatch, "system must be a string or one or two text blocks")
	}
	texts := make([]string, len(blocks))
	for i, b := range blocks {
		typ, _ := b.GetString("type")
		t, ok := b.GetString("text")
		if typ != "text" || !ok {
			return refuse(reasonSystemMismatch, fmt.Sprintf("system[%d] is not a text block", i))
		}
		for _, m := range b.Members() {
			if m.Key != "type" && m.Key != "text" && m.Key != "cache_control" {
				return refuse(reasonSystemMismatch, fmt.Sprintf("system[%d] has a member other than type, text and cache_control", i))
			}
		}
		texts[i] = t
	}
	q.system = texts[0]
	if len(texts) == 2 {
		q.split, q.first = true, len(texts[0])
		q.system = texts[0] + "\n" + texts[1]
	}
	return nil
}

// anthropicMessage reads messages[i] of an Anthropic request, whose
// canon hash is canon.
func anthropicMessage(i int, m *pohjson.Value, canon canonSum) (message, error) {
	var msg message
	role, _ := m.GetString("role")
	if !canon.ok {
		return msg, malformed("messages[%d] has no canonical form", i)
	}
	msg.canon = canon.sum
	if k, bad := unknownMember(m, "role", "content"); bad {
		return msg, malformed("messages[%d] has the member %s, which the gateway does not check", i, k)
	}
	var err error
	c := m.Get("content")
	if msg.text, msg.textOnly, err = textParts(c, "text"); err != nil {
		return msg, malformed("messages[%d].content: %v", i, err)
	}
	switch role {
	case "user":
		msg.kind = kindUser
		if internalContext(msg.text, msg.textOnly) {
			msg.kind = kindInternal
		}
		for j, b := range c.Elems() {
			if typ, _ := b.GetString("type"); typ != "tool_result" {
				continue
			}
			id, ok := b.GetString("tool_use_id")
			text, only, terr := textParts(b.Get("content"), "text")
			_, bad := unknownMember(b, "type", "tool_use_id", "content", "is_error", "cache_control")
			if !ok || bad || (b.Get("content") != nil && terr != nil) {
				return msg, malformed("messages[%d].content[%d] is not a tool result", i, j)
			}
			msg.results = append(msg.results, toolResult{id: id, text: text, textOnly: only && terr == nil})
		}
		if len(msg.results) > 0 {
			if msg.text != "" {
				return msg, refuse(reasonUserMessage, fmt.Sprintf("messages[%d] mixes tool results and text", i))
			}
			msg.kind = kindResults
		}
	case "assistant":
		msg.kind = kindAssistant
		if _, err := assistantText(c, "tool_use"); err != nil {
			return msg, malformed("messages[%d].content: %v", i, err)
		}
		for j, b := range c.Elems() {
			if typ, _ := b.GetString("type"); typ != "tool_use" {
				continue
			}
			call, err := anthropicCall(b)
			if err != nil {
				return msg, malformed("messages[%d].content[%d]: %v", i, j, err)
			}
			msg.calls = append(msg.calls, call)
		}
	default:
		return msg, malformed("messages[%d].role is not user or assistant", i)
	}
	return msg, nil
}

func anthropicCall(b *pohjson.Value) (toolCall, error) {
	id, ok1 := b.GetString("id")
	name, ok2 := b.GetString("name")
	in := b.Get("input")
	if !ok1 || !ok2 || in.Kind() != pohjson.Object {
		return toolCall{}, fmt.Errorf("a tool_use block needs id, name and an input object")
	}
	if _, bad := unknownMember(b, "type", "id", "name", "input", "cache_control"); bad {
		return toolCall{}, fmt.Errorf("a tool_use block has a member other than type, id, name, input and cache_control")
	}
	h, err := canonHash(in)
	if err != nil {
		return toolCall{}, err
	}
	return toolCall{id: id, name: name, params: h}, nil
}

// toolReader reads one element of tools: its name, schema and description.
type toolReader func(t *pohjson.Value) (name string, schema *pohjson.Value, desc string, err error)

func openAITool(t *pohjson.Value) (string, *pohjson.Value, string, error) {
	if typ, _ := t.GetString("type"); typ != "function" || len(t.Members()) != 2 {
		return "", nil, "", fmt.Errorf("not {type: function, function}")
	}
	fn := t.Get("function")
	for _, m := range fn.Members() {
		switch m.Key {
		case "name", "parameters", "description", "strict":
		default:
			return "", nil, "", fmt.Errorf("function has the member %s", strconv.Quote(m.Key))
		}
	}
	return toolParts(fn, "parameters")
}

func anthropicTool(t *pohjson.Value) (string, *pohjson.Value, string, error) {
	for _, m := range t.Members() {
		switch m.Key {
		case "name", "input_schema", "description", "cache_control":
		default:
			return "", nil, "", fmt.Errorf("the tool has the member %s", strconv.Quote(m.Key))
		}
	}
	return toolParts(t, "input_schema")
}

func toolParts(t *pohjson.Value, schemaKey string) (string, *pohjson.Value, string, error) {
	name, ok := t.GetString("name")
	schema := t.Get(schemaKey)
	if !ok || name == "" || schema.Kind() != pohjson.Object {
		return "", nil, "", fmt.Errorf("a tool needs a name and a %s object", schemaKey)
	}
	desc, _ := t.GetString("description")
	if d := t.Get("description"); d != nil && d.Kind() != pohjson.String {
		return "", nil, "", fmt.Errorf("description must be a string")
	}
	return name, schema, desc, nil
}

// readTools computes the tool set's hash H(JCS({name: schema})), the form
// of the report's tool_schemas_hash_b64u, and the descriptions' hash
// H(JCS({name: [name, description]})). A tool named twice is refused. Both
// canonical forms are written from the parsed tools, sorted by name.
func (q *request) readTools(tools *pohjson.Value, read toolReader) error {
	if tools != nil && tools.Kind() != pohjson.Array {
		return refuse(reasonToolsMismatch, "tools must be an array")
	}
	type tool struct {
		name, desc string
		schema     *pohjson.Value
	}
	all := make([]tool, 0, len(tools.Elems()))
	seen := make(map[string]bool, len(tools.Elems()))
	for i, t := range tools.Elems() {
		name, schema, desc, err := read(t)
		if err != nil {
			return refuse(reasonToolsMismatch, fmt.Sprintf("tools[%d]: %v", i, err))
		}
		if seen[name] {
			return refuse(reasonToolsMismatch, fmt.Sprintf("tools[%d]: the tool %s is named twice", i, strconv.Quote(name)))
		}
		seen[name] = true
		all = append(all, tool{name: name, desc: desc, schema: schema})
	}
	slices.SortFunc(all, func(a, b tool) int { return jsstr.Compare(a.name, b.name) })
	var err error
	q.toolsHash, err = canonHashOf(func(dst []byte) ([]byte, bool) {
		floats := false
		dst = append(dst, '{')
		for i, t := range all {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsstr.AppendQuote(dst, t.name), ':')
			var f bool
			dst, f = appendCanon(dst, t.schema)
			floats = floats || f
		}
		return append(dst, '}'), floats
	})
	if err != nil {
		return refuse(reasonToolsMismatch, "a tool schema has no canonical form")
	}
	q.descHash, _ = canonHashOf(func(dst []byte) ([]byte, bool) {
		dst = append(dst, '{')
		for i, t := range all {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsstr.AppendQuote(dst, t.name), ":["...)
			dst = append(jsstr.AppendQuote(dst, t.name), ',')
			dst = append(jsstr.AppendQuote(dst, t.desc), ']')
		}
		return append(dst, '}'), false
	})
	return nil
}

// sha is SHA-256 of a string.
func sha(s string) [32]byte { return sha256.Sum256([]byte(s)) }
