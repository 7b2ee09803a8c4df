package gate

import (
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	root, err := pohjson.ParseWith(data, pohjson.ParseOptions{MaxBytes: MaxConfigBytes, MaxDepth: 16})
	if err != nil {
		var pe *pohjson.Error
		if errors.As(err, &pe) {
			return nil, cfgErr("", ErrWrongType, "not strict JSON: %v at offset %d", pe.Err, pe.Offset)
		}
		return nil, cfgErr("", ErrWrongType, "not strict JSON")
	}
	return ParseConfigValue(root, opts)
}

// ParseConfigValue is ParseConfig on a document already parsed strictly
// (pohjson), so that a caller holding the whole configuration file parses
// it once and hands the gate its tree.
func ParseConfigValue(root *pohjson.Value, opts ParseOptions) (*Config, error) {
	p := &parser{opts: opts}
	c, err := p.config(root)
	if err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct {
	opts ParseOptions
}

// object returns the members of v after checking the keys. owned objects
// are strict even with AllowForeignKeys.
func (p *parser) object(path string, v *pohjson.Value, known []string, owned bool) (map[string]*pohjson.Value, error) {
	if v.Kind() != pohjson.Object {
		return nil, cfgErr(path, ErrWrongType, "must be an object")
	}
	out := make(map[string]*pohjson.Value, len(v.Members()))
	for _, m := range v.Members() {
		if slices.Contains(known, m.Key) {
			out[m.Key] = m.Value
			continue
		}
		if !owned && p.opts.AllowForeignKeys {
			// A key that differs from one the gate reads only in case is a
			// typo that would silently drop a policy: refuse it.
			if slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, m.Key) }) {
				return nil, cfgErr(join(path, m.Key), ErrUnknownKey, "unknown key (keys are case-sensitive)")
			}
			continue
		}
		return nil, cfgErr(join(path, m.Key), ErrUnknownKey, "unknown key")
	}
	return out, nil
}

