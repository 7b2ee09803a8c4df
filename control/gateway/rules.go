package gateway

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/jsstr"
)

// Decision is one gate decision of the run's current turn
// (POST /v1/runs/{id}/tool-calls): the tool, the params hash the gate
// computed, and for a denial the block reason the plugin gives the model.
type Decision struct {
	Tool        string
	ParamsHash  [32]byte
	Allow       bool
	BlockReason string
}

// modelIdentityPrefix starts OpenClaw's model identity line
// (buildModelIdentityPromptLine).
const modelIdentityPrefix = "Current model identity: "

// suffixOf checks the system text against the attested prompt p (3.2) and
// returns the suffix X. The comparison is in constant time over the
// prompt's length.
func suffixOf(q *request, p []byte, maxSuffix int) (string, error) {
	want := p
	if q.split {
		want = bytes.TrimRightFunc(p, jsstr.IsSpace)
		if q.first != len(want) {
			return "", refuse(reasonSystemMismatch, "the first system block is not the attested prompt")
		}
	}
	if len(q.system) < len(want) || subtle.ConstantTimeCompare([]byte(q.system[:len(want)]), want) != 1 {
		return "", refuse(reasonSystemMismatch, "the system text does not start with the attested prompt")
	}
	x := q.system[len(want):]
	if x == "" {
		return x, nil
	}
	switch {
	case len(x) > maxSuffix:
		return "", refuse(reasonSystemMismatch, fmt.Sprintf("the text after the attested prompt exceeds %d bytes", maxSuffix))
	case x[0] != '\n':
		return "", refuse(reasonSystemMismatch, "the text after the attested prompt does not start with a line feed")
	case strings.Contains(x, "<!--"):
		return "", refuse(reasonSystemMismatch, "the text after the attested prompt carries a marker")
	}
	n := 0
	for line := range strings.SplitSeq(x, "\n") {
		if strings.HasPrefix(line, modelIdentityPrefix) {
			n++
		}
	}
	if n != 1 {
		return "", refuse(reasonSystemMismatch, "the text after the attested prompt does not hold exactly one model identity line")
	}
	return x, nil
}

// userMessage checks the turn's user message text u against the hash the
// turn was registered with (3.5): u is m, or m in OpenClaw's envelope,
// whose runtime line is at most maxRuntime bytes (it is text beside the
// user's that no rule checks: bounded as the suffix is).
func userMessage(u string, want [32]byte, maxRuntime int) bool {
	if sha(u) == want {
		return true
	}
	if !strings.HasPrefix(u, "[") {
		return false
	}
	end := strings.Index(u, "] ")
	if end < 2 || strings.ContainsAny(u[1:end], "]\n") || utf8.RuneCountInString(u[1:end]) > 128 {
		return false
	}
	m := u[end+2:]
	if sha(m) == want {
		return true
	}
	i := strings.LastIndex(m, "\n\nRuntime: ")
	if i < 0 || len(m)-i-len("\n\nRuntime: ") > maxRuntime || strings.Contains(m[i+len("\n\nRuntime: "):], "\n") {
		return false
	}
	return sha(m[:i]) == want
}

// answerFacts is what the gateway learned of a completed answer: the hash
// of its assistant text and the tool calls the model asked for.
type answerFacts struct {
	textHash [32]byte
	hasText  bool
	calls    []toolCall
}

func (a *answerFacts) empty() bool { return a == nil || (!a.hasText && len(a.calls) == 0) }

// turnState is what a run's gateway remembers of its current turn: the
// decisions used by tool results, and whether a completed call carried the
// turn's user message.
type turnState struct {
	id       string
	used     map[int]bool
	userDone bool
}

