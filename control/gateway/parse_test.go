package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/gowebpki/jcs"
)

// sseEvents feeds stream in the given chunks and returns the events and
// the first error (the end's included).
func sseEvents(max int, chunks ...[]byte) ([]string, error) {
	var got []string
	p := &sseParser{maxEvent: max, onEvent: func(d []byte) error { got = append(got, string(d)); return nil }}
	for _, c := range chunks {
		if err := p.feed(c); err != nil {
			return got, err
		}
	}
	return got, p.end()
}

func TestSSEFraming(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, nil},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, nil},
		{"no space", "data:a\n\n", []string{"a"}, nil},
		{"comments and fields", ": ping\nevent: x\nid: 1\nretry: 5\ndata: a\n\n", []string{"a"}, nil},
		{"empty events skipped", "\n\n\nevent: x\n\n", nil, nil},
		{"cut mid-event", "data: a\n\ndata: b\n", []string{"a"}, errAnswerCut},
		{"cut mid-line", "data: a\n\ndata: b", []string{"a"}, errAnswerCut},
		{"huge event", "data: " + strings.Repeat("x", 100) + "\n\n", nil, errAnswerTooLarge},
		{"huge line", strings.Repeat("x", 100), nil, errAnswerTooLarge},
		{"huge across lines", strings.Repeat("data: xxxxxxxxxx\n", 10) + "\n", nil, errAnswerTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, split := range []bool{false, true} {
				var chunks [][]byte
				if split {
					for i := range len(tc.in) {
						chunks = append(chunks, []byte{tc.in[i]})
					}
				} else {
					chunks = [][]byte{[]byte(tc.in)}
				}
				got, err := sseEvents(64, chunks...)
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || !slices.Equal(got, tc.want) {
					t.Fatalf("split %v: got %q, %v; want %q, %v", split, got, err, tc.want, tc.err)
				}
			}
		})
	}
}

// TestAnswerBounds: an upstream cannot make the parser hold more than its
// bounds by spreading an answer over many tool calls or name fragments
// (section 6): each is refused as too large, streamed or whole.
func TestAnswerBounds(t *testing.T) {
	// budget is the answer's event size, whose four times bounds what the
	// tool calls hold: large for the call count cases, so that the count
	// is what refuses them.
	stream := func(api string, budget int, events ...string) error {
		a := newAnswer(api, budget)
		p := &sseParser{maxEvent: 1024, onEvent: a.event}
		return p.feed([]byte(strings.Join(events, "")))
	}
	var openAICalls, anthropicCalls, names []string
	for i := range maxAnswerCalls + 1 {
		n := strconv.Itoa(i)
		openAICalls = append(openAICalls, `data: {"choices":[{"delta":{"tool_calls":[{"index":`+n+`}]}}]}`+"\n\n")
		anthropicCalls = append(anthropicCalls, `data: {"type":"content_block_start","index":`+n+`,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}`+"\n\n")
	}
	for range 5 * 1024 / 100 {
		names = append(names, `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"`+strings.Repeat("n", 100)+`"}}]}}]}`+"\n\n")
	}
	var whole strings.Builder
	whole.WriteString(`{"choices":[{"message":{"tool_calls":[`)
	for i := range maxAnswerCalls + 1 {
		if i > 0 {
			whole.WriteString(",")
		}
		whole.WriteString(`{"id":"a","function":{"name":"n","arguments":"{}"}}`)
	}
	whole.WriteString(`]}}]}`)
	for name, err := range map[string]error{
		"openai calls":      stream(apiOpenAIChat, 1<<20, openAICalls...),
		"anthropic calls":   stream(apiAnthropicMessages, 1<<20, anthropicCalls...),
		"openai name parts": stream(apiOpenAIChat, 1024, names...),
		"whole answer":      newAnswer(apiOpenAIChat, 1<<20).whole([]byte(whole.String())),
	} {
		if !errors.Is(err, errAnswerTooLarge) {
			t.Errorf("%s: err = %v, want %v", name, err, errAnswerTooLarge)
		}
	}
	// At the bound, the same answers are read.
	if err := stream(apiOpenAIChat, 1<<20, openAICalls[:maxAnswerCalls]...); err != nil {
		t.Errorf("%d calls: %v", maxAnswerCalls, err)
	}
	if err := stream(apiAnthropicMessages, 1<<20, anthropicCalls[:maxAnswerCalls]...); err != nil {
		t.Errorf("%d anthropic calls: %v", maxAnswerCalls, err)
	}
	// A tool_use input is held at its event's size.
	if err := stream(apiAnthropicMessages, 1024, anthropicCalls[:50]...); !errors.Is(err, errAnswerTooLarge) {
		t.Errorf("50 inputs against a 4 KiB budget: err = %v", err)
	}
}

