package gateway

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"slices"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Errors of the answer parser (section 6): the gateway maps them to the
// trailer's reason code.
var (
	errAnswerMalformed = errors.New("malformed answer")
	errAnswerTooLarge  = errors.New("answer event too large")
	errAnswerCut       = errors.New("answer ended before its end")
)

// sseParser splits a text/event-stream into events (WHATWG server-sent
// events framing: lines end with LF, CR or CRLF; an empty line ends an
// event; data lines are joined by LF; comments and other fields are
// ignored). It holds at most one line and one event's data, maxEvent
// bytes together.
type sseParser struct {
	maxEvent int
	line     []byte
	data     []byte
	hasData  bool
	// skipLF: the last chunk ended with CR, so an LF first in the next
	// chunk belongs to that line end.
	skipLF  bool
	onEvent func(data []byte) error
}

// feed consumes a chunk of the stream.
func (p *sseParser) feed(b []byte) error {
	for len(b) > 0 {
		if p.skipLF {
			p.skipLF = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		i := indexEOL(b)
		if i < 0 {
			if len(p.line)+len(b)+len(p.data) > p.maxEvent {
				return errAnswerTooLarge
			}
			p.line = append(p.line, b...)
			return nil
		}
		if len(p.line)+i+len(p.data) > p.maxEvent {
			return errAnswerTooLarge
		}
		p.line = append(p.line, b[:i]...)
		if b[i] == '\r' {
			if i+1 < len(b) {
				if b[i+1] == '\n' {
					i++
				}
			} else {
				p.skipLF = true
			}
		}
		b = b[i+1:]
		if err := p.lineDone(); err != nil {
			return err
		}
	}
	return nil
}

func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

// lineDone processes the complete line in p.line.
func (p *sseParser) lineDone() error {
	line := p.line
	p.line = p.line[:0]
	if len(line) == 0 {
		if !p.hasData {
			return nil
		}
		data := p.data
		p.data, p.hasData = p.data[:0], false
		return p.onEvent(data)
	}
	if line[0] == ':' {
		return nil
	}
	field, value := line, []byte(nil)
	if i := slices.Index(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	if string(field) != "data" {
		return nil
	}
	if p.hasData {
		p.data = append(p.data, '\n')
	}
	p.data = append(p.data, value...)
	p.hasData = true
	return nil
}

// end is the end of the stream: a partial line or event is a cut.
func (p *sseParser) end() error {
	if len(p.line) > 0 || p.hasData {
		return errAnswerCut
	}
	return nil
}

// answer accumulates what the gateway learns of a 2xx answer (section 6):
// the assistant text's hash, the tool calls, the token counts, and whether
// the answer reached its end.
type answer struct {
	api      string
	maxArgs  int
	text     hash.Hash
	hasText  bool
	calls    []*pendingCall
	argBytes int // tool call names, arguments and inputs held, against maxArgs
	// eventBytes is the size of the event being read: what holding its
	// tool_use input costs.
	eventBytes int
	tokensIn   int64
	tokensOut  int64
	done       bool
	// keptInput says that the event or body being read keeps a parsed
	// value (a tool_use input): its values are not given back (parse).
	keptInput bool
}

type pendingCall struct {
	index int64
	id    string
	name  string
	args  []byte
	input *pohjson.Value // Anthropic: content_block_start's input
}

func newAnswer(api string, maxEvent int) *answer {
	return &answer{api: api, maxArgs: 4 * maxEvent, text: sha256.New()}
}

// event consumes one SSE event's data.
func (a *answer) event(data []byte) error {
	if a.done {
		return fmt.Errorf("%w: an event after the end", errAnswerMalformed)
	}
	if a.api == apiOpenAIChat && string(data) == "[DONE]" {
		a.done = true
		return nil
	}
	return a.parse(data, func(v *pohjson.Value) error {
		a.eventBytes = len(data)
		if a.api == apiOpenAIChat {
			return a.openAIChunk(v)
		}
		return a.anthropicEvent(v)
	}, "an event")
}

// parse parses data (an event's or the whole body's JSON object) and
// reads it with read. The parsed values are pohjson's pooled ones
// (ParseOptions.Release; 50 events a streamed answer): they are given
// back once read returns, unless it kept one (keptInput). The strings
// read are their own copies (no Borrow), so what the answer keeps of
// them stays valid.
func (a *answer) parse(data []byte, read func(*pohjson.Value) error, what string) error {
	var release func()
	v, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: len(data) + 1, MaxDepth: maxRequestDepth, AllowFloats: true, Release: &release})
	a.keptInput = false
	defer func() {
		if release != nil && !a.keptInput {
			release()
		}
	}()
	if err != nil {
		return fmt.Errorf("%w: %s is not a JSON object", errAnswerMalformed, what)
	}
	return read(v)
}

