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

const testBotToken = "123456:BOTTOKENSECRET-x1"

type sentMessage struct {
	ChatID      string `json:"chat_id"`
	Text        string `json:"text"`
	ReplyMarkup struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
		} `json:"inline_keyboard"`
	} `json:"reply_markup"`
	id int64
}

func (m sentMessage) button(label string) string {
	for _, row := range m.ReplyMarkup.InlineKeyboard {
		for _, b := range row {
			if b.Text == label {
				return b.CallbackData
			}
		}
	}
	return ""
}

type answer struct {
	CallbackQueryID string `json:"callback_query_id"`
	Text            string `json:"text"`
	ShowAlert       bool   `json:"show_alert"`
}

// fakeBotAPI is a local Telegram Bot API: sendMessage assigns message ids,
// getUpdates serves queued updates from the requested offset, and
// answerCallbackQuery is recorded. onSend scripts the taps for a message.
type fakeBotAPI struct {
	*httptest.Server
	mu       sync.Mutex
	nextID   int64
	nextUpd  int64
	sent     []sentMessage
	updates  []map[string]any
	answers  []answer
	offsets  []int64
	onSend   func(f *fakeBotAPI, m sentMessage)
	failSend bool
}

func newFakeBotAPI(t testing.TB, onSend func(f *fakeBotAPI, m sentMessage)) *fakeBotAPI {
	f := &fakeBotAPI{nextID: 100, nextUpd: 5000, onSend: onSend}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// tap queues a callback query from user on message id msg with data.
func (f *fakeBotAPI) tap(user, msg int64, data string) {
	f.nextUpd++
	f.updates = append(f.updates, map[string]any{
		"update_id": f.nextUpd,
		"callback_query": map[string]any{
			"id":      fmt.Sprintf("cq-%d", f.nextUpd),
			"from":    map[string]any{"id": user, "is_bot": false, "first_name": "x"},
			"message": map[string]any{"message_id": msg, "chat": map[string]any{"id": -100}},
			"data":    data,
		},
	})
}

func (f *fakeBotAPI) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+testBotToken+"/")
	if !ok {
		http.Error(w, `{"ok":false,"error_code":401}`, http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "sendMessage":
		if f.failSend {
			http.Error(w, `{"ok":false}`, http.StatusInternalServerError)
			return
		}
		var m sentMessage
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, `{"ok":false}`, http.StatusBadRequest)
			return
		}
		f.nextID++
		m.id = f.nextID
		f.sent = append(f.sent, m)
		if f.onSend != nil {
			f.onSend(f, m)
		}
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"chat":{"id":-100},"date":0}}`, m.id)
	case "getUpdates":
		var req struct {
			Offset int64 `json:"offset"`
		}
		_ = json.Unmarshal(body, &req)
		f.offsets = append(f.offsets, req.Offset)
		var out []map[string]any
		for _, u := range f.updates {
			if u["update_id"].(int64) >= req.Offset {
				out = append(out, u)
			}
		}
		res, _ := json.Marshal(map[string]any{"ok": true, "result": out})
		_, _ = w.Write(res)
	case "answerCallbackQuery":
		var a answer
		_ = json.Unmarshal(body, &a)
		f.answers = append(f.answers, a)
		_, _ = io.WriteString(w, `{"ok":true,"result":true}`)
	default:
		http.Error(w, `{"ok":false}`, http.StatusNotFound)
	}
}

func (f *fakeBotAPI) snapshot() ([]sentMessage, []answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentMessage(nil), f.sent...), append([]answer(nil), f.answers...)
}

const allowedUser, strangerUser = 777, 999

func telegramGate(t testing.TB, f *fakeBotAPI, extra string, timeout time.Duration) *testGate {
	t.Helper()
	doc := fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,%s"telegram":{"enabled":true,"botToken":%q,"chatId":"-100","allowedUserIds":[%d]}}}}`,
		extra, testBotToken, allowedUser)
	cfg := mustParse(t, doc)
	cfg.Verifier.Telegram.Timeout = timeout
	return newTestGate(t, cfg, func(o *Options) {
		o.HTTPClient = f.Client()
		o.TelegramAPIBase = f.URL
	})
}

// bothVerifiersGate is a gate of cfg that asks the webhook ws and the fake
// bot API f. One client trusts the webhook's TLS certificate; the fake bot
// API is plain http on loopback.
func bothVerifiersGate(t testing.TB, cfg *Config, ws *webhookServer, f *fakeBotAPI) *testGate {
	t.Helper()
	return newTestGate(t, cfg, func(o *Options) {
		o.HTTPClient = ws.Client()
		o.TelegramClient = f.Client()
		o.TelegramAPIBase = f.URL
	})
}

