package gate

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/pohjson"
)

// Webhook protocol constants (seed 004).
const (
	webhookVersion         = 1
	signatureHeader        = "X-OpenClaw-Signature"
	maxWebhookResponse     = 64 << 10
	maxReasonChars         = 500 // JavaScript characters (UTF-16 code units)
	webhookContentType     = "application/json"
	webhookSignaturePrefix = "sha256="
)

// verifierRequest is what both external verifiers are asked about.
type verifierRequest struct {
	RequestID       string
	Timestamp       time.Time
	Tool            string
	Params          []byte // redacted, JCS
	AgentID         string
	SessionKey      string
	MessageProvider string
}

// verdict is an external verifier's answer. unavailable means the verifier
// could not be consulted (failMode applies); err says why (never a secret).
type verdict struct {
	allow       bool
	reason      string
	unavailable bool
	err         error
}

// Errors that trigger failMode. They are logged, never shown to the agent.
var (
	errVerifierStatus    = errors.New("verifier returned a non-2xx status")
	errVerifierMalformed = errors.New("verifier response is malformed")
	// errVerifierOtherRequest: the response names another requestId.
	errVerifierOtherRequest = errors.New("verifier response names another request")
	errVerifierTooLarge     = errors.New("verifier response exceeds the size limit")
	errVerifierTransport    = errors.New("verifier request failed")
	errVerifierTimeout      = errors.New("verifier timed out")
)

type webhookVerifier struct {
	cfg    *webhookConfig
	client *http.Client
	log    *slog.Logger
}

func newWebhookVerifier(cfg *webhookConfig, client *http.Client, log *slog.Logger) *webhookVerifier {
	c := *client
	// Redirects are refused: a redirect could move the request to another
	// host or to plain http. A 3xx is then a non-2xx status (failMode).
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &webhookVerifier{cfg: cfg, client: &c, log: log}
}

type webhookBody struct {
	Version   int            `json:"version"`
	Timestamp string         `json:"timestamp"`
	RequestID string         `json:"requestId"`
	Tool      webhookTool    `json:"tool"`
	Context   webhookContext `json:"context"`
}

type webhookTool struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params"`
}

type webhookContext struct {
	AgentID         string `json:"agentId"`
	SessionKey      string `json:"sessionKey"`
	MessageProvider string `json:"messageProvider,omitempty"`
}

// webhookRequestBody returns the exact request body of seed 004.
func webhookRequestBody(r verifierRequest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(webhookBody{
		Version:   webhookVersion,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339),
		RequestID: r.RequestID,
		Tool:      webhookTool{Name: r.Tool, Params: r.Params},
		Context:   webhookContext{AgentID: r.AgentID, SessionKey: r.SessionKey, MessageProvider: r.MessageProvider},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: cannot encode request", errInvalidCall)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// signBody returns "sha256=" + hex(HMAC-SHA256(secret, body)).
func signBody(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return webhookSignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

func (w *webhookVerifier) verify(ctx context.Context, r verifierRequest) verdict {
	body, err := webhookRequestBody(r)
	if err != nil {
		return verdict{unavailable: true, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return verdict{unavailable: true, err: errVerifierTransport}
	}
	for name, v := range w.cfg.Headers {
		req.Header.Set(name, v.value())
	}
	req.Header.Set("Content-Type", webhookContentType)
	if w.cfg.Secret.isSet() {
		req.Header.Set(signatureHeader, signBody([]byte(w.cfg.Secret.value()), body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return verdict{unavailable: true, err: transportError(ctx, err)}
	}
	defer resp.Body.Close()
	data, err := bounded.Read(resp.Body, maxWebhookResponse, "verifier response")
	tooLarge := errors.Is(err, bounded.ErrTooLarge)
	if err != nil && !tooLarge {
		return verdict{unavailable: true, err: transportError(ctx, err)}
	}
	// A bad status is reported before an oversized body.
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return verdict{unavailable: true, err: fmt.Errorf("%w: %d", errVerifierStatus, resp.StatusCode)}
	}
	if tooLarge {
		return verdict{unavailable: true, err: errVerifierTooLarge}
	}
	allow, reason, err := parseWebhookResponse(data, r.RequestID)
	if errors.Is(err, errVerifierOtherRequest) {
		// The verifier answered, not for this call: never its allow, and
		// not failMode either (which could turn it into one).
		return verdict{allow: false, reason: "its answer names another request"}
	}
	if err != nil {
		return verdict{unavailable: true, err: err}
	}
	return verdict{allow: allow, reason: reason}
}

// transportError reduces a client error to a class without the URL (which
// may carry a token) or any response content.
func transportError(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errVerifierTimeout
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", errVerifierTransport, context.Canceled)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if ue.Timeout() {
			return errVerifierTimeout
		}
		return fmt.Errorf("%w: %s", errVerifierTransport, sanitizeNetError(ue.Err))
	}
	return errVerifierTransport
}

// sanitizeNetError keeps a short, URL-free description of a network error.
func sanitizeNetError(err error) string {
	if err == nil {
		return "unknown error"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}

// parseWebhookResponse applies seed 004's response rules: a JSON object whose
// "decision" is exactly "allow" or "deny" and whose optional "reason" is a
// string (truncated to maxReasonChars). Anything else is malformed.
//
// A response that names a requestId MUST name this request's: an answer
// to another request (a replay, a cache in front of the verifier) is
// errVerifierOtherRequest, a deny whatever failMode says.
func parseWebhookResponse(data []byte, requestID string) (allow bool, reason string, err error) {
	v, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: maxWebhookResponse, MaxDepth: 32, AllowFloats: true})
	if err != nil || v.Kind() != pohjson.Object {
		return false, "", errVerifierMalformed
	}
	if v.Get("requestId") != nil {
		if id, ok := v.GetString("requestId"); !ok || id != requestID {
			return false, "", errVerifierOtherRequest
		}
	}
	d, ok := v.GetString("decision")
	if !ok {
		return false, "", errVerifierMalformed
	}
	switch d {
	case "allow":
		allow = true
	case "deny":
	default:
		return false, "", errVerifierMalformed
	}
	if rv := v.Get("reason"); rv != nil {
		switch rv.Kind() {
		case pohjson.String:
			reason, _ = rv.Str()
		case pohjson.Null:
		default:
			return false, "", errVerifierMalformed
		}
	}
	return allow, cleanReason(reason), nil
}

// cleanReason truncates to maxReasonChars JavaScript characters (never
// splitting a surrogate pair) and replaces control characters other than
// newline and tab with spaces.
func cleanReason(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > maxReasonChars {
			break
		}
		n += w
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}

// newRequestID returns a random RFC 4122 version 4 UUID.
func newRequestID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], u[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], u[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], u[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], u[8:10])
	out[23] = '-'
	hex.Encode(out[24:], u[10:])
	return string(out[:])
}