func join(path, key string) string {
	if len(key) > 64 {
		key = key[:64] + "..."
	}
	if !isPlainKey(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func getBool(path string, v *pohjson.Value) (bool, error) {
	b, ok := v.Bool()
	if !ok {
		return false, cfgErr(path, ErrWrongType, "must be a boolean")
	}
	return b, nil
}

func getString(path string, v *pohjson.Value, maxBytes int) (string, error) {
	s, ok := v.Str()
	if !ok {
		return "", cfgErr(path, ErrWrongType, "must be a string")
	}
	if len(s) > maxBytes {
		return "", cfgErr(path, ErrBadValue, "longer than %d bytes", maxBytes)
	}
	return s, nil
}

func getSecret(path string, v *pohjson.Value) (Secret, error) {
	s, err := getString(path, v, maxSecretBytes)
	if err != nil {
		return Secret{}, err
	}
	if s == "" {
		return Secret{}, cfgErr(path, ErrBadValue, "must not be empty")
	}
	if strings.Contains(s, "${") {
		return Secret{}, cfgErr(path, ErrBadValue, "contains an unresolved ${...} placeholder")
	}
	return NewSecret(s), nil
}

func getSeconds(path string, v *pohjson.Value, maxSecs int64) (time.Duration, error) {
	n, ok := v.Int()
	if !ok {
		return 0, cfgErr(path, ErrWrongType, "must be an integer number of seconds")
	}
	if n < 1 || n > maxSecs {
		return 0, cfgErr(path, ErrBadValue, "must be between 1 and %d seconds", maxSecs)
	}
	return time.Duration(n) * time.Second, nil
}

// toolList parses a list of tool names, group:* entries and globs; entries are
// normalized, validated and de-duplicated in order.
func toolList(path string, v *pohjson.Value) ([]string, error) {
	if v.Kind() != pohjson.Array {
		return nil, cfgErr(path, ErrWrongType, "must be an array of strings")
	}
	elems := v.Elems()
	if len(elems) > maxListItems {
		return nil, cfgErr(path, ErrBadValue, "more than %d entries", maxListItems)
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		ep := path + "[" + strconv.Itoa(i) + "]"
		s, ok := e.Str()
		if !ok {
			return nil, cfgErr(ep, ErrWrongType, "must be a string")
		}
		n := NormalizeToolName(s)
		if strings.HasPrefix(n, "group:") {
			if _, ok := toolGroups[n]; !ok {
				return nil, cfgErr(ep, ErrBadValue, "unknown tool group")
			}
		} else if !validToolName(n, true) {
			return nil, cfgErr(ep, ErrBadValue, "not a valid tool name (1-%d bytes of [a-z0-9_.:-*])", MaxToolNameBytes)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (p *parser) config(root *pohjson.Value) (*Config, error) {
	top, err := p.object("", root, []string{"agents", "tools"}, false)
	if err != nil {
		return nil, err
	}
	c := &Config{GatedTools: DefaultGatedTools(), Development: p.opts.Development}
	if v := top["agents"]; v != nil {
		ag, err := p.object("agents", v, []string{"defaults", "list"}, false)
		if err != nil {
			return nil, err
		}
		if d := ag["defaults"]; d != nil {
			dm, err := p.object("agents.defaults", d, []string{"sig"}, false)
			if err != nil {
				return nil, err
			}
			if s := dm["sig"]; s != nil {
				sig, err := p.sig("agents.defaults.sig", s)
				if err != nil {
					return nil, err
				}
				if sig.EnforceVerification != nil {
					c.EnforceVerification = *sig.EnforceVerification
				}
				if sig.GatedTools != nil {
					c.GatedTools = sig.GatedTools
				}
			}
		}
		if l := ag["list"]; l != nil {
			if c.Agents, err = p.agents("agents.list", l); err != nil {
				return nil, err
			}
		}
	}
	if v := top["tools"]; v != nil {
		tp, ver, err := p.tools("tools", v)
		if err != nil {
			return nil, err
		}
		c.Tools = tp
		if ver != nil {
			c.Verifier = *ver
		}
	}
	if err := p.validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *parser) sig(path string, v *pohjson.Value) (SigConfig, error) {
	var s SigConfig
	m, err := p.object(path, v, []string{"enforceVerification", "gatedTools"}, true)
	if err != nil {
		return s, err
	}
	if e := m["enforceVerification"]; e != nil {
		b, err := getBool(path+".enforceVerification", e)
		if err != nil {
			return s, err
		}
		s.EnforceVerification = &b
	}
	if g := m["gatedTools"]; g != nil {
		list, err := toolList(path+".gatedTools", g)
		if err != nil {
			return s, err
		}
		if slices.Contains(list, VerifyToolName) {
			return s, cfgErr(path+".gatedTools", ErrBadValue, "must not contain the verify tool (it could never be unblocked)")
		}
		s.GatedTools = list
	}
	return s, nil
}

// unsupportedToolKeys are OpenClaw policy keys the gate does not implement;
// they are refused rather than ignored.
var unsupportedToolKeys = []string{"alsoAllow", "byProvider"}

func (p *parser) tools(path string, v *pohjson.Value) (ToolPolicy, *VerifierConfig, error) {
	var tp ToolPolicy
	if v.Kind() == pohjson.Object {
		for _, k := range unsupportedToolKeys {
			if v.Has(k) {
				return tp, nil, cfgErr(path+"."+k, ErrUnknownKey, "not supported by the gate")
			}
		}
	}
	m, err := p.object(path, v, []string{"profile", "allow", "deny", "verifier"}, false)
	if err != nil {
		return tp, nil, err
	}
	if pr := m["profile"]; pr != nil {
		s, err := getString(path+".profile", pr, 32)
		if err != nil {
			return tp, nil, err
		}
		if _, ok := toolProfiles[s]; !ok {
			return tp, nil, cfgErr(path+".profile", ErrBadValue, "must be one of %s", strings.Join(ProfileNames(), ", "))
		}
		tp.Profile = s
	}
	if a := m["allow"]; a != nil {
		if tp.Allow, err = toolList(path+".allow", a); err != nil {
			return tp, nil, err
		}
	}
	if d := m["deny"]; d != nil {
		if tp.Deny, err = toolList(path+".deny", d); err != nil {
			return tp, nil, err
		}
	}
	var ver *VerifierConfig
	if vv := m["verifier"]; vv != nil {
		if ver, err = p.verifier(path+".verifier", vv); err != nil {
			return tp, nil, err
		}
	}
	return tp, ver, nil
}

func (p *parser) verifier(path string, v *pohjson.Value) (*VerifierConfig, error) {
	m, err := p.object(path, v, []string{"enabled", "scope", "failMode", "webhook", "telegram"}, true)
	if err != nil {
		return nil, err
	}
	vc := &VerifierConfig{}
	if e := m["enabled"]; e != nil {
		b, err := getBool(path+".enabled", e)
		if err != nil {
			return nil, err
		}
		vc.Enabled = &b
	}
	if s := m["scope"]; s != nil {
		sm, err := p.object(path+".scope", s, []string{"include", "exclude"}, true)
		if err != nil {
			return nil, err
		}
		if sm["include"] != nil && sm["exclude"] != nil {
			return nil, cfgErr(path+".scope", ErrConflict, "include and exclude are mutually exclusive")
		}
		sc := &Scope{}
		if in := sm["include"]; in != nil {
			if sc.Include, err = toolList(path+".scope.include", in); err != nil {
				return nil, err
			}
		}
		if ex := sm["exclude"]; ex != nil {
			if sc.Exclude, err = toolList(path+".scope.exclude", ex); err != nil {
				return nil, err
			}
		}
		vc.Scope = sc
	}
	if f := m["failMode"]; f != nil {
		s, err := getString(path+".failMode", f, 16)
		if err != nil {
			return nil, err
		}
		switch FailMode(s) {
		case FailAllow, FailDeny:
			vc.FailMode = FailMode(s)
		default:
			return nil, cfgErr(path+".failMode", ErrBadValue, `must be "allow" or "deny"`)
		}
	}
	if w := m["webhook"]; w != nil {
		if vc.Webhook, err = p.webhook(path+".webhook", w); err != nil {
			return nil, err
		}
	}
	if t := m["telegram"]; t != nil {
		if vc.Telegram, err = p.telegram(path+".telegram", t); err != nil {
			return nil, err
		}
	}
	return vc, nil
}

// reservedHeaders may not be set through webhook.headers.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "X-Openclaw-Signature", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade"}

func (p *parser) webhook(path string, v *pohjson.Value) (*WebhookConfig, error) {
	m, err := p.object(path, v, []string{"url", "timeout", "headers", "secret"}, true)
	if err != nil {
		return nil, err
	}
	w := &WebhookConfig{Timeout: defaultWebhookSecs * time.Second}
	u := m["url"]
	if u == nil {
		return nil, cfgErr(path+".url", ErrBadValue, "is required")
	}
	if w.URL, err = getString(path+".url", u, maxURLBytes); err != nil {
		return nil, err
	}
	if err := p.checkURL(path+".url", w.URL); err != nil {
		return nil, err
	}
	if t := m["timeout"]; t != nil {
		if w.Timeout, err = getSeconds(path+".timeout", t, maxWebhookTimeout); err != nil {
			return nil, err
		}
	}
	if s := m["secret"]; s != nil {
		if w.Secret, err = getSecret(path+".secret", s); err != nil {
			return nil, err
		}
	}
	if h := m["headers"]; h != nil {
		hp := path + ".headers"
		if h.Kind() != pohjson.Object {
			return nil, cfgErr(hp, ErrWrongType, "must be an object")
		}
		if len(h.Members()) > maxHeaders {
			return nil, cfgErr(hp, ErrBadValue, "more than %d headers", maxHeaders)
		}
		w.Headers = make(map[string]Secret, len(h.Members()))
		for _, mem := range h.Members() {
			kp := join(hp, mem.Key)
			if !validHeaderName(mem.Key) {
				return nil, cfgErr(kp, ErrBadValue, "not a valid HTTP header name")
			}
			name := textproto.CanonicalMIMEHeaderKey(mem.Key)
			if slices.Contains(reservedHeaders, name) {
				return nil, cfgErr(kp, ErrBadValue, "header is set by the gate and cannot be configured")
			}
			if _, dup := w.Headers[name]; dup {
				return nil, cfgErr(kp, ErrConflict, "header given twice (names are case-insensitive)")
			}
			val, err := getSecret(kp, mem.Value)
			if err != nil {
				return nil, err
			}
			if !validHeaderValue(val.value()) {
				return nil, cfgErr(kp, ErrBadValue, "header value contains control characters")
			}
			w.Headers[name] = val
		}
	}
	return w, nil
}

func (p *parser) checkURL(path, raw string) error {
	if strings.Contains(raw, "${") {
		return cfgErr(path, ErrBadValue, "contains an unresolved ${...} placeholder")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return cfgErr(path, ErrBadValue, "must be an absolute http(s) URL")
	}
	if u.User != nil {
		return cfgErr(path, ErrBadValue, "must not contain credentials (use headers)")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return cfgErr(path, ErrBadValue, "must not contain a fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.opts.Development {
			return cfgErr(path, ErrInsecureURL, "must use https outside development mode")
		}
		logger(p.opts.Logger).Warn("gate: webhook url uses http; accepted in development mode only", "key", path)
	default:
		return cfgErr(path, ErrBadValue, "must be an absolute http(s) URL")
	}
	return nil
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

func (p *parser) telegram(path string, v *pohjson.Value) (*TelegramConfig, error) {
	m, err := p.object(path, v, []string{"enabled", "botToken", "chatId", "timeout", "allowedUserIds"}, true)
	if err != nil {
		return nil, err
	}
	t := &TelegramConfig{Timeout: defaultTelegramSecs * time.Second}
	if e := m["enabled"]; e != nil {
		if t.Enabled, err = getBool(path+".enabled", e); err != nil {
			return nil, err
		}
	}
	if b := m["botToken"]; b != nil {
		if t.BotToken, err = getSecret(path+".botToken", b); err != nil {
			return nil, err
		}
		if !validBotToken(t.BotToken.value()) {
			return nil, cfgErr(path+".botToken", ErrBadValue, "not a Telegram bot token")
		}
	}
	if c := m["chatId"]; c != nil {
		cp := path + ".chatId"
		switch c.Kind() {
		case pohjson.String:
			s, _ := c.Str()
			if s == "" || len(s) > maxChatIDBytes || strings.ContainsAny(s, "/?#%& \t\r\n") || !utf8.ValidString(s) {
				return nil, cfgErr(cp, ErrBadValue, "not a valid chat id")
			}
			t.ChatID = s
		case pohjson.Number:
			n, ok := c.Int()
			if !ok || n == 0 {
				return nil, cfgErr(cp, ErrBadValue, "not a valid chat id")
			}
			t.ChatID = strconv.FormatInt(n, 10)
		default:
			return nil, cfgErr(cp, ErrWrongType, "must be a string or an integer")
		}
	}
	if to := m["timeout"]; to != nil {
		if t.Timeout, err = getSeconds(path+".timeout", to, maxTelegramTimeout); err != nil {
			return nil, err
		}
	}
	if a := m["allowedUserIds"]; a != nil {
		ap := path + ".allowedUserIds"
		if a.Kind() != pohjson.Array {
			return nil, cfgErr(ap, ErrWrongType, "must be an array of user ids")
		}
		if len(a.Elems()) > maxAllowedUsers {
			return nil, cfgErr(ap, ErrBadValue, "more than %d entries", maxAllowedUsers)
		}
		t.AllowedUserIDs = []int64{}
		for i, e := range a.Elems() {
			ep := ap + "[" + strconv.Itoa(i) + "]"
			var id int64
			switch e.Kind() {
			case pohjson.Number:
				n, ok := e.Int()
				if !ok {
					return nil, cfgErr(ep, ErrBadValue, "not a valid user id")
				}
				id = n
			case pohjson.String:
				s, _ := e.Str()
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || strconv.FormatInt(n, 10) != s {
					return nil, cfgErr(ep, ErrBadValue, "not a valid user id")
				}
				id = n
			default:
				return nil, cfgErr(ep, ErrWrongType, "must be an integer")
			}
			if id <= 0 {
				return nil, cfgErr(ep, ErrBadValue, "not a valid user id")
			}
			if !slices.Contains(t.AllowedUserIDs, id) {
				t.AllowedUserIDs = append(t.AllowedUserIDs, id)
			}
		}
	}
	if t.Enabled {
		switch {
		case !t.BotToken.IsSet():
			return nil, cfgErr(path+".botToken", ErrBadValue, "is required when telegram is enabled")
		case t.ChatID == "":
			return nil, cfgErr(path+".chatId", ErrBadValue, "is required when telegram is enabled")
		case len(t.AllowedUserIDs) == 0:
			return nil, cfgErr(path+".allowedUserIds", ErrBadValue, "must list at least one user when telegram is enabled")
		}
	}
	return t, nil
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

func (p *parser) agents(path string, v *pohjson.Value) ([]AgentConfig, error) {
	if v.Kind() != pohjson.Array {
		return nil, cfgErr(path, ErrWrongType, "must be an array")
	}
	if len(v.Elems()) > maxAgents {
		return nil, cfgErr(path, ErrBadValue, "more than %d agents", maxAgents)
	}
	out := make([]AgentConfig, 0, len(v.Elems()))
	for i, e := range v.Elems() {
		ap := path + "[" + strconv.Itoa(i) + "]"
		m, err := p.object(ap, e, []string{"id", "tools", "sig"}, false)
		if err != nil {
			return nil, err
		}
		var a AgentConfig
		idv := m["id"]
		if idv == nil {
			return nil, cfgErr(ap+".id", ErrBadValue, "is required")
		}
		id, err := getString(ap+".id", idv, maxAgentIDBytes)
		if err != nil {
			return nil, err
		}
		a.ID = normalizeAgentID(id)
		if !validAgentID(a.ID) {
			return nil, cfgErr(ap+".id", ErrBadValue, "not a valid agent id (1-%d bytes of [a-z0-9_-])", maxAgentIDBytes)
		}
		for _, prev := range out {
			if prev.ID == a.ID {
				return nil, cfgErr(ap+".id", ErrConflict, "duplicate agent id")
			}
		}
		if t := m["tools"]; t != nil {
			tp, ver, err := p.tools(ap+".tools", t)
			if err != nil {
				return nil, err
			}
			a.Tools, a.Verifier = tp, ver
		}
		if s := m["sig"]; s != nil {
			if a.Sig, err = p.sig(ap+".sig", s); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
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
