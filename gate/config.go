package gate

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Limits on the configuration document.
const (
	MaxConfigBytes      = 1 << 20
	maxListItems        = 1024
	maxAgents           = 256
	maxHeaders          = 32
	maxAllowedUsers     = 256
	maxURLBytes         = 2048
	maxSecretBytes      = 4096
	maxHeaderNameBytes  = 128
	maxAgentIDBytes     = 64
	maxChatIDBytes      = 64
	maxWebhookTimeout   = 300 // seconds
	maxTelegramTimeout  = 3600
	defaultWebhookSecs  = 30
	defaultTelegramSecs = 120
)

// DefaultGatedTools is the seed-000 default of agents.defaults.sig.gatedTools.
var defaultGatedTools = []string{"exec", "write", "edit", "apply_patch", "message", "gateway", "sessions_spawn", "sessions_send"}

// DefaultGatedTools returns a copy of the default gated tool list.
func DefaultGatedTools() []string { return slices.Clone(defaultGatedTools) }

// FailMode is tools.verifier.failMode.
type FailMode string

// Fail modes. The empty value means "not set" (deny).
const (
	FailDeny  FailMode = "deny"
	FailAllow FailMode = "allow"
)

// ToolPolicy is tools.{profile, allow, deny} (or its per-agent form). Names
// are normalized. A nil list is "not set".
type ToolPolicy struct {
	Profile string // "" = not set (no profile restriction, like "full")
	Allow   []string
	Deny    []string
}

// Scope is tools.verifier.scope. At most one list is non-nil.
type Scope struct {
	Include []string
	Exclude []string
}

// WebhookConfig is tools.verifier.webhook.
type WebhookConfig struct {
	URL     string
	Timeout time.Duration
	// Headers are sent with every request. Values are secrets (they often
	// carry bearer tokens). Names are in canonical MIME form.
	Headers map[string]Secret
	// Secret, when set, signs the body: X-OpenClaw-Signature: sha256=<hex>.
	Secret Secret
}

// TelegramConfig is tools.verifier.telegram.
type TelegramConfig struct {
	Enabled        bool
	BotToken       Secret
	ChatID         string
	Timeout        time.Duration
	AllowedUserIDs []int64
}

// VerifierConfig is tools.verifier (or agents.list[].tools.verifier). For a
// per-agent override, nil pointers and empty values mean "inherit".
type VerifierConfig struct {
	Enabled  *bool
	Scope    *Scope
	FailMode FailMode // "" = not set
	Webhook  *WebhookConfig
	Telegram *TelegramConfig
}

// SigConfig is agents.defaults.sig or agents.list[].sig.
type SigConfig struct {
	EnforceVerification *bool
	GatedTools          []string // nil = not set
}

// AgentConfig is one agents.list[] entry.
type AgentConfig struct {
	ID       string
	Tools    ToolPolicy
	Verifier *VerifierConfig
	Sig      SigConfig
}

// Config is the validated gate configuration. Build it with ParseConfig.
type Config struct {
	// EnforceVerification is agents.defaults.sig.enforceVerification.
	EnforceVerification bool
	// GatedTools is agents.defaults.sig.gatedTools, defaults applied.
	GatedTools []string
	// Tools is the global tool policy tools.{profile, allow, deny}.
	Tools ToolPolicy
	// Verifier is tools.verifier.
	Verifier VerifierConfig
	// Agents is agents.list[].
	Agents []AgentConfig
	// Development records ParseOptions.Development (http webhooks accepted).
	Development bool
}

// String summarizes the config without any secret or URL.
func (c *Config) String() string {
	if c == nil {
		return "gate.Config(nil)"
	}
	en := c.Verifier.Enabled != nil && *c.Verifier.Enabled
	return fmt.Sprintf("gate.Config{enforceVerification:%t gatedTools:%d profile:%q allow:%d deny:%d verifier:%t agents:%d policy:%s}",
		c.EnforceVerification, len(c.GatedTools), c.Tools.Profile, len(c.Tools.Allow), len(c.Tools.Deny), en, len(c.Agents), c.PolicyHash())
}

