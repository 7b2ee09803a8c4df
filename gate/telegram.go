package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/safetext"
)

// Telegram approval constants.
const (
	defaultTelegramAPIBase      = "https://api.telegram.org"
	defaultTelegramPollInterval = time.Second
	// telegramUnauthorizedText is the alert an unauthorized tap receives.
	telegramUnauthorizedText = "You are not authorized to approve/deny this request"
	maxTelegramResponse      = 1 << 20
	maxTelegramText          = 3500 // below the Bot API's 4096-character limit
	callbackPrefix           = "cg1:"
)

var errTelegramAPI = errors.New("telegram bot api call failed")

// telegramBot is one bot (API base + token). getUpdates is shared by every
// pending approval of the bot: one poll runs at a time, its callback queries
// are dispatched to the waiters by request id (the one the buttons carry)
// and then checked against the waiter's message id, so concurrent approvals
// do not consume each other's updates. Message ids are numbered per chat:
// two chats of one bot (two agents' chatIds) reuse them, so they cannot be
// the key.
type telegramBot struct {
	base     string
	token    secretText
	client   *http.Client
	interval time.Duration
	log      *slog.Logger

	pollMu  sync.Mutex // serializes getUpdates and sendMessage+registration
	offset  int64
	mu      sync.Mutex           // guards waiting
	waiting map[string]*tgWaiter // by request id
}

type tgWaiter struct {
	requestID string
	messageID int64 // the sent message's id, set when it is registered
	allowed   []int64
	done      chan bool // buffered(1): true = allow
}

type telegramApprover struct {
	bot *telegramBot
	cfg *telegramConfig
}

func newTelegramBot(base string, token secretText, client *http.Client, interval time.Duration, log *slog.Logger) *telegramBot {
	return &telegramBot{
		base: strings.TrimRight(base, "/"), token: token, client: client,
		interval: interval, log: log, waiting: map[string]*tgWaiter{},
	}
}

// call POSTs a JSON request to a Bot API method and decodes result into out.
// Errors never contain the URL (it carries the token) or response text.
func (b *telegramBot) call(ctx context.Context, method string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%w: %s: cannot encode request", errTelegramAPI, method)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/bot"+b.token.value()+"/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %s: cannot build request", errTelegramAPI, method)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(hr)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errTelegramAPI, method, transportError(ctx, err))
	}
	defer resp.Body.Close()
	data, err := bounded.Read(resp.Body, maxTelegramResponse, "response")
	if errors.Is(err, bounded.ErrTooLarge) {
		return fmt.Errorf("%w: %s: response too large", errTelegramAPI, method)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errTelegramAPI, method, transportError(ctx, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w: %s: status %d", errTelegramAPI, method, resp.StatusCode)
	}
	var env struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &env); err != nil || !env.OK {
		return fmt.Errorf("%w: %s: malformed or not ok", errTelegramAPI, method)
	}
	if out != nil {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return fmt.Errorf("%w: %s: malformed result", errTelegramAPI, method)
		}
	}
	return nil
}

type tgInlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

type tgSendMessage struct {
	ChatID      string `json:"chat_id"`
	Text        string `json:"text"`
	ReplyMarkup struct {
		InlineKeyboard [][]tgInlineButton `json:"inline_keyboard"`
	} `json:"reply_markup"`
}

type tgMessage struct {
	MessageID int64 `json:"message_id"`
}

type tgUpdate struct {
	UpdateID      int64 `json:"update_id"`
	CallbackQuery *struct {
		ID   string `json:"id"`
		From struct {
			ID int64 `json:"id"`
		} `json:"from"`
		Message *tgMessage `json:"message"`
		Data    string     `json:"data"`
	} `json:"callback_query"`
}

