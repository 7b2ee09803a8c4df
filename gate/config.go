package gate

import (
	"fmt"
	"log/slog"
	"maps"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Limits on the configuration document. The limits of single keys are in
// the conf tags of the declaration below (configDoc and what it holds).
const (
	maxConfigBytes     = 1 << 20
	maxListItems       = 1024
	maxAllowedUsers    = 256
	maxHeaders         = 32
	maxSecretBytes     = 4096
	maxHeaderNameBytes = 128
	maxAgentIDBytes    = 64
	maxChatIDBytes     = 64
)

// defaultGatedTools is the seed-000 default of agents.defaults.sig.gatedTools.
var defaultGatedTools = []string{"exec", "write", "edit", "apply_patch", "message", "gateway", "sessions_spawn", "sessions_send"}

// failMode is tools.verifier.failMode.
type failMode string

// Fail modes. The empty value means "not set" (deny).
const (
	failDeny  failMode = "deny"
	failAllow failMode = "allow"
)

// toolPolicy is tools.{profile, allow, deny} (or its per-agent form). Names
// are normalized. A nil list is "not set".
type toolPolicy struct {
	Profile string // "" = not set (no profile restriction, like "full")
	Allow   []string
	Deny    []string
}

// scope is tools.verifier.scope. At most one list is non-nil.
type scope struct {
	Include []string
	Exclude []string
}

// webhookConfig is tools.verifier.webhook.
type webhookConfig struct {
	URL     string
	Timeout time.Duration
	// Headers are sent with every request. Values are secrets (they often
	// carry bearer tokens). Names are in canonical MIME form.
	Headers map[string]secretText
	// Secret, when set, signs the body: X-OpenClaw-Signature: sha256=<hex>.
	Secret secretText
}

// telegramConfig is tools.verifier.telegram.
type telegramConfig struct {
	Enabled        bool
	BotToken       secretText
	ChatID         string
	Timeout        time.Duration
	AllowedUserIDs []int64
}

// verifierConfig is tools.verifier (or agents.list[].tools.verifier). For a
// per-agent override, nil pointers and empty values mean "inherit".
type verifierConfig struct {
	Enabled  *bool
	Scope    *scope
	FailMode failMode // "" = not set
	Webhook  *webhookConfig
	Telegram *telegramConfig
}

// sigConfig is agents.defaults.sig or agents.list[].sig.
type sigConfig struct {
	EnforceVerification *bool
	GatedTools          []string // nil = not set
}

// agentConfig is one agents.list[] entry.
type agentConfig struct {
	ID       string
	Tools    toolPolicy
	Verifier *verifierConfig
	Sig      sigConfig
}

// Config is the validated gate configuration. Build it with ParseConfig.
type Config struct {
	// EnforceVerification is agents.defaults.sig.enforceVerification.
	EnforceVerification bool
	// GatedTools is agents.defaults.sig.gatedTools, defaults applied.
	GatedTools []string
	// Tools is the global tool policy tools.{profile, allow, deny}.
	Tools toolPolicy
	// Verifier is tools.verifier.
	Verifier verifierConfig
	// Agents is agents.list[].
	Agents []agentConfig
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
		c.EnforceVerification, len(c.GatedTools), c.Tools.Profile, len(c.Tools.Allow), len(c.Tools.Deny), en, len(c.Agents), c.policyHash())
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
// holding the gate's keys. Every error is a *confdoc.ConfigError naming the key.
func ParseConfig(data []byte, opts ParseOptions) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, cfgErr("", errConfigTooLarge, "document is larger than %d bytes", maxConfigBytes)
	}
	var doc configDoc
	if err := confdoc.Parse(data, pohjson.ParseOptions{MaxBytes: maxConfigBytes, MaxDepth: 16}, &doc, docOptions(opts)); err != nil {
		return nil, err
	}
	return build(&doc, opts)
}

// ParseConfigValue is ParseConfig on a document already parsed strictly
// (pohjson), so that a caller holding the whole configuration file parses
// it once and hands the gate its tree.
func ParseConfigValue(root *pohjson.Value, opts ParseOptions) (*Config, error) {
	var doc configDoc
	if err := confdoc.Decode(root, &doc, docOptions(opts)); err != nil {
		return nil, err
	}
	return build(&doc, opts)
}