// LogValue implements slog.LogValuer with the same safe summary.
func (c *Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ParseOptions relax ParseConfig. The zero value is the strictest.
type ParseOptions struct {
	// Development accepts http:// webhook URLs (with a logged warning).
	// Production deployments leave it false: an unauthenticated response
	// could turn a deny into an allow.
	Development bool
	// AllowForeignKeys ignores keys of the wider OpenClaw config that the
	// gate does not own (e.g. agents.defaults.model, channels). Keys inside
	// objects the gate owns (agents.defaults.sig, tools.verifier and below,
	// agents.list[].sig) are always strict, and policy keys the gate does not
	// implement (tools.alsoAllow, tools.byProvider) are always refused.
	AllowForeignKeys bool
	// Logger receives the development-mode warning; nil discards.
	Logger *slog.Logger
}

// ParseConfig parses and validates an OpenClaw-style JSON config document
// holding the gate's keys. Every error is a *ConfigError naming the key.
func ParseConfig(data []byte, opts ParseOptions) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, cfgErr("", ErrConfigTooLarge, "document is larger than %d bytes", MaxConfigBytes)
	}
	root, err := jsonobj.Parse(data, pohjson.ParseOptions{MaxBytes: MaxConfigBytes, MaxDepth: 16})
	if err != nil {
		key := ""
		if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
			key = keyOf(pe.Path)
		}
		if pe, ok := errors.AsType[*pohjson.Error](err); ok {
			return nil, cfgErr(key, ErrWrongType, "not strict JSON: %v at offset %d", pe.Err, pe.Offset)
		}
		return nil, cfgErr(key, ErrWrongType, "not strict JSON")
	}
	return ParseConfigValue(root, opts)
}

// ParseConfigValue is ParseConfig on a document already parsed strictly
// (pohjson), so that a caller holding the whole configuration file parses
// it once and hands the gate its tree.
func ParseConfigValue(root *pohjson.Value, opts ParseOptions) (*Config, error) {
	p := &parser{opts: opts}
	c := p.config(root)
	if err := p.r.Err(); err != nil {
		return nil, configError(err)
	}
	if err := p.validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

// parser walks the document with a jsonobj.Reader, which keeps the first
// error (its JSON path names the key); gate-specific refusals are recorded
// in it as *ConfigError.
type parser struct {
	opts ParseOptions
	r    jsonobj.Reader
}

// keyOf is the ConfigError key of a JSON path: the path without "$.".
func keyOf(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, jsonobj.Root), ".")
}

// fail records a gate refusal at path.
func (p *parser) fail(path string, sentinel error, format string, args ...any) {
	p.r.Fail(path, cfgErr(keyOf(path), sentinel, format, args...))
}

// configError turns the Reader's first error into a *ConfigError: a
// refusal of the gate's as recorded, a jsonobj one with the gate's
// sentinel for its class.
func configError(err error) error {
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		return ce
	}
	key := ""
	if pe, ok := errors.AsType[*jsonobj.PathError](err); ok {
		key = keyOf(pe.Path)
		err = pe.Err
	}
	switch {
	case errors.Is(err, jsonobj.ErrUnknownField):
		return cfgErr(key, ErrUnknownKey, "unknown key")
	case errors.Is(err, jsonobj.ErrMissingField):
		return cfgErr(key, ErrBadValue, "is required")
	case errors.Is(err, jsonobj.ErrTooLarge):
		return cfgErr(key, ErrBadValue, "too many entries or too large")
	}
	return cfgErr(key, ErrWrongType, "%v", err)
}

// object returns the members of v after checking the keys (known keys are
// optional). owned objects are strict even with AllowForeignKeys.
func (p *parser) object(path string, v *pohjson.Value, known []string, owned bool) map[string]*pohjson.Value {
	allowed := make(map[string]bool, len(known))
	for _, k := range known {
		allowed[k] = false
	}
	if !owned && p.opts.AllowForeignKeys && v.Kind() == pohjson.Object {
		kept := make([]pohjson.Member, 0, len(v.Members()))
		for _, m := range v.Members() {
			if _, ok := allowed[m.Key]; ok {
				kept = append(kept, m)
				continue
			}
			// A key that differs from one the gate reads only in case is a
			// typo that would silently drop a policy: refuse it.
			if slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, m.Key) }) {
				p.fail(jsonobj.Key(path, m.Key), ErrUnknownKey, "unknown key (keys are case-sensitive)")
			}
		}
		v = pohjson.NewObject(kept...)
	}
	return p.r.Object(v, path, allowed)
}

func (p *parser) getBool(path string, v *pohjson.Value) bool { return p.r.Bool(v, path) }