func (a *answer) addText(s string) {
	if s != "" {
		a.hasText = true
		a.text.Write([]byte(s))
	}
}

// maxAnswerCalls bounds the tool calls of one answer (section 6): each
// is looked up by index as its fragments arrive.
const maxAnswerCalls = 128

// hold counts n more bytes of tool call state against maxArgs.
func (a *answer) hold(n int) error {
	a.argBytes += n
	if a.argBytes > a.maxArgs {
		return errAnswerTooLarge
	}
	return nil
}

func (a *answer) addArgs(c *pendingCall, s string) error {
	if err := a.hold(len(s)); err != nil {
		return err
	}
	c.args = append(c.args, s...)
	return nil
}

func (a *answer) addName(c *pendingCall, s string) error {
	if err := a.hold(len(s)); err != nil {
		return err
	}
	c.name += s
	return nil
}

// callAt is the tool call at index, a new one the first time; an answer
// of more than maxAnswerCalls calls is too large.
func (a *answer) callAt(index int64) (*pendingCall, error) {
	for _, c := range a.calls {
		if c.index == index {
			return c, nil
		}
	}
	if len(a.calls) == maxAnswerCalls {
		return nil, fmt.Errorf("%w: more than %d tool calls", errAnswerTooLarge, maxAnswerCalls)
	}
	c := &pendingCall{index: index}
	a.calls = append(a.calls, c)
	return c, nil
}

// openAIChunk reads a chat.completion.chunk.
func (a *answer) openAIChunk(v *pohjson.Value) error {
	if v.Has("error") {
		return fmt.Errorf("%w: the upstream sent an error event", errAnswerMalformed)
	}
	for _, ch := range v.Get("choices").Elems() {
		d := ch.Get("delta")
		if s, ok := d.GetString("content"); ok {
			a.addText(s)
		}
		for _, tc := range d.Get("tool_calls").Elems() {
			idx, ok := tc.Get("index").Int()
			if !ok {
				return fmt.Errorf("%w: a tool call delta without an index", errAnswerMalformed)
			}
			c, err := a.callAt(idx)
			if err != nil {
				return err
			}
			if id, ok := tc.GetString("id"); ok && id != "" {
				c.id = id
			}
			fn := tc.Get("function")
			if n, ok := fn.GetString("name"); ok && n != "" {
				if err := a.addName(c, n); err != nil {
					return err
				}
			}
			if s, ok := fn.GetString("arguments"); ok {
				if err := a.addArgs(c, s); err != nil {
					return err
				}
			}
		}
	}
	a.usage(v.Get("usage"), "prompt_tokens", "completion_tokens")
	return nil
}

func (a *answer) usage(u *pohjson.Value, in, out string) {
	if n, ok := u.Get(in).Int(); ok && n >= 0 {
		a.tokensIn = n
	}
	if n, ok := u.Get(out).Int(); ok && n >= 0 {
		a.tokensOut = n
	}
}

