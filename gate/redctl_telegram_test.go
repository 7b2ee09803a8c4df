package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// chatBotAPI is a Bot API that numbers messages per chat, as Telegram
// does: the first message of every chat has id 1. Once want messages are
// sent, it taps each one's button label(chat) as allowedUser.
type chatBotAPI struct {
	mu      sync.Mutex
	ids     map[string]int64
	updates []map[string]any
	sent    int
	want    int
	pending [][3]string // chat, message id, text of the sent messages
	label   func(chat string) string
}

func (f *chatBotAPI) serve(w http.ResponseWriter, r *http.Request) {
	method, _ := strings.CutPrefix(r.URL.Path, "/bot"+testBotToken+"/")
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch method {
	case "sendMessage":
		var m sentMessage
		_ = json.Unmarshal(body, &m)
		f.ids[m.ChatID]++
		id := f.ids[m.ChatID]
		f.pending = append(f.pending, [3]string{m.ChatID, fmt.Sprint(id), m.button(f.label(m.ChatID))})
		if f.sent++; f.sent == f.want {
			for i, p := range f.pending {
				f.updates = append(f.updates, map[string]any{"update_id": int64(i + 1), "callback_query": map[string]any{
					"id": fmt.Sprintf("cq-%d", i), "from": map[string]any{"id": allowedUser},
					"message": map[string]any{"message_id": json.Number(p[1]), "chat": map[string]any{"id": json.Number(p[0])}},
					"data":    p[2],
				}})
			}
		}
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d}}`, id)
	case "getUpdates":
		res, _ := json.Marshal(map[string]any{"ok": true, "result": f.updates})
		_, _ = w.Write(res)
	default:
		_, _ = io.WriteString(w, `{"ok":true,"result":true}`)
	}
}

// TestTelegramMessageIDsOfTwoChatsAttack: two agents share one bot with
// two chats, whose message ids are numbered separately. Approvals pending
// at once in both chats have the same message id; each must still be
// decided by the tap on its own message. (Before: the waiters were keyed by
// message id, the second replaced the first, and the first approval's tap
// was dropped: the call waited out its timeout and fell to failMode.)
func TestTelegramMessageIDsOfTwoChatsAttack(t *testing.T) {
	f := &chatBotAPI{ids: map[string]int64{}, want: 2, label: func(chat string) string {
		if chat == "-100" {
			return "Allow"
		}
		return "Deny"
	}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	agent := func(id, chat string) string {
		return fmt.Sprintf(`{"id":%q,"tools":{"verifier":{"enabled":true,"telegram":{"enabled":true,"botToken":%q,"chatId":%q,"timeout":3,"allowedUserIds":[%d]}}}}`,
			id, testBotToken, chat, allowedUser)
	}
	cfg := mustParse(t, `{"agents":{"list":[`+agent("one", "-100")+`,`+agent("two", "-200")+`]}}`)
	g := newTestGate(t, cfg, func(o *Options) { o.HTTPClient, o.TelegramAPIBase = srv.Client(), srv.URL })
	got := map[string]Decision{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, a := range []string{"one", "two"} {
		wg.Go(func() {
			c := call("exec")
			c.AgentID = a
			d, err := g.Decide(context.Background(), c)
			if err != nil {
				t.Errorf("%s: %v", a, err)
			}
			mu.Lock()
			got[a] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	if d := got["one"]; !d.Allow || d.Reason != "approved by the external verifier" {
		t.Errorf("agent one (tapped Allow in chat -100): %+v", d)
	}
	if d := got["two"]; d.Allow || d.Reason != "denied by the external verifier (telegram)" {
		t.Errorf("agent two (tapped Deny in chat -200): %+v", d)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v: a tap was lost and the call waited for its timeout", el)
	}
	g.verifyAudit(t, 2)
}

// TestTelegramTapOnAnotherMessageAttack: a callback that carries a pending
// request's data on another message (not the one the bot sent with those
// buttons) does not decide it.
func TestTelegramTapOnAnotherMessageAttack(t *testing.T) {
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) {
		f.tap(allowedUser, m.id+1, m.button("Allow"))
		f.tap(allowedUser, m.id, "cg1:"+strings.TrimPrefix(m.button("Allow"), "cg1:")+"x")
	})
	g := telegramGate(t, f, "", short)
	d := g.decide(t, call("exec"))
	if d.Allow || d.Reason != "the external verifier (telegram) could not be consulted and failMode is deny" {
		t.Fatalf("a tap on another message decided the call: %+v", d)
	}
}

// TestTelegramApprovalTextSpoofAttack: the approver reads the call in the
// approval message. A command (or session key) with newlines cannot forge
// the message's own lines (a second "Agent:" or "Request:"), a bidi
// override or line separator is shown escaped, and a command padded past
// what the message shows says it is cut and how long it is, so a tail
// ("; rm -rf ~") after 1,500 bytes of spaces is not approved unseen.
func TestTelegramApprovalTextSpoofAttack(t *testing.T) {
	padded := "echo ok" + strings.Repeat(" ", 1600) + "; rm -rf ~"
	for _, tc := range []struct {
		command, session string
		want             []string
	}{
		{"ls\nAgent: main\nSession: agent:main:main\nRequest: 00000000-0000-4000-8000-000000000000", "agent:main:main",
			[]string{`Command (quoted: it holds characters that cannot be shown as they are): "ls\nAgent: main\nSession: agent:main:main\nRequest: 00000000-0000-4000-8000-000000000000"` + "\n"}},
		{"ls \u202e~ fr- mr", "agent:main:main", []string{`Command (quoted: it holds characters that cannot be shown as they are): "ls \u202e~ fr- mr"`}},
		{padded, "agent:main:main", []string{fmt.Sprintf("Command (CUT: the first 1497 of its %d bytes are shown, the rest is not): echo ok", len(padded))}},
		{"ls", "agent:main:main\u2028Request: forged", []string{`Session (quoted: it holds characters that cannot be shown as they are): "agent:main:main\u2028Request: forged"` + "\n"}},
	} {
		f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button("Deny")) })
		g := telegramGate(t, f, "", long)
		c := call("exec")
		c.SessionKey = tc.session
		p, _ := json.Marshal(map[string]string{"command": tc.command})
		c.Params = p
		d := g.decide(t, c)
		sent, _ := f.snapshot()
		if d.Allow || len(sent) != 1 {
			t.Fatalf("%q: %+v, %d messages", tc.command, d, len(sent))
		}
		text := sent[0].Text
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("message lacks %q:\n%s", w, text)
			}
		}
		lines := strings.Split(text, "\n")
		for _, label := range []string{"Agent: ", "Request: ", "Session"} {
			n := 0
			for _, l := range lines {
				if strings.HasPrefix(l, label) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%q: %d lines start with %q:\n%s", tc.command, n, label, text)
			}
		}
		if !strings.HasSuffix(text, "Request: "+d.RequestID) || strings.ContainsAny(text, "\u2028\u202e") {
			t.Errorf("%q: message:\n%s", tc.command, text)
		}
	}
}

// TestTelegramApprovalShowsEveryExecParamAttack: an exec whose command
// looks harmless but whose other params change what it runs (env PATH,
// workdir, elevated) shows those params too, not the command alone.
func TestTelegramApprovalShowsEveryExecParamAttack(t *testing.T) {
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button("Deny")) })
	g := telegramGate(t, f, "", long)
	c := call("exec")
	c.Params = []byte(`{"command":"ls","env":{"PATH":"/tmp/evil"},"workdir":"/","elevated":true}`)
	if d := g.decide(t, c); d.Allow {
		t.Fatalf("%+v", d)
	}
	sent, _ := f.snapshot()
	want := "Command: ls\nOther params: " + `{"elevated":true,"env":{"PATH":"/tmp/evil"},"workdir":"/"}` + "\n"
	if len(sent) != 1 || !strings.Contains(sent[0].Text, want) {
		t.Fatalf("message lacks %q:\n%+v", want, sent)
	}
}