// checkMessages applies the history (3.4), user message (3.5) and tool
// result (3.6) rules. It returns whether the request carries the turn's
// user message and the decisions its results use.
func checkMessages(q *request, hist *history, ts *turnState, turnContent [32]byte, decisions []Decision, maxRuntime int) (carriesUser bool, used []int, err error) {
	msgs := make([]message, 0, len(q.msgs))
	for _, m := range q.msgs {
		if m.kind != kindInternal {
			msgs = append(msgs, m)
		}
	}
	var prev [][32]byte
	var ans *answerFacts
	if hist != nil {
		prev, ans = hist.msgs, hist.answer
	}
	if len(msgs) < len(prev) {
		return false, nil, refuse(reasonHistoryChanged, "the request carries less history than was forwarded")
	}
	for i, h := range prev {
		if msgs[i].canon != h {
			return false, nil, refuse(reasonHistoryChanged, fmt.Sprintf("message %d differs from the one forwarded earlier", i+1))
		}
	}
	rest := msgs[len(prev):]
	if !ans.empty() {
		if len(rest) == 0 || rest[0].kind != kindAssistant || !sameAnswer(&rest[0], ans) {
			return false, nil, refuse(reasonHistoryChanged, "the assistant message is not the model's last answer")
		}
		rest = rest[1:]
	}
	var calls []toolCall
	if ans != nil {
		calls = ans.calls
	}
	answered := map[int]bool{}
	for len(rest) > 0 && rest[0].kind == kindResults {
		for _, r := range rest[0].results {
			d, err := checkResult(r, calls, answered, ts, decisions, used)
			if err != nil {
				return false, nil, err
			}
			used = append(used, d)
		}
		rest = rest[1:]
	}
	for i, m := range rest {
		if m.kind != kindUser {
			return false, nil, refuse(reasonHistoryChanged, fmt.Sprintf("new message %d is not a user message", i+1))
		}
	}
	switch {
	case ts.userDone && len(rest) == 0:
		return false, used, nil
	case ts.userDone:
		return false, nil, refuse(reasonUserMessage, "the turn's user message was already forwarded")
	case len(rest) != 1:
		return false, nil, refuse(reasonUserMessage, "the request does not carry exactly one new user message")
	case !userMessage(rest[0].text, turnContent, maxRuntime) || !rest[0].textOnly:
		return false, nil, refuse(reasonUserMessage, "the user message is not the turn's registered message")
	}
	return true, used, nil
}

// sameAnswer reports whether the assistant message m carries exactly the
// answer a: its text and its tool calls in order.
func sameAnswer(m *message, a *answerFacts) bool {
	if a.hasText != (m.text != "") || (a.hasText && sha(m.text) != a.textHash) || len(m.calls) != len(a.calls) {
		return false
	}
	for i, c := range m.calls {
		w := a.calls[i]
		if !sameCallID(w.id, c.id) || c.name != w.name || c.params != w.params {
			return false
		}
	}
	return true
}

// alnum is what OpenClaw keeps of a tool call id when it sanitizes one.
var alnum = charclass.Alnum()

// sameCallID reports whether sent is the tool call id the model gave
// (model) as OpenClaw replays it: unchanged, or sanitized by its transcript
// layer (sanitizeToolCallId: "strict" keeps only A-Z a-z 0-9, "strict9" the
// first nine of those).
func sameCallID(model, sent string) bool {
	if sent == model {
		return true
	}
	var b strings.Builder
	for _, r := range model {
		if r < 0x80 && alnum.Contains(byte(r)) {
			b.WriteRune(r)
		}
	}
	alnum := b.String()
	return alnum != "" && (sent == alnum || (len(alnum) > 9 && sent == alnum[:9]))
}

// checkResult checks one tool result (3.6) and returns the index of the
// gate decision it uses. answered holds the calls (by index in calls)
// already answered: a call is answered once, whichever of its id forms a
// result names.
func checkResult(r toolResult, calls []toolCall, answered map[int]bool, ts *turnState, decisions []Decision, pending []int) (int, error) {
	at := resultCall(r.id, calls)
	if at < 0 || answered[at] {
		return 0, refuse(reasonResultUnrequested, "a tool result answers no tool call of the model's last answer, or one already answered")
	}
	answered[at] = true
	call := &calls[at]
	for i, d := range decisions {
		if ts.used[i] || inList(pending, i) || d.Tool != call.name || d.ParamsHash != call.params {
			continue
		}
		// A denied call's result is its block reason and nothing else
		// (3.6): text beside it, or a part of another type, would be
		// output of a call the gate refused.
		if !d.Allow && (r.text != d.BlockReason || !r.textOnly) {
			return 0, refuse(reasonResultMismatch, fmt.Sprintf("the result of the denied %s call is not exactly its block reason", strconv.Quote(call.name)))
		}
		return i, nil
	}
	return 0, refuse(reasonResultUndecided, fmt.Sprintf("the %s call has a result but no gate decision", strconv.Quote(call.name)))
}

// resultCall is the index in calls of the call a result's id names: the
// call with that id, else the one call whose sanitized id it is; -1 when
// none, or when the sanitized form names more than one call.
func resultCall(id string, calls []toolCall) int {
	for i := range calls {
		if calls[i].id == id {
			return i
		}
	}
	at := -1
	for i := range calls {
		if sameCallID(calls[i].id, id) {
			if at >= 0 {
				return -1
			}
			at = i
		}
	}
	return at
}

func inList(l []int, x int) bool {
	for _, v := range l {
		if v == x {
			return true
		}
	}
	return false
}