// anthropicEvent reads one Messages stream event.
func (a *answer) anthropicEvent(v *pohjson.Value) error {
	typ, _ := v.GetString("type")
	idx, _ := v.Get("index").Int()
	switch typ {
	case "message_start":
		a.usage(v.Get("message").Get("usage"), "input_tokens", "output_tokens")
	case "content_block_start":
		b := v.Get("content_block")
		switch bt, _ := b.GetString("type"); bt {
		case "text":
			t, _ := b.GetString("text")
			a.addText(t)
		case "tool_use":
			c, err := a.callAt(idx)
			if err != nil {
				return err
			}
			if err := a.hold(a.eventBytes); err != nil {
				return err
			}
			c.id, _ = b.GetString("id")
			c.name, _ = b.GetString("name")
			c.input, a.keptInput = b.Get("input"), true
		}
	case "content_block_delta":
		d := v.Get("delta")
		switch dt, _ := d.GetString("type"); dt {
		case "text_delta":
			t, _ := d.GetString("text")
			a.addText(t)
		case "input_json_delta":
			s, _ := d.GetString("partial_json")
			c, err := a.callAt(idx)
			if err != nil {
				return err
			}
			return a.addArgs(c, s)
		}
	case "message_delta":
		if n, ok := v.Get("usage").Get("output_tokens").Int(); ok && n >= 0 {
			a.tokensOut = n
		}
	case "message_stop":
		a.done = true
	case "content_block_stop", "ping":
	case "error":
		return fmt.Errorf("%w: the upstream sent an error event", errAnswerMalformed)
	default:
		return fmt.Errorf("%w: an event of unknown type", errAnswerMalformed)
	}
	return nil
}

// whole reads a non-streamed JSON answer body.
func (a *answer) whole(body []byte) error {
	return a.parse(body, a.wholeValue, "the body")
}

func (a *answer) wholeValue(v *pohjson.Value) error {
	if a.api == apiOpenAIChat {
		m := v.Get("choices").Elems()
		if len(m) == 0 {
			return fmt.Errorf("%w: no choices", errAnswerMalformed)
		}
		msg := m[0].Get("message")
		if s, ok := msg.GetString("content"); ok {
			a.addText(s)
		}
		for i, tc := range msg.Get("tool_calls").Elems() {
			c, err := a.callAt(int64(i))
			if err != nil {
				return err
			}
			c.id, _ = tc.GetString("id")
			c.name, _ = tc.Get("function").GetString("name")
			s, _ := tc.Get("function").GetString("arguments")
			if err := a.addArgs(c, s); err != nil {
				return err
			}
		}
		a.usage(v.Get("usage"), "prompt_tokens", "completion_tokens")
	} else {
		for i, b := range v.Get("content").Elems() {
			switch bt, _ := b.GetString("type"); bt {
			case "text":
				t, _ := b.GetString("text")
				a.addText(t)
			case "tool_use":
				c, err := a.callAt(int64(i))
				if err != nil {
					return err
				}
				c.id, _ = b.GetString("id")
				c.name, _ = b.GetString("name")
				c.input, a.keptInput = b.Get("input"), true
			}
		}
		a.usage(v.Get("usage"), "input_tokens", "output_tokens")
	}
	a.done = true
	return nil
}

// facts finishes the answer: each tool call's arguments must be one JSON
// object; their hash is the gate's params hash.
func (a *answer) facts() (*answerFacts, error) {
	f := &answerFacts{hasText: a.hasText}
	copy(f.textHash[:], a.text.Sum(nil))
	slices.SortStableFunc(a.calls, func(x, y *pendingCall) int { return int(x.index - y.index) })
	for _, c := range a.calls {
		if c.id == "" || c.name == "" {
			return nil, fmt.Errorf("%w: a tool call without an id or a name", errAnswerMalformed)
		}
		var h [32]byte
		var err error
		if len(c.args) == 0 && c.input != nil {
			if c.input.Kind() != pohjson.Object {
				return nil, fmt.Errorf("%w: a tool call's input is not an object", errAnswerMalformed)
			}
			h, err = canonHash(c.input)
		} else {
			h, err = argumentsHash(string(c.args))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: a tool call's arguments are not one JSON object", errAnswerMalformed)
		}
		f.calls = append(f.calls, toolCall{id: c.id, name: c.name, params: h})
	}
	return f, nil
}
