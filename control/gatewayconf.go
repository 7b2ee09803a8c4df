package control

import (
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
)

// gatewayDoc declares attester.gateway (docs/spec/model-gateway.md
// section 7).
type gatewayDoc struct {
	Upstreams          map[string]upstreamDoc `conf:"upstreams,max=64"`
	MaxSessions        int                    `conf:"maxSessions,min=1,max=65536,default=1024"`
	MaxHistoryMessages int                    `conf:"maxHistoryMessages,min=1,max=1000,default=1000"`
	MaxSuffixBytes     int                    `conf:"maxSuffixBytes,min=0,max=65536,default=8192"`
	MaxCallsPerRun     int                    `conf:"maxCallsPerRun,min=1,max=1000,default=1000"`
}

// upstreamDoc declares attester.gateway.upstreams.<provider>.
type upstreamDoc struct {
	API              string `conf:"api,required,enum=openai-chat-completions|anthropic-messages"`
	BaseURL          string `conf:"baseUrl,required,min=1,max=2048"`
	Local            bool   `conf:"local"`
	UnixSocket       string `conf:"unixSocket,max=100"`
	APIKey           string `conf:"apiKey,max=4096"`
	AttestedAs       string `conf:"attestedAs,max=64"`
	AnthropicVersion string `conf:"anthropicVersion,min=1,max=64,default=2023-06-01"`
	ConnectTimeoutMs int64  `conf:"connectTimeoutMs,min=100,max=120000,default=10000"`
	HeaderTimeoutMs  int64  `conf:"headerTimeoutMs,min=100,max=600000,default=120000"`
	IdleTimeoutMs    int64  `conf:"idleTimeoutMs,min=100,max=600000,default=60000"`
	TotalTimeoutMs   int64  `conf:"totalTimeoutMs,min=1000,max=3600000,default=600000"`
	MaxRequestBytes  int64  `conf:"maxRequestBytes,min=1024,max=67108864,default=8388608"`
	MaxResponseBytes int64  `conf:"maxResponseBytes,min=1024,max=268435456,default=33554432"`
	MaxEventBytes    int    `conf:"maxEventBytes,min=1024,max=16777216,default=1048576"`
	MaxConcurrent    int    `conf:"maxConcurrent,min=1,max=4096,default=64"`
}

// providerName is the form of an upstream's name (the {provider} path
// segment) and of attestedAs.
var (
	providerName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	attestedName = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
)

// CheckConf checks the names and the URLs of the upstreams (the URLs as
// gateway.New does, which dials nothing and writes nothing).
func (g *gatewayDoc) CheckConf(d *confdoc.Decoder, path string) {
	ups := jsonobj.Key(path, "upstreams")
	for _, name := range slices.Sorted(maps.Keys(g.Upstreams)) {
		if !providerName.MatchString(name) {
			d.Fail(jsonobj.Key(ups, name), confdoc.ErrBadValue, "an upstream's name must be 1-64 of a-z 0-9 _ -")
		}
		if as := g.Upstreams[name].AttestedAs; as != "" && !attestedName.MatchString(as) {
			d.Fail(jsonobj.Key(jsonobj.Key(ups, name), "attestedAs"), confdoc.ErrBadValue, "must be 1-64 of a-z 0-9 _ - .")
		}
	}
	if _, err := gateway.New(g.config(), "", nil); err != nil {
		d.Fail(ups, confdoc.ErrBadValue, "%v", err)
	}
}

// config is the gateway's configuration.
func (g *gatewayDoc) config() gateway.Config {
	c := gateway.Config{
		Upstreams: map[string]gateway.Upstream{}, MaxSessions: g.MaxSessions,
		MaxHistoryMessages: g.MaxHistoryMessages, MaxSuffixBytes: g.MaxSuffixBytes, MaxCallsPerRun: g.MaxCallsPerRun,
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for name, u := range g.Upstreams {
		c.Upstreams[name] = gateway.Upstream{
			API: u.API, BaseURL: u.BaseURL, Local: u.Local, UnixSocket: u.UnixSocket, APIKey: u.APIKey,
			AttestedAs: u.AttestedAs, AnthropicVersion: u.AnthropicVersion,
			ConnectTimeout: ms(u.ConnectTimeoutMs), HeaderTimeout: ms(u.HeaderTimeoutMs),
			IdleTimeout: ms(u.IdleTimeoutMs), TotalTimeout: ms(u.TotalTimeoutMs),
			MaxRequestBytes: u.MaxRequestBytes, MaxResponseBytes: u.MaxResponseBytes,
			MaxEventBytes: u.MaxEventBytes, MaxConcurrent: u.MaxConcurrent,
		}
	}
	return c
}