// docOptions are the decoder options of a gate config: with
// AllowForeignKeys, any top-level key (the embedding document owns the
// top level) and, inside the sections the gate reads, exactly the keys the
// supported OpenClaw release declares there (openClawKeys, generated from
// its config schema) are passed over; every other undeclared key is
// refused, so a typo such as tools.denny cannot silently drop a policy.
func docOptions(opts ParseOptions) confdoc.Options {
	o := confdoc.Options{Doc: errInvalidConfig}
	if opts.AllowForeignKeys {
		o.Foreign = map[string][]string{"": {"*"}}
		maps.Copy(o.Foreign, openClawKeys)
	}
	return o
}

// The declaration of the gate's keys. Keys the gate does not read, in
// these objects, are refused (or passed over as docOptions says).
type (
	configDoc struct {
		Agents *agentsDoc `conf:"agents"`
		Tools  *toolsDoc  `conf:"tools"`
	}
	agentsDoc struct {
		Defaults *defaultsDoc `conf:"defaults"`
		List     []agentDoc   `conf:"list,max=256"`
	}
	defaultsDoc struct {
		Sig *sigDoc `conf:"sig"`
	}
	agentDoc struct {
		ID    string    `conf:"id,required,max=64"`
		Tools *toolsDoc `conf:"tools"`
		Sig   *sigDoc   `conf:"sig"`
	}
	sigDoc struct {
		EnforceVerification *bool     `conf:"enforceVerification"`
		GatedTools          *toolList `conf:"gatedTools"`
	}
	toolsDoc struct {
		Profile  *profileName  `conf:"profile"`
		Allow    *toolList     `conf:"allow"`
		Deny     *toolList     `conf:"deny"`
		Verifier *verifierKeys `conf:"verifier"`
		// OpenClaw policy keys the gate does not implement: refused
		// rather than passed over.
		AlsoAllow  unsupported `conf:"alsoAllow"`
		ByProvider unsupported `conf:"byProvider"`
	}
	verifierKeys struct {
		Enabled  *bool        `conf:"enabled"`
		Scope    *scopeDoc    `conf:"scope"`
		FailMode failMode     `conf:"failMode,enum=allow|deny"`
		Webhook  *webhookDoc  `conf:"webhook"`
		Telegram *telegramDoc `conf:"telegram"`
	}
	scopeDoc struct {
		Include *toolList `conf:"include"`
		Exclude *toolList `conf:"exclude"`
	}
	webhookDoc struct {
		URL     string      `conf:"url,required,max=2048"`
		Timeout int64       `conf:"timeout,min=1,max=300,default=30"`
		Headers headerMap   `conf:"headers"`
		Secret  secretValue `conf:"secret"`
	}
	telegramDoc struct {
		Enabled        bool        `conf:"enabled"`
		BotToken       secretValue `conf:"botToken"`
		ChatID         chatID      `conf:"chatId"`
		Timeout        int64       `conf:"timeout,min=1,max=3600,default=120"`
		AllowedUserIDs *userIDs    `conf:"allowedUserIds"`
	}
)

// CheckConf refuses include and exclude together.
func (s *scopeDoc) CheckConf(d *confdoc.Decoder, path string) {
	if s.Include != nil && s.Exclude != nil {
		d.Fail(path, errConflict, "include and exclude are mutually exclusive")
	}
}

// CheckConf: an enabled telegram verifier needs a bot, a chat and users.
func (t *telegramDoc) CheckConf(d *confdoc.Decoder, path string) {
	if !t.Enabled {
		return
	}
	switch {
	case !t.BotToken.isSet():
		d.Fail(jsonobj.Key(path, "botToken"), errBadValue, "is required when telegram is enabled")
	case t.ChatID == "":
		d.Fail(jsonobj.Key(path, "chatId"), errBadValue, "is required when telegram is enabled")
	case t.AllowedUserIDs == nil || len(*t.AllowedUserIDs) == 0:
		d.Fail(jsonobj.Key(path, "allowedUserIds"), errBadValue, "must list at least one user when telegram is enabled")
	}
}

// unsupported refuses its key.
type unsupported struct{}

func (unsupported) UnmarshalConf(d *confdoc.Decoder, _ *pohjson.Value, path string) {
	d.Fail(path, errUnknownKey, "not supported by the gate")
}

// profileName is tools.profile: one of profileNames.
type profileName string

func (p *profileName) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	s, ok := v.Str()
	if _, known := toolProfiles[s]; !ok || !known {
		d.Fail(path, errBadValue, "must be one of %s", strings.Join(profileNames(), ", "))
		return
	}
	*p = profileName(s)
}