type tgGetUpdates struct {
	Offset         int64    `json:"offset,omitempty"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

type tgAnswer struct {
	CallbackQueryID string `json:"callback_query_id"`
	Text            string `json:"text,omitempty"`
	ShowAlert       bool   `json:"show_alert,omitempty"`
}

// approvalText is the plain-text approval message (no parse mode, so the
// content cannot inject markup). Parameters are the redacted ones.
func approvalText(r verifierRequest) string {
	var b strings.Builder
	b.WriteString("Tool verification request\n\n")
	b.WriteString("Tool: " + r.Tool + "\n")
	var m map[string]json.RawMessage
	cmd := ""
	if r.Tool == "exec" && json.Unmarshal(r.Params, &m) == nil {
		_ = json.Unmarshal(m["command"], &cmd)
	}
	if cmd != "" {
		b.WriteString(approvalLine("Command", cmd, maxApprovalValue))
		// What else the call sets (env, workdir, elevated, host, ...)
		// changes what the command does: the approver sees it too. The
		// members are the JCS ones, re-encoded in key order.
		delete(m, "command")
		if len(m) > 0 {
			rest, err := json.Marshal(m)
			if err != nil {
				rest = []byte("(cannot be shown)")
			}
			b.WriteString(approvalLine("Other params", string(rest), maxApprovalValue))
		}
	} else {
		b.WriteString(approvalLine("Params", string(r.Params), maxApprovalValue))
	}
	b.WriteString("Agent: " + r.AgentID + "\n")
	b.WriteString(approvalLine("Session", r.SessionKey, maxApprovalValue))
	b.WriteString("Request: " + r.RequestID)
	return safetext.Fit(b.String(), maxTelegramText)
}

// maxApprovalValue bounds the bytes of one value in the approval message.
const maxApprovalValue = 1500

// approvalLine is one line of the approval message: label and v, as it is
// when every character of it is printable (strconv.IsPrint: no control or
// format character, no space but U+0020), else Go-quoted with those
// escaped, so that the caller's text cannot start a line of its own (a
// forged "Agent:" or "Request:"), reorder what the approver reads (bidi
// controls) or hide a part in blank lines. A value over max bytes is cut,
// and the label says so with its full size: the approver never takes a
// part for the whole.
func approvalLine(label, v string, max int) string {
	if !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool { return !strconv.IsPrint(r) }) >= 0 {
		v = strconv.Quote(v)
		label += " (quoted: it holds characters that cannot be shown as they are)"
	}
	if len(v) > max {
		shown := safetext.Fit(v, max)
		label += fmt.Sprintf(" (CUT: the first %d of its %d bytes are shown, the rest is not)", len(shown)-len("…"), len(v))
		v = shown
	}
	return label + ": " + v + "\n"
}

func (a *telegramApprover) verify(ctx context.Context, r verifierRequest) verdict {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	b := a.bot
	w := &tgWaiter{requestID: r.RequestID, allowed: a.cfg.AllowedUserIDs, done: make(chan bool, 1)}

	var msg tgMessage
	send := tgSendMessage{ChatID: a.cfg.ChatID, Text: approvalText(r)}
	send.ReplyMarkup.InlineKeyboard = [][]tgInlineButton{{
		{Text: "Allow", CallbackData: callbackPrefix + r.RequestID + ":allow"},
		{Text: "Deny", CallbackData: callbackPrefix + r.RequestID + ":deny"},
	}}
	// Send and register under pollMu so no poll can see the callback before
	// the waiter exists.
	b.pollMu.Lock()
	err := b.call(ctx, "sendMessage", send, &msg)
	if err == nil && msg.MessageID == 0 {
		err = fmt.Errorf("%w: sendMessage: no message id", errTelegramAPI)
	}
	if err == nil {
		w.messageID = msg.MessageID
		b.mu.Lock()
		b.waiting[w.requestID] = w
		b.mu.Unlock()
	}
	b.pollMu.Unlock()
	if err != nil {
		return verdict{unavailable: true, err: err}
	}
	defer func() {
		b.mu.Lock()
		delete(b.waiting, w.requestID)
		b.mu.Unlock()
	}()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case allow := <-w.done:
			if allow {
				return verdict{allow: true}
			}
			return verdict{allow: false}
		case <-ctx.Done():
			return verdict{unavailable: true, err: transportError(ctx, ctx.Err())}
		case <-timer.C:
		}
		if err := b.poll(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("gate: telegram getUpdates failed; retrying", "error", err.Error())
		}
		timer.Reset(b.interval)
	}
}

// poll runs one getUpdates and dispatches callback queries to waiters.
func (b *telegramBot) poll(ctx context.Context) error {
	b.pollMu.Lock()
	defer b.pollMu.Unlock()
	var updates []tgUpdate
	err := b.call(ctx, "getUpdates", tgGetUpdates{Offset: b.offset, Timeout: 0, AllowedUpdates: []string{"callback_query"}}, &updates)
	if err != nil {
		return err
	}
	for _, u := range updates {
		if u.UpdateID >= b.offset {
			b.offset = u.UpdateID + 1
		}
		b.dispatch(ctx, u)
	}
	return nil
}

func (b *telegramBot) dispatch(ctx context.Context, u tgUpdate) {
	q := u.CallbackQuery
	if q == nil || q.Message == nil {
		return
	}
	data, ok := strings.CutPrefix(q.Data, callbackPrefix)
	i := strings.LastIndexByte(data, ':')
	if !ok || i < 0 {
		return // not our buttons
	}
	requestID, rest := data[:i], data[i+1:]
	b.mu.Lock()
	w := b.waiting[requestID]
	b.mu.Unlock()
	// The tap counts only on the message that carries this request's
	// buttons: not a pending request's data on another message.
	if w == nil || w.messageID != q.Message.MessageID || (rest != "allow" && rest != "deny") {
		return // an unrelated message, or not our buttons
	}
	if !slices.Contains(w.allowed, q.From.ID) {
		b.log.Warn("gate: unauthorized telegram approval tap ignored", "user_id", strconv.FormatInt(q.From.ID, 10))
		if err := b.call(ctx, "answerCallbackQuery", tgAnswer{CallbackQueryID: q.ID, Text: telegramUnauthorizedText, ShowAlert: true}, nil); err != nil {
			b.log.Warn("gate: telegram answerCallbackQuery failed", "error", err.Error())
		}
		return
	}
	text := "Denied"
	if rest == "allow" {
		text = "Allowed"
	}
	if err := b.call(ctx, "answerCallbackQuery", tgAnswer{CallbackQueryID: q.ID, Text: text}, nil); err != nil {
		b.log.Warn("gate: telegram answerCallbackQuery failed", "error", err.Error())
	}
	select {
	case w.done <- rest == "allow":
	default: // already answered: the first authorized tap wins
	}
}