func (p *parser) getString(path string, v *pohjson.Value, maxBytes int) string {
	s, ok := p.r.Str(v, path)
	if ok && len(s) > maxBytes {
		p.fail(path, ErrBadValue, "longer than %d bytes", maxBytes)
	}
	return s
}

func (p *parser) getSecret(path string, v *pohjson.Value) Secret {
	s, ok := p.r.Str(v, path)
	switch {
	case !ok:
		return Secret{}
	case len(s) > maxSecretBytes:
		p.fail(path, ErrBadValue, "longer than %d bytes", maxSecretBytes)
	case s == "":
		p.fail(path, ErrBadValue, "must not be empty")
	case strings.Contains(s, "${"):
		p.fail(path, ErrBadValue, "contains an unresolved ${...} placeholder")
	default:
		return NewSecret(s)
	}
	return Secret{}
}

func (p *parser) getSeconds(path string, v *pohjson.Value, maxSecs int64) time.Duration {
	n := p.r.Int(v, path, math.MinInt64, math.MaxInt64)
	if p.r.Err() == nil && (n < 1 || n > maxSecs) {
		p.fail(path, ErrBadValue, "must be between 1 and %d seconds", maxSecs)
	}
	return time.Duration(n) * time.Second
}

// toolList parses a list of tool names, group:* entries and globs; entries are
// normalized, validated and de-duplicated in order.
func (p *parser) toolList(path string, v *pohjson.Value) []string {
	elems := p.r.Array(v, path, 0, maxListItems)
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		ep := jsonobj.Index(path, i)
		s, ok := p.r.Str(e, ep)
		if !ok {
			return nil
		}
		n := NormalizeToolName(s)
		if strings.HasPrefix(n, "group:") {
			if _, ok := toolGroups[n]; !ok {
				p.fail(ep, ErrBadValue, "unknown tool group")
				return nil
			}
		} else if !validToolName(n, true) {
			p.fail(ep, ErrBadValue, "not a valid tool name (1-%d bytes of [a-z0-9_.:-*])", MaxToolNameBytes)
			return nil
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (p *parser) config(root *pohjson.Value) *Config {
	const path = jsonobj.Root
	top := p.object(path, root, []string{"agents", "tools"}, false)
	c := &Config{GatedTools: DefaultGatedTools(), Development: p.opts.Development}
	if v := top["agents"]; v != nil {
		ap := jsonobj.Key(path, "agents")
		ag := p.object(ap, v, []string{"defaults", "list"}, false)
		if d := ag["defaults"]; d != nil {
			dp := jsonobj.Key(ap, "defaults")
			dm := p.object(dp, d, []string{"sig"}, false)
			if s := dm["sig"]; s != nil {
				sig := p.sig(jsonobj.Key(dp, "sig"), s)
				if sig.EnforceVerification != nil {
					c.EnforceVerification = *sig.EnforceVerification
				}
				if sig.GatedTools != nil {
					c.GatedTools = sig.GatedTools
				}
			}
		}
		if l := ag["list"]; l != nil {
			c.Agents = p.agents(jsonobj.Key(ap, "list"), l)
		}
	}
	if v := top["tools"]; v != nil {
		tp, ver := p.tools(jsonobj.Key(path, "tools"), v)
		c.Tools = tp
		if ver != nil {
			c.Verifier = *ver
		}
	}
	return c
}

func (p *parser) sig(path string, v *pohjson.Value) SigConfig {
	var s SigConfig
	m := p.object(path, v, []string{"enforceVerification", "gatedTools"}, true)
	if e := m["enforceVerification"]; e != nil {
		b := p.getBool(jsonobj.Key(path, "enforceVerification"), e)
		s.EnforceVerification = &b
	}
	if g := m["gatedTools"]; g != nil {
		gp := jsonobj.Key(path, "gatedTools")
		list := p.toolList(gp, g)
		if slices.Contains(list, VerifyToolName) {
			p.fail(gp, ErrBadValue, "must not contain the verify tool (it could never be unblocked)")
		}
		s.GatedTools = list
	}
	return s
}

// unsupportedToolKeys are OpenClaw policy keys the gate does not implement;
// they are refused rather than ignored.
var unsupportedToolKeys = []string{"alsoAllow", "byProvider"}

func (p *parser) tools(path string, v *pohjson.Value) (ToolPolicy, *VerifierConfig) {
	var tp ToolPolicy
	if v.Kind() == pohjson.Object {
		for _, k := range unsupportedToolKeys {
			if v.Has(k) {
				p.fail(jsonobj.Key(path, k), ErrUnknownKey, "not supported by the gate")
			}
		}
	}
	m := p.object(path, v, []string{"profile", "allow", "deny", "verifier"}, false)
	if pr := m["profile"]; pr != nil {
		pp := jsonobj.Key(path, "profile")
		s := p.getString(pp, pr, 32)
		if _, ok := toolProfiles[s]; !ok {
			p.fail(pp, ErrBadValue, "must be one of %s", strings.Join(ProfileNames(), ", "))
		}
		tp.Profile = s
	}
	if a := m["allow"]; a != nil {
		tp.Allow = p.toolList(jsonobj.Key(path, "allow"), a)
	}
	if d := m["deny"]; d != nil {
		tp.Deny = p.toolList(jsonobj.Key(path, "deny"), d)
	}
	var ver *VerifierConfig
	if vv := m["verifier"]; vv != nil {
		ver = p.verifier(jsonobj.Key(path, "verifier"), vv)
	}
	return tp, ver
}

func (p *parser) verifier(path string, v *pohjson.Value) *VerifierConfig {
	m := p.object(path, v, []string{"enabled", "scope", "failMode", "webhook", "telegram"}, true)
	vc := &VerifierConfig{}
	if e := m["enabled"]; e != nil {
		b := p.getBool(jsonobj.Key(path, "enabled"), e)
		vc.Enabled = &b
	}
	if s := m["scope"]; s != nil {
		sp := jsonobj.Key(path, "scope")
		sm := p.object(sp, s, []string{"include", "exclude"}, true)
		if sm["include"] != nil && sm["exclude"] != nil {
			p.fail(sp, ErrConflict, "include and exclude are mutually exclusive")
		}
		sc := &Scope{}
		if in := sm["include"]; in != nil {
			sc.Include = p.toolList(jsonobj.Key(sp, "include"), in)
		}
		if ex := sm["exclude"]; ex != nil {
			sc.Exclude = p.toolList(jsonobj.Key(sp, "exclude"), ex)
		}
		vc.Scope = sc
	}
	if f := m["failMode"]; f != nil {
		fp := jsonobj.Key(path, "failMode")
		switch s := p.getString(fp, f, 16); FailMode(s) {
		case FailAllow, FailDeny:
			vc.FailMode = FailMode(s)
		default:
			p.fail(fp, ErrBadValue, `must be "allow" or "deny"`)
		}
	}
	if w := m["webhook"]; w != nil {
		vc.Webhook = p.webhook(jsonobj.Key(path, "webhook"), w)
	}
	if t := m["telegram"]; t != nil {
		vc.Telegram = p.telegram(jsonobj.Key(path, "telegram"), t)
	}
	return vc
}

// reservedHeaders may not be set through webhook.headers.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "X-Openclaw-Signature", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade"}

func (p *parser) webhook(path string, v *pohjson.Value) *WebhookConfig {
	m := p.r.Object(v, path, map[string]bool{"url": true, "timeout": false, "headers": false, "secret": false})
	w := &WebhookConfig{Timeout: defaultWebhookSecs * time.Second}
	if u := m["url"]; u != nil {
		up := jsonobj.Key(path, "url")
		w.URL = p.getString(up, u, maxURLBytes)
		if p.r.Err() == nil {
			p.checkURL(up, w.URL)
		}
	}
	if t := m["timeout"]; t != nil {
		w.Timeout = p.getSeconds(jsonobj.Key(path, "timeout"), t, maxWebhookTimeout)
	}
	if s := m["secret"]; s != nil {
		w.Secret = p.getSecret(jsonobj.Key(path, "secret"), s)
	}
	if h := m["headers"]; h != nil {
		hp := jsonobj.Key(path, "headers")
		ms := p.r.Members(h, hp, 0, maxHeaders)
		w.Headers = make(map[string]Secret, len(ms))
		for _, mem := range ms {
			kp := jsonobj.Key(hp, mem.Key)
			if !validHeaderName(mem.Key) {
				p.fail(kp, ErrBadValue, "not a valid HTTP header name")
				break
			}
			name := textproto.CanonicalMIMEHeaderKey(mem.Key)
			if slices.Contains(reservedHeaders, name) {
				p.fail(kp, ErrBadValue, "header is set by the gate and cannot be configured")
				break
			}
			if _, dup := w.Headers[name]; dup {
				p.fail(kp, ErrConflict, "header given twice (names are case-insensitive)")
				break
			}
			val := p.getSecret(kp, mem.Value)
			if val.IsSet() && !validHeaderValue(val.value()) {
				p.fail(kp, ErrBadValue, "header value contains control characters")
			}
			w.Headers[name] = val
		}
	}
	return w
}

func (p *parser) checkURL(path, raw string) {
	if strings.Contains(raw, "${") {
		p.fail(path, ErrBadValue, "contains an unresolved ${...} placeholder")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		p.fail(path, ErrBadValue, "must be an absolute http(s) URL")
		return
	}
	if u.User != nil {
		p.fail(path, ErrBadValue, "must not contain credentials (use headers)")
		return
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		p.fail(path, ErrBadValue, "must not contain a fragment")
		return
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.opts.Development {
			p.fail(path, ErrInsecureURL, "must use https outside development mode")
			return
		}
		logger(p.opts.Logger).Warn("gate: webhook url uses http; accepted in development mode only", "key", keyOf(path))
	default:
		p.fail(path, ErrBadValue, "must be an absolute http(s) URL")
	}
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > maxHeaderNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

func (p *parser) telegram(path string, v *pohjson.Value) *TelegramConfig {
	m := p.object(path, v, []string{"enabled", "botToken", "chatId", "timeout", "allowedUserIds"}, true)
	t := &TelegramConfig{Timeout: defaultTelegramSecs * time.Second}
	if e := m["enabled"]; e != nil {
		t.Enabled = p.getBool(jsonobj.Key(path, "enabled"), e)
	}
	if b := m["botToken"]; b != nil {
		bp := jsonobj.Key(path, "botToken")
		t.BotToken = p.getSecret(bp, b)
		if t.BotToken.IsSet() && !validBotToken(t.BotToken.value()) {
			p.fail(bp, ErrBadValue, "not a Telegram bot token")
		}
	}
	if c := m["chatId"]; c != nil {
		cp := jsonobj.Key(path, "chatId")
		switch c.Kind() {
		case pohjson.String:
			s, _ := c.Str()
			if s == "" || len(s) > maxChatIDBytes || strings.ContainsAny(s, "/?#%& \t\r\n") || !utf8.ValidString(s) {
				p.fail(cp, ErrBadValue, "not a valid chat id")
			} else {
				t.ChatID = s
			}
		case pohjson.Number:
			n, ok := c.Int()
			if !ok || n == 0 {
				p.fail(cp, ErrBadValue, "not a valid chat id")
			} else {
				t.ChatID = strconv.FormatInt(n, 10)
			}
		default:
			p.fail(cp, ErrWrongType, "must be a string or an integer")
		}
	}
	if to := m["timeout"]; to != nil {
		t.Timeout = p.getSeconds(jsonobj.Key(path, "timeout"), to, maxTelegramTimeout)
	}
	if a := m["allowedUserIds"]; a != nil {
		ap := jsonobj.Key(path, "allowedUserIds")
		elems := p.r.Array(a, ap, 0, maxAllowedUsers)
		t.AllowedUserIDs = []int64{}
		for i, e := range elems {
			ep := jsonobj.Index(ap, i)
			var id int64
			switch e.Kind() {
			case pohjson.Number:
				n, ok := e.Int()
				if !ok {
					p.fail(ep, ErrBadValue, "not a valid user id")
				}
				id = n
			case pohjson.String:
				s, _ := e.Str()
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || strconv.FormatInt(n, 10) != s {
					p.fail(ep, ErrBadValue, "not a valid user id")
				}
				id = n
			default:
				p.fail(ep, ErrWrongType, "must be an integer")
			}
			if id <= 0 {
				p.fail(ep, ErrBadValue, "not a valid user id")
				break
			}
			if !slices.Contains(t.AllowedUserIDs, id) {
				t.AllowedUserIDs = append(t.AllowedUserIDs, id)
			}
		}
	}
	if t.Enabled {
		switch {
		case !t.BotToken.IsSet():
			p.fail(jsonobj.Key(path, "botToken"), ErrBadValue, "is required when telegram is enabled")
		case t.ChatID == "":
			p.fail(jsonobj.Key(path, "chatId"), ErrBadValue, "is required when telegram is enabled")
		case len(t.AllowedUserIDs) == 0:
			p.fail(jsonobj.Key(path, "allowedUserIds"), ErrBadValue, "must list at least one user when telegram is enabled")
		}
	}
	return t
}

// validBotToken accepts the Bot API token shape <digits>:<[A-Za-z0-9_-]+>,
// which also keeps the token safe inside a URL path.
func validBotToken(s string) bool {
	id, rest, ok := strings.Cut(s, ":")
	if !ok || id == "" || rest == "" || len(id) > 20 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p *parser) agents(path string, v *pohjson.Value) []AgentConfig {
	elems := p.r.Array(v, path, 0, maxAgents)
	out := make([]AgentConfig, 0, len(elems))
	for i, e := range elems {
		ap := jsonobj.Index(path, i)
		m := p.object(ap, e, []string{"id", "tools", "sig"}, false)
		var a AgentConfig
		idp := jsonobj.Key(ap, "id")
		idv := m["id"]
		if idv == nil {
			p.fail(idp, ErrBadValue, "is required")
			return out
		}
		a.ID = normalizeAgentID(p.getString(idp, idv, maxAgentIDBytes))
		if !validAgentID(a.ID) {
			p.fail(idp, ErrBadValue, "not a valid agent id (1-%d bytes of [a-z0-9_-])", maxAgentIDBytes)
		}
		for _, prev := range out {
			if prev.ID == a.ID {
				p.fail(idp, ErrConflict, "duplicate agent id")
			}
		}
		if t := m["tools"]; t != nil {
			a.Tools, a.Verifier = p.tools(jsonobj.Key(ap, "tools"), t)
		}
		if s := m["sig"]; s != nil {
			a.Sig = p.sig(jsonobj.Key(ap, "sig"), s)
		}
		out = append(out, a)
	}
	return out
}

// DefaultAgentID is OpenClaw's default agent id, used for calls without one.
const DefaultAgentID = "main"

func normalizeAgentID(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func validAgentID(s string) bool {
	if s == "" || len(s) > maxAgentIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validate checks rules that span keys: an enabled verifier needs a backend,
// globally and for every agent's effective verifier.
func (p *parser) validate(c *Config) error {
	if err := checkEffectiveVerifier("tools.verifier", mergeVerifier(c.Verifier, nil)); err != nil {
		return err
	}
	for i, a := range c.Agents {
		if a.Verifier == nil {
			continue
		}
		path := "agents.list[" + strconv.Itoa(i) + "].tools.verifier"
		if err := checkEffectiveVerifier(path, mergeVerifier(c.Verifier, a.Verifier)); err != nil {
			return err
		}
	}
	return nil
}

func checkEffectiveVerifier(path string, v effectiveVerifierConfig) error {
	if !v.Enabled {
		return nil
	}
	if v.Webhook == nil && (v.Telegram == nil || !v.Telegram.Enabled) {
		return cfgErr(path, ErrBadValue, "enabled but neither a webhook nor an enabled telegram verifier is configured")
	}
	return nil
}

// effectiveVerifierConfig is the verifier configuration that applies to one
// agent after merging the global and per-agent settings.
type effectiveVerifierConfig struct {
	Enabled  bool
	Scope    Scope
	FailMode FailMode
	Webhook  *WebhookConfig
	Telegram *TelegramConfig
}

// mergeVerifier applies a per-agent override (nil for none) to the global
// verifier. Every key the agent sets replaces the global one, except
// failMode, where the most restrictive wins: the effective mode is allow only
// when the global mode is explicitly allow and the agent does not say deny.
func mergeVerifier(global VerifierConfig, agent *VerifierConfig) effectiveVerifierConfig {
	e := effectiveVerifierConfig{
		Enabled:  global.Enabled != nil && *global.Enabled,
		Webhook:  global.Webhook,
		Telegram: global.Telegram,
		FailMode: FailDeny,
	}
	if global.Scope != nil {
		e.Scope = *global.Scope
	}
	agentMode := FailMode("")
	if agent != nil {
		if agent.Enabled != nil {
			e.Enabled = *agent.Enabled
		}
		if agent.Scope != nil {
			e.Scope = *agent.Scope
		}
		if agent.Webhook != nil {
			e.Webhook = agent.Webhook
		}
		if agent.Telegram != nil {
			e.Telegram = agent.Telegram
		}
		agentMode = agent.FailMode
	}
	if global.FailMode == FailAllow && agentMode != FailDeny {
		e.FailMode = FailAllow
	}
	return e
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