// long is a timeout no passing test reaches; tests that must time out use short.
const long, short = 30 * time.Second, 100 * time.Millisecond

func TestTelegramAllowDeny(t *testing.T) {
	for _, label := range []string{"Allow", "Deny"} {
		f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button(label)) })
		g := telegramGate(t, f, "", long)
		c := call("exec")
		c.Params = []byte(`{"command":"curl https://example.com"}`)
		d := g.decide(t, c)
		if d.Allow != (label == "Allow") || d.Stage != stageVerifier {
			t.Fatalf("%s: %+v", label, d)
		}
		if label == "Deny" && d.Reason != "denied by the external verifier (telegram)" {
			t.Fatalf("reason %q", d.Reason)
		}
		sent, answers := f.snapshot()
		if len(sent) != 1 || sent[0].ChatID != "-100" {
			t.Fatalf("sent %+v", sent)
		}
		for _, want := range []string{"Tool verification request", "Tool: exec", "Command: curl https://example.com", "Agent: main", "Session: agent:main:main", d.RequestID} {
			if !strings.Contains(sent[0].Text, want) {
				t.Fatalf("message text lacks %q:\n%s", want, sent[0].Text)
			}
		}
		if len(answers) != 1 || answers[0].ShowAlert {
			t.Fatalf("answers %+v", answers)
		}
	}
}

func TestTelegramUnauthorizedTap(t *testing.T) {
	// A stranger taps Allow, then the allowed user taps Deny: deny, and the
	// stranger got the unauthorized alert.
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) {
		f.tap(strangerUser, m.id, m.button("Allow"))
		f.tap(allowedUser, m.id, m.button("Deny"))
	})
	g := telegramGate(t, f, "", long)
	if d := g.decide(t, call("exec")); d.Allow {
		t.Fatalf("stranger approved: %+v", d)
	}
	_, answers := f.snapshot()
	if len(answers) != 2 || answers[0].Text != telegramUnauthorizedText || !answers[0].ShowAlert || answers[0].CallbackQueryID != "cq-5001" {
		t.Fatalf("answers %+v", answers)
	}

	// Only strangers tap: the approval times out, failMode applies.
	for _, mode := range []failMode{failDeny, failAllow} {
		f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(strangerUser, m.id, m.button("Allow")) })
		g := telegramGate(t, f, `"failMode":"`+string(mode)+`",`, short)
		if d := g.decide(t, call("exec")); d.Allow != (mode == failAllow) {
			t.Fatalf("stranger only, failMode %s: %+v", mode, d)
		}
	}
}

func TestTelegramTimeoutAndUnrelated(t *testing.T) {
	cases := map[string]func(f *fakeBotAPI, m sentMessage){
		"no tap":           nil,
		"other message id": func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id+1000, m.button("Allow")) },
		"other request id": func(f *fakeBotAPI, m sentMessage) {
			f.tap(allowedUser, m.id, "cg1:00000000-0000-4000-8000-000000000000:allow")
		},
		"garbage data": func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button("Allow")+"x") },
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeBotAPI(t, script)
			g := telegramGate(t, f, "", short)
			d := g.decide(t, call("exec"))
			if d.Allow || d.Reason != "the external verifier (telegram) could not be consulted and failMode is deny" {
				t.Fatalf("%+v", d)
			}
			if _, answers := f.snapshot(); len(answers) != 0 {
				t.Fatalf("unrelated tap answered: %+v", answers)
			}
		})
	}
	// An unrelated tap first, then the real one: allow, and the poll offset
	// advanced past the consumed updates.
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) {
		f.tap(allowedUser, m.id+1, m.button("Deny"))
		f.tap(allowedUser, m.id, m.button("Allow"))
	})
	g := telegramGate(t, f, "", long)
	if d := g.decide(t, call("exec")); !d.Allow {
		t.Fatalf("%+v", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.offsets) == 0 || f.offsets[0] != 0 {
		t.Fatalf("offsets %v", f.offsets)
	}
}