// toolList is a list of tool names, group:* entries and globs; entries are
// normalized, validated and de-duplicated in order.
type toolList []string

func (l *toolList) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	var raw []string
	d.Decode(v, path, &raw)
	if len(raw) > maxListItems {
		d.Fail(path, errBadValue, "more than %d entries", maxListItems)
	}
	out := make([]string, 0, len(raw))
	for i, s := range raw {
		ep := jsonobj.Index(path, i)
		n := normalizeToolName(s)
		if strings.HasPrefix(n, "group:") {
			if _, ok := toolGroups[n]; !ok {
				d.Fail(ep, errBadValue, "unknown tool group")
				return
			}
		} else if !validToolName(n, true) {
			d.Fail(ep, errBadValue, "not a valid tool name (1-%d bytes of [a-z0-9_.:-*])", maxToolNameBytes)
			return
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	*l = out
}

// secretValue is a secret string: not empty, at most maxSecretBytes, and
// no unresolved ${...} placeholder.
type secretValue struct{ secretText }

func (s *secretValue) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	str, ok := v.Str()
	switch {
	case !ok:
		d.Fail(path, errWrongType, "not a string")
	case len(str) > maxSecretBytes:
		d.Fail(path, errBadValue, "longer than %d bytes", maxSecretBytes)
	case str == "":
		d.Fail(path, errBadValue, "must not be empty")
	case strings.Contains(str, "${"):
		d.Fail(path, errBadValue, "contains an unresolved ${...} placeholder")
	default:
		s.secretText = newSecret(str)
	}
}

// reservedHeaders may not be set through webhook.headers.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "X-Openclaw-Signature", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade"}

// headerMap is webhook.headers: at most maxHeaders valid header names (in
// canonical form, each once) to secret values without control characters.
type headerMap map[string]secretText

func (h *headerMap) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	if v.Kind() != pohjson.Object {
		d.Fail(path, errWrongType, "not an object")
		return
	}
	ms := v.Members()
	if len(ms) > maxHeaders {
		d.Fail(path, errBadValue, "more than %d headers", maxHeaders)
		return
	}
	out := make(headerMap, len(ms))
	for _, m := range ms {
		kp := jsonobj.Key(path, m.Key)
		if !validHeaderName(m.Key) {
			d.Fail(kp, errBadValue, "not a valid HTTP header name")
			return
		}
		name := textproto.CanonicalMIMEHeaderKey(m.Key)
		if slices.Contains(reservedHeaders, name) {
			d.Fail(kp, errBadValue, "header is set by the gate and cannot be configured")
			return
		}
		if _, dup := out[name]; dup {
			d.Fail(kp, errConflict, "header given twice (names are case-insensitive)")
			return
		}
		var val secretValue
		val.UnmarshalConf(d, m.Value, kp)
		if val.isSet() && !validHeaderValue(val.value()) {
			d.Fail(kp, errBadValue, "header value contains control characters")
		}
		out[name] = val.secretText
	}
	*h = out
}

// chatID is telegram.chatId: a string without URL metacharacters, or a
// non-zero integer.
type chatID string

func (c *chatID) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	switch v.Kind() {
	case pohjson.String:
		s, _ := v.Str()
		if s == "" || len(s) > maxChatIDBytes || strings.ContainsAny(s, "/?#%& \t\r\n") || !utf8.ValidString(s) {
			d.Fail(path, errBadValue, "not a valid chat id")
			return
		}
		*c = chatID(s)
	case pohjson.Number:
		n, ok := v.Int()
		if !ok || n == 0 {
			d.Fail(path, errBadValue, "not a valid chat id")
			return
		}
		*c = chatID(strconv.FormatInt(n, 10))
	default:
		d.Fail(path, errWrongType, "must be a string or an integer")
	}
}

// userIDs is telegram.allowedUserIds: positive user ids as integers or
// decimal strings, de-duplicated in order.
type userIDs []int64