// FuzzSSE: the events and the outcome do not depend on how the stream is
// cut into chunks, and no event is over the bound.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\ndata: b\n\n"), uint16(3))
	f.Add([]byte("data: {\"x\":1}\rdata: y\r\r: c\n\n"), uint16(1))
	f.Add([]byte("data: "+strings.Repeat("z", 80)+"\n\n"), uint16(40))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		whole, werr := sseEvents(64, in)
		k := int(cut) % (len(in) + 1)
		parts, perr := sseEvents(64, in[:k], in[k:])
		if (werr == nil) != (perr == nil) || (werr != nil && failReason(werr) != failReason(perr)) {
			t.Fatalf("whole %v, in two %v", werr, perr)
		}
		if werr == nil && !slices.Equal(whole, parts) {
			t.Fatalf("whole %q, in two %q", whole, parts)
		}
		for _, e := range whole {
			if len(e) > 64 {
				t.Fatalf("an event of %d bytes passed a bound of 64", len(e))
			}
		}
	})
}

// FuzzAnswer: any stream either fails with a parser error or yields facts;
// nothing panics.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte(openAIText+openAIDone), true)
	f.Add([]byte(openAIToolCall("c", "read", `{"path":"x"}`)+openAIDone), true)
	f.Add([]byte(`data: {"type":"message_start","message":{}}`+"\n\n"+`data: {"type":"message_stop"}`+"\n\n"), false)
	f.Add([]byte(`{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"a","function":{"name":"n","arguments":"{}"}}]}}]}`), true)
	f.Fuzz(func(t *testing.T, in []byte, openai bool) {
		api := apiAnthropicMessages
		if openai {
			api = apiOpenAIChat
		}
		a := newAnswer(api, 1024)
		p := &sseParser{maxEvent: 1024, onEvent: a.event}
		if err := p.feed(in); err == nil && p.end() == nil && a.done {
			_, _ = a.facts()
		}
		_ = newAnswer(api, 1024).whole(in)
	})
}

// FuzzRequest: parseRequest never panics, and what it accepts it reads the
// same way twice: once on the heap, once in pohjson's pool after an
// earlier parse of it gave its memory back (as a call does).
func FuzzRequest(f *testing.F) {
	f.Add(openAIBody(f, tPrompt+tSuffix, true, user(envelope(tMessage))), true)
	f.Add([]byte(`{"model":"m","system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"y"}]}]}`), false)
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"n","arguments":"{\"a\":1.5e3}"}}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, openai bool) {
		api := apiAnthropicMessages
		if openai {
			api = apiOpenAIChat
		}
		var release func()
		_, _ = parseRequest(api, body, &release)
		release()
		q1, err1 := parseRequest(api, body, nil)
		q2, err2 := parseRequest(api, body, &release)
		release()
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(q1, q2) {
			t.Fatalf("parseRequest is not deterministic: %v; %v", err1, err2)
		}
		if err1 != nil {
			if _, ok := errors.AsType[*refusal](err1); !ok {
				t.Fatalf("a refusal without a reason code: %v", err1)
			}
			return
		}
		if q1.system != q2.system || q1.toolsHash != q2.toolsHash || len(q1.msgs) != len(q2.msgs) {
			t.Fatal("parseRequest reads the same body two ways")
		}
		for i := range q1.msgs {
			if q1.msgs[i].canon != q2.msgs[i].canon {
				t.Fatal("a message's canonical hash is not stable")
			}
		}
		checkAgainstJCS(t, api, body, q1)
	})
}