func TestTelegramOffsetAdvances(t *testing.T) {
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button("Allow")) })
	g := telegramGate(t, f, "", long)
	g.decide(t, call("exec"))
	g.decide(t, call("exec"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if last := f.offsets[len(f.offsets)-1]; last != 5002 {
		t.Fatalf("second approval polled from offset %d, want 5002 (offsets %v)", last, f.offsets)
	}
}

func TestTelegramConcurrentApprovals(t *testing.T) {
	// Two approvals pending at once on one bot: each gets its own answer even
	// though one getUpdates returns both callbacks.
	var mu sync.Mutex
	var pending []sentMessage
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) {
		mu.Lock()
		defer mu.Unlock()
		pending = append(pending, m)
		if len(pending) == 2 {
			for _, p := range pending {
				label := "Deny"
				if strings.Contains(p.Text, "Tool: read") {
					label = "Allow"
				}
				f.tap(allowedUser, p.id, p.button(label))
			}
		}
	})
	g := telegramGate(t, f, "", long)
	var wg sync.WaitGroup
	results := map[string]bool{}
	var rmu sync.Mutex
	for _, tool := range []string{"read", "exec"} {
		wg.Go(func() {
			d := g.decide(t, call(tool))
			rmu.Lock()
			results[tool] = d.Allow
			rmu.Unlock()
		})
	}
	wg.Wait()
	if !results["read"] || results["exec"] {
		t.Fatalf("results %v", results)
	}
	g.verifyAudit(t, 2)
}

func TestTelegramAPIFailure(t *testing.T) {
	f := newFakeBotAPI(t, nil)
	f.failSend = true
	g := telegramGate(t, f, `"failMode":"allow",`, long)
	if d := g.decide(t, call("exec")); !d.Allow || !strings.Contains(d.Reason, "failMode is allow") {
		t.Fatalf("%+v", d)
	}
	assertNoSecret(t, "logs", g.logs.String())
	// A wrong token (401 from the API) is a failure too, and the token in the
	// URL does not reach the logs.
	cfg := mustParse(t, `{"tools":{"verifier":{"enabled":true,"telegram":{"enabled":true,"botToken":"42:BOTTOKENSECRET-x1","chatId":"1","allowedUserIds":[1]}}}}`)
	g2 := newTestGate(t, cfg, func(o *Options) { o.HTTPClient = f.Client(); o.TelegramAPIBase = f.URL })
	if d := g2.decide(t, call("exec")); d.Allow {
		t.Fatalf("%+v", d)
	}
	if !strings.Contains(g2.logs.String(), "status 401") {
		t.Fatalf("failure not logged: %s", g2.logs.String())
	}
	assertNoSecret(t, "logs", g2.logs.String())
}

func TestBothVerifiers(t *testing.T) {
	cases := []struct {
		name         string
		webhook      string
		tap          string
		allow        bool
		telegramSent bool
	}{
		{"both allow", `{"decision":"allow"}`, "Allow", true, true},
		{"webhook denies", `{"decision":"deny","reason":"nope"}`, "Allow", false, false},
		{"telegram denies", `{"decision":"allow"}`, "Deny", false, true},
		{"webhook malformed, failMode deny", `{`, "Allow", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWebhookServer(t, reply(200, tc.webhook))
			f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button(tc.tap)) })
			cfg := mustParse(t, fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,"webhook":{"url":%q},
				"telegram":{"enabled":true,"botToken":%q,"chatId":"-100","allowedUserIds":[%d]}}}}`, ws.URL, testBotToken, allowedUser))
			g := bothVerifiersGate(t, cfg, ws, f)
			d := g.decide(t, call("exec"))
			if d.Allow != tc.allow {
				t.Fatalf("%+v", d)
			}
			if sent, _ := f.snapshot(); (len(sent) == 1) != tc.telegramSent {
				t.Fatalf("telegram asked: %d", len(sent))
			}
			if ws.hits.Load() != 1 {
				t.Fatal("webhook not asked")
			}
		})
	}
	// failMode allow: an unreachable webhook does not skip Telegram's say.
	ws := newWebhookServer(t, reply(500, ``))
	f := newFakeBotAPI(t, func(f *fakeBotAPI, m sentMessage) { f.tap(allowedUser, m.id, m.button("Deny")) })
	cfg := mustParse(t, fmt.Sprintf(`{"tools":{"verifier":{"enabled":true,"failMode":"allow","webhook":{"url":%q},
		"telegram":{"enabled":true,"botToken":%q,"chatId":"-100","allowedUserIds":[%d]}}}}`, ws.URL, testBotToken, allowedUser))
	g := bothVerifiersGate(t, cfg, ws, f)
	if d := g.decide(t, call("exec")); d.Allow {
		t.Fatalf("telegram deny ignored after webhook failure: %+v", d)
	}
}

func TestTelegramCancelled(t *testing.T) {
	f := newFakeBotAPI(t, nil)
	g := telegramGate(t, f, `"failMode":"allow",`, long)
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.onSend = func(*fakeBotAPI, sentMessage) { cancel() }
	f.mu.Unlock()
	d, err := g.Decide(ctx, call("exec"))
	if err == nil || d.Allow {
		t.Fatalf("cancelled: %+v %v", d, err)
	}
}