func (u *userIDs) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	if v.Kind() != pohjson.Array {
		d.Fail(path, errWrongType, "not an array")
		return
	}
	es := v.Elems()
	if len(es) > maxAllowedUsers {
		d.Fail(path, errBadValue, "more than %d users", maxAllowedUsers)
		return
	}
	out := userIDs{}
	for i, e := range es {
		ep := jsonobj.Index(path, i)
		var id int64
		switch e.Kind() {
		case pohjson.Number:
			id, _ = e.Int()
		case pohjson.String:
			s, _ := e.Str()
			n, err := strconv.ParseInt(s, 10, 64)
			if err == nil && strconv.FormatInt(n, 10) == s {
				id = n
			}
		default:
			d.Fail(ep, errWrongType, "must be an integer")
			return
		}
		if id <= 0 {
			d.Fail(ep, errBadValue, "not a valid user id")
			return
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	*u = out
}

// build turns the decoded document into a Config, checking what spans
// keys or needs the options (webhook URLs, agent ids, gated tools).
func build(doc *configDoc, opts ParseOptions) (*Config, error) {
	b := &builder{opts: opts}
	c := b.config(doc)
	if b.err != nil {
		return nil, b.err
	}
	if err := validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

// builder keeps the first refusal of build.
type builder struct {
	opts ParseOptions
	err  error
}

// fail records a refusal at jsonobj path.
func (b *builder) fail(path string, sentinel error, format string, args ...any) {
	if b.err == nil {
		b.err = cfgErr(confdoc.KeyOf(path), sentinel, format, args...)
	}
}

func (b *builder) config(doc *configDoc) *Config {
	c := &Config{GatedTools: slices.Clone(defaultGatedTools), Development: b.opts.Development}
	if a := doc.Agents; a != nil {
		if a.Defaults != nil && a.Defaults.Sig != nil {
			sig := b.sig("$.agents.defaults.sig", a.Defaults.Sig)
			if sig.EnforceVerification != nil {
				c.EnforceVerification = *sig.EnforceVerification
			}
			if sig.GatedTools != nil {
				c.GatedTools = sig.GatedTools
			}
		}
		c.Agents = b.agents("$.agents.list", a.List)
	}
	if t := doc.Tools; t != nil {
		var ver *verifierConfig
		c.Tools, ver = b.tools("$.tools", t)
		if ver != nil {
			c.Verifier = *ver
		}
	}
	return c
}

func (b *builder) sig(path string, s *sigDoc) sigConfig {
	out := sigConfig{EnforceVerification: s.EnforceVerification}
	if s.GatedTools != nil {
		if slices.Contains(*s.GatedTools, verifyToolName) {
			b.fail(jsonobj.Key(path, "gatedTools"), errBadValue, "must not contain the verify tool (it could never be unblocked)")
		}
		out.GatedTools = []string(*s.GatedTools)
	}
	return out
}

func (b *builder) tools(path string, t *toolsDoc) (toolPolicy, *verifierConfig) {
	var tp toolPolicy
	if t.Profile != nil {
		tp.Profile = string(*t.Profile)
	}
	if t.Allow != nil {
		tp.Allow = []string(*t.Allow)
	}
	if t.Deny != nil {
		tp.Deny = []string(*t.Deny)
	}
	if t.Verifier == nil {
		return tp, nil
	}
	v := t.Verifier
	vc := &verifierConfig{Enabled: v.Enabled, FailMode: v.FailMode}
	if v.Scope != nil {
		vc.Scope = &scope{}
		if v.Scope.Include != nil {
			vc.Scope.Include = []string(*v.Scope.Include)
		}
		if v.Scope.Exclude != nil {
			vc.Scope.Exclude = []string(*v.Scope.Exclude)
		}
	}
	if w := v.Webhook; w != nil {
		up := jsonobj.Key(jsonobj.Key(jsonobj.Key(path, "verifier"), "webhook"), "url")
		b.checkURL(up, w.URL)
		vc.Webhook = &webhookConfig{URL: w.URL, Timeout: time.Duration(w.Timeout) * time.Second, Headers: w.Headers, Secret: w.Secret.secretText}
	}
	if tg := v.Telegram; tg != nil {
		if tg.BotToken.isSet() && !validBotToken(tg.BotToken.value()) {
			b.fail(jsonobj.Key(jsonobj.Key(jsonobj.Key(path, "verifier"), "telegram"), "botToken"), errBadValue, "not a Telegram bot token")
		}
		tc := &telegramConfig{Enabled: tg.Enabled, BotToken: tg.BotToken.secretText, ChatID: string(tg.ChatID), Timeout: time.Duration(tg.Timeout) * time.Second}
		if tg.AllowedUserIDs != nil {
			tc.AllowedUserIDs = []int64(*tg.AllowedUserIDs)
		}
		vc.Telegram = tc
	}
	return tp, vc
}

func (b *builder) checkURL(path, raw string) {
	if strings.Contains(raw, "${") {
		b.fail(path, errBadValue, "contains an unresolved ${...} placeholder")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		b.fail(path, errBadValue, "must be an absolute http(s) URL")
		return
	}
	if u.User != nil {
		b.fail(path, errBadValue, "must not contain credentials (use headers)")
		return
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		b.fail(path, errBadValue, "must not contain a fragment")
		return
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !b.opts.Development {
			b.fail(path, errInsecureURL, "must use https outside development mode")
			return
		}
		logger(b.opts.Logger).Warn("gate: webhook url uses http; accepted in development mode only", "key", confdoc.KeyOf(path))
	default:
		b.fail(path, errBadValue, "must be an absolute http(s) URL")
	}
}

// headerNameChars are the token characters of RFC 9110 section 5.6.2.
var headerNameChars = charclass.Alnum().Or(charclass.Of("!#$%&'*+-.^_`|~"))

func validHeaderName(s string) bool {
	return s != "" && len(s) <= maxHeaderNameBytes && headerNameChars.All(s)
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

// botSecretChars are the bytes after the colon of a Bot API token.
var botSecretChars = charclass.Alnum().Or(charclass.Of("_-"))

// validBotToken accepts the Bot API token shape <digits>:<[A-Za-z0-9_-]+>,
// which also keeps the token safe inside a URL path.
func validBotToken(s string) bool {
	id, rest, ok := strings.Cut(s, ":")
	if !ok || id == "" || rest == "" || len(id) > 20 {
		return false
	}
	return charclass.Digit().All(id) && botSecretChars.All(rest)
}

func (b *builder) agents(path string, list []agentDoc) []agentConfig {
	out := make([]agentConfig, 0, len(list))
	for i, e := range list {
		ap := jsonobj.Index(path, i)
		idp := jsonobj.Key(ap, "id")
		a := agentConfig{ID: e.ID}
		if !validAgentID(a.ID) {
			b.fail(idp, errBadValue, "not a valid agent id (1-%d bytes of [a-z0-9_-])", maxAgentIDBytes)
		}
		for _, prev := range out {
			if prev.ID == a.ID {
				b.fail(idp, errConflict, "duplicate agent id")
			}
		}
		if e.Tools != nil {
			a.Tools, a.Verifier = b.tools(jsonobj.Key(ap, "tools"), e.Tools)
		}
		if e.Sig != nil {
			a.Sig = b.sig(jsonobj.Key(ap, "sig"), e.Sig)
		}
		out = append(out, a)
	}
	return out
}

// defaultAgentID is OpenClaw's default agent id, used for calls without one.
const defaultAgentID = "main"

// agentIDChars are the bytes of a normalized agent id.
var agentIDChars = charclass.Lower().Or(charclass.Digit(), charclass.Of("_-"))

func validAgentID(s string) bool {
	return s != "" && len(s) <= maxAgentIDBytes && agentIDChars.All(s)
}

// validate checks rules that span keys: an enabled verifier needs a backend,
// globally and for every agent's effective verifier.
func validate(c *Config) error {
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
		return cfgErr(path, errBadValue, "enabled but neither a webhook nor an enabled telegram verifier is configured")
	}
	return nil
}

// effectiveVerifierConfig is the verifier configuration that applies to one
// agent after merging the global and per-agent settings.
type effectiveVerifierConfig struct {
	Enabled  bool
	Scope    scope
	FailMode failMode
	Webhook  *webhookConfig
	Telegram *telegramConfig
}

// mergeVerifier applies a per-agent override (nil for none) to the global
// verifier. Every key the agent sets replaces the global one, except
// failMode, where the most restrictive wins: the effective mode is allow only
// when the global mode is explicitly allow and the agent does not say deny.
func mergeVerifier(global verifierConfig, agent *verifierConfig) effectiveVerifierConfig {
	e := effectiveVerifierConfig{
		Enabled:  global.Enabled != nil && *global.Enabled,
		Webhook:  global.Webhook,
		Telegram: global.Telegram,
		FailMode: failDeny,
	}
	if global.Scope != nil {
		e.Scope = *global.Scope
	}
	agentMode := failMode("")
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
	if global.FailMode == failAllow && agentMode != failDeny {
		e.FailMode = failAllow
	}
	return e
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