// checkAgainstJCS checks the hashes parseRequest computed for body
// against the spec's definitions written with the JCS library over the
// value encoding/json reads: each message's canon (cache_control left out,
// a string content as its one text part), the tool set and the
// descriptions.
func checkAgainstJCS(t *testing.T, api string, body []byte, q *request) {
	t.Helper()
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		t.Fatalf("encoding/json refuses what parseRequest accepted: %v", err)
	}
	jcsHash := func(v any) [32]byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if b, err = jcs.Transform(b); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	msgs, _ := root["messages"].([]any)
	if api == apiOpenAIChat {
		msgs = msgs[1:]
	}
	if len(msgs) != len(q.msgs) {
		t.Fatalf("%d messages read, %d in the body", len(q.msgs), len(msgs))
	}
	for i, m := range msgs {
		m := m.(map[string]any)
		if s, ok := m["content"].(string); ok {
			m["content"] = []any{map[string]any{"type": "text", "text": s}}
		} else if c, ok := m["content"]; ok {
			m["content"] = dropCacheControl(c, true)
		}
		if jcsHash(m) != q.msgs[i].canon {
			t.Fatalf("message %d: the canon hash is not H(JCS(message))", i)
		}
	}
	schemas, descs := map[string]any{}, map[string]any{}
	tools, _ := root["tools"].([]any)
	for _, tl := range tools {
		tl := tl.(map[string]any)
		name, key := tl["name"], "input_schema"
		if api == apiOpenAIChat {
			tl, key = tl["function"].(map[string]any), "parameters"
			name = tl["name"]
		}
		desc, _ := tl["description"].(string)
		schemas[name.(string)], descs[name.(string)] = tl[key], []any{name, desc}
	}
	if jcsHash(schemas) != q.toolsHash || jcsHash(descs) != q.descHash {
		t.Fatal("the tool set's or the descriptions' hash is not H(JCS(...))")
	}
}

// dropCacheControl is a content member without the cache_control member
// of its blocks, and with nested, of their content's blocks.
func dropCacheControl(content any, nested bool) any {
	blocks, ok := content.([]any)
	if !ok {
		return content
	}
	out := make([]any, len(blocks))
	for i, e := range blocks {
		b, ok := e.(map[string]any)
		if !ok {
			out[i] = e
			continue
		}
		c := map[string]any{}
		for k, v := range b {
			switch {
			case k == "cache_control":
			case k == "content" && nested:
				c[k] = dropCacheControl(v, false)
			default:
				c[k] = v
			}
		}
		out[i] = c
	}
	return out
}

// FuzzLLMCall: the header parser never panics, and an accepted event
// always names a hash.
func FuzzLLMCall(f *testing.F) {
	f.Add(llmCallHeader(f, 1, tPrompt+tSuffix, tSuffix))
	f.Add(b64u.Encode([]byte(`{"event_id":"e","timestamp":"t","prev_hash_b64u":null,"payload":{}}`)))
	f.Add("not b64u!")
	f.Fuzz(func(t *testing.T, h string) {
		c, err := parseLLMCall(h, tRunID, want())
		if err == nil && !b64u.ValidHash(c.eventHash) {
			t.Fatal("an accepted event without a hash")
		}
	})
}

// TestLLMCallHashForms: the event hash is over the payload's
// JSON.stringify form whatever text carried it: a payload sent with
// whitespace and escapes hashes as the compact one (whose text the parse
// keeps and hashes as it is), and a changed payload does not.
func TestLLMCallHashForms(t *testing.T) {
	raw, err := b64u.Decode(llmCallHeader(t, 1, tPrompt+tSuffix, tSuffix))
	if err != nil {
		t.Fatal(err)
	}
	compact := string(raw)
	spaced := strings.NewReplacer(`":`, `" : `, `,"`, `, "`, `"call-1"`, `"call\u002d1"`).Replace(compact)
	changed := strings.Replace(compact, `"call-1"`, `"call-2"`, 1)
	if spaced == compact || changed == compact {
		t.Fatal("the variants did not change the text")
	}
	hash := func(text string) string {
		c, err := parseLLMCall(b64u.Encode([]byte(text)), tRunID, want())
		if err != nil {
			t.Fatal(err)
		}
		return c.eventHash
	}
	if hash(spaced) != hash(compact) {
		t.Error("whitespace and escapes changed the event hash")
	}
	if hash(changed) == hash(compact) {
		t.Error("a changed payload kept the event hash")
	}
	// The same hash as the payload hashed from its values, not its text.
	v, err := pohjson.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := pohjson.Hash(pohjson.NewObject(v.Get("payload").Members()...))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := v.GetString("event_id")
	ts, _ := v.GetString("timestamp")
	prev, _ := v.GetString("prev_hash_b64u")
	want, err := (&poh.EventHeader{EventID: id, RunID: tRunID, EventType: poh.EventTypeLLMCall, Timestamp: ts, PayloadHashB64u: ph, PrevHashB64u: &prev}).Hash()
	if err != nil || hash(compact) != want {
		t.Fatalf("event hash %s, want %s (%v)", hash(compact), want, err)
	}
}

// FuzzUserMessage: the envelope forms of m match m's hash; a text that
// is not one of them, or one whose runtime line is over its bound, does
// not.
func FuzzUserMessage(f *testing.F) {
	f.Add("hello", "Thu 2026-11-26 21:21 UTC")
	f.Add("a] b\n\nRuntime: x", "telegram")
	f.Fuzz(func(t *testing.T, m, e string) {
		h := sha(m)
		if !userMessage(m, h, 8) {
			t.Fatal("the bare message does not match")
		}
		if e != "" && !strings.ContainsAny(e, "] \n") && len([]rune(e)) <= 128 {
			if !userMessage("["+e+"] "+m, h, 8) || !userMessage("["+e+"] "+m+"\n\nRuntime: r", h, 8) {
				t.Fatalf("an enveloped form of %q does not match", m)
			}
			if userMessage("["+e+"] "+m+"\n\nRuntime: rrrrrrrrr", h, 8) {
				t.Fatalf("a runtime line over its bound matches")
			}
		}
		if !strings.HasPrefix(m, "[") && userMessage(m+"x", h, 8) {
			t.Fatal("another message matches")
		}
	})
}

// TestMessageHashesShared: with the hashing shared by two goroutines, each
// message gets its own canon hash, in its place.
func TestMessageHashesShared(t *testing.T) {
	for _, n := range []int{1, minSplitHash - 1, minSplitHash, 41, 200} {
		var elems []string
		for i := range n {
			m := `{"role":"user","content":"message ` + strconv.Itoa(i) + `"}`
			if i%7 == 3 {
				m = `{"role":"assistant","content":[{"type":"text","text":"x","n":1.50}],"cache_control":{"type":"ephemeral"}}`
			}
			elems = append(elems, m)
		}
		v, err := pohjson.ParseWith([]byte("["+strings.Join(elems, ",")+"]"), pohjson.ParseOptions{AllowFloats: true})
		if err != nil {
			t.Fatal(err)
		}
		got := messageHashes(v.Elems())
		for i, e := range v.Elems() {
			h, err := messageHash(e)
			if err != nil || !got[i].ok || got[i].sum != h {
				t.Fatalf("%d messages: message %d: got %x %v, want %x %v", n, i, got[i].sum, got[i].ok, h, err)
			}
		}
	}
}

// TestAnswerKeepsToolUseInput: an answer's events are parsed into
// pohjson's pool and given back after each event, except one whose
// tool_use input the answer keeps; the input's hash is taken at the end,
// after later events reused the pool.
func TestAnswerKeepsToolUseInput(t *testing.T) {
	input := `{"path":"a/b","n":[1,2,{"z":true}]}`
	v, err := pohjson.Parse([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	want, err := canonHash(v)
	if err != nil {
		t.Fatal(err)
	}
	start := `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"read","input":` + input + `}}`
	later := `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"` + strings.Repeat("x", 300) + `"}}`
	stop := `{"type":"content_block_stop","index":0}`
	check := func(name string, a *answer) {
		t.Helper()
		f, err := a.facts()
		if err != nil || len(f.calls) != 1 || f.calls[0].params != want || f.calls[0].id != "t1" || f.calls[0].name != "read" {
			t.Fatalf("%s: facts %+v, %v; want the input's hash", name, f, err)
		}
	}
	a := newAnswer(apiAnthropicMessages, 4096)
	var events strings.Builder
	for _, e := range []string{`{"type":"message_start","message":{}}`, start, later, later, stop, `{"type":"message_stop"}`} {
		events.WriteString("data: " + e + "\n\n")
	}
	p := &sseParser{maxEvent: 4096, onEvent: a.event}
	if err := p.feed([]byte(events.String())); err != nil || p.end() != nil || !a.done {
		t.Fatalf("stream: %v", err)
	}
	check("streamed", a)
	a = newAnswer(apiAnthropicMessages, 4096)
	if err := a.whole([]byte(`{"content":[{"type":"tool_use","id":"t1","name":"read","input":` + input + `}]}`)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := newAnswer(apiAnthropicMessages, 4096).event([]byte(later)); err != nil {
			t.Fatal(err)
		}
	}
	check("whole", a)
}
