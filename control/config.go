package control

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// DefaultMaxConnections is attester.maxConnections' default.
const DefaultMaxConnections = 500

// MaxConfigBytes bounds the configuration file.
const MaxConfigBytes = 1 << 20

// MaxSmallBody bounds every request body but a run creation's, a tool
// call's and an attestation's.
const MaxSmallBody = 64 << 10

// MaxCreateBody bounds a run creation's body (POST /v1/runs): the pack in
// b64u plus the rest.
func (c *Config) MaxCreateBody() int64 { return c.MaxPackBytes*4/3 + 4 + MaxSmallBody }

// uploadCost is what one run creation of a pack of at most maxPack bytes
// may hold at once: the body, its parsed copy, the decoded pack and its
// plaintext.
func uploadCost(maxPack int64) int64 { return 4 * (maxPack*4/3 + 4 + MaxSmallBody) }

// Config is the "attester" section of the configuration file
// (docs/spec/attester-api.md). The rest of the file holds the OpenClaw keys
// the tool-call gate reads (agents.*, tools.*), validated by package gate.
type Config struct {
	// Listen is the TCP address of the public API: identity, healthz and
	// readyz only (default 127.0.0.1:8443).
	Listen string
	// MetricsListen is the TCP address of GET /metrics (default
	// 127.0.0.1:9464).
	MetricsListen string
	// ControlSocket is the unix socket of the control API (runs, turns,
	// verify, tool calls, audit, attestation, and the rebuilt prompt). Its
	// directory is mode 0700 and owned by the attester. Required.
	ControlSocket string
	// ControlUIDs lists the peer uids (SO_PEERCRED) allowed on the control
	// socket; default: only the attester's own uid.
	ControlUIDs []int
	// Owners lists the owner identities as "channel:sender_id" (for example
	// "telegram:123456"). A turn is an owner turn only when its channel and
	// sender are listed.
	Owners []string
	// MaxTurnsPerRun, MaxOwnerMessagesPerRun and MaxToolCallsPerRun bound a
	// run's state (defaults 4096, 256, 65536).
	MaxTurnsPerRun         int
	MaxOwnerMessagesPerRun int
	MaxToolCallsPerRun     int
	// UploadBudgetBytes bounds the memory held by run creations in flight
	// (default: two uploads of maxPackBytes); a creation that does not fit gets 503.
	UploadBudgetBytes int64
	// TPM configures the tpm platform.
	TPM TPMConfig
	// Platform is auto, sev-snp, tdx, tpm or simulated (default auto).
	Platform string
	// StateDir holds the sealed identity blob (optional: without it the
	// identity is ephemeral).
	StateDir string
	// AllowUnlockedMemory permits sealed buffers without mlock/memfd_secret.
	AllowUnlockedMemory bool
	// TrustedTemplates pins the harness template hashes (file name ->
	// "sha256:<hex>"). Required: a pack's templates are refused unless listed.
	TrustedTemplates map[string]string
	// MaxPackBytes bounds an uploaded prompt_pack.enc (default 64 MiB).
	MaxPackBytes int64
	// MaxRuns bounds concurrently open runs (default 64).
	MaxRuns int
	// MaxConnections bounds the connections each listener holds (public,
	// metrics, control socket; default 500). See ConnLimiter.
	MaxConnections int
	// Development relaxes checks meant for production (http webhooks).
	Development bool
	// ModelProvider and Model identify the model the agent uses; they are
	// committed in measurements.model_weights_digest_b64u.
	ModelProvider string
	Model         string
	// AdmissionPolicy, when set (attester.admissionPolicy: an absolute path
	// to the policy file, or the policy inline as an object), is applied
	// to every run at creation (docs/spec/admission-policy-v1.md section 9),
	// and its hash and sensitive flag are committed in the run's
	// attestation. Nil: no admission policy, and runs are attested as not
	// sensitive.
	AdmissionPolicy *admission.Policy

	owners   map[string]struct{}
	uidAllow map[int]struct{}
}

// TPMConfig is attester.tpm.
type TPMConfig struct {
	// Address is the host:port of a swtpm TCP data socket, for development
	// only: the evidence is marked simulated. It requires platform "tpm".
	Address string
}

// SetPlatform overrides attester.platform (the --platform flag) and checks
// the result as ParseConfig would.
func (c *Config) SetPlatform(name string) error {
	c.Platform = name
	return c.validate()
}

// ControlUIDAllowed reports whether a peer of uid may use the control API
// (attester.controlUids).
func (c *Config) ControlUIDAllowed(uid int) bool {
	_, ok := c.uidAllow[uid]
	return ok
}

// owner returns whether channel:sender is a configured owner.
func (c *Config) owner(channel, sender string) bool {
	_, ok := c.owners[channel+":"+sender]
	return ok
}

// ConfigError names the key that is wrong.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string { return "config: " + e.Key + ": " + e.Msg }

// ErrConfig is matched by every *ConfigError.
var ErrConfig = errors.New("config error")

func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

var sha256Tagged = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ConfigOptions inject the environment for ${...} references (tests).
type ConfigOptions struct {
	// Logger receives the gate's development-mode warning; nil discards.
	Logger *slog.Logger
	// LookupEnv resolves ${VAR}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ReadFile resolves ${file:/path}; nil means a bounded read of the file.
	ReadFile func(string) ([]byte, error)
}

// ParseConfig parses the configuration file once, strictly (schema/jsonobj:
// duplicate keys refused, keys case-sensitive, nothing after the document),
// resolves ${VAR} and ${file:/path} references in string values, and
// returns the attester section and the gate's configuration (agents and
// tools, read by package gate from the same tree). Every error is a
// *ConfigError naming its key; no value (and no resolved secret) is ever
// quoted. Nothing else reads the file: all configuration errors surface
// here, before the platform is opened or the identity unsealed.
func ParseConfig(data []byte) (*Config, *gate.Config, error) {
	return ParseConfigWith(data, ConfigOptions{})
}

// ParseConfigWith is ParseConfig with options.
func ParseConfigWith(data []byte, o ConfigOptions) (*Config, *gate.Config, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ReadFile == nil {
		o.ReadFile = readFileBounded
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxConfigBytes, MaxDepth: 16, AllowFloats: true})
	if err != nil {
		return nil, nil, pathErr(err, "(file)", "not one strict JSON object: "+syntaxReason(err))
	}
	root, err = resolveRefs(root, jsonobj.Root, o)
	if err != nil {
		return nil, nil, err
	}
	var r jsonobj.Reader
	top := r.Object(root, jsonobj.Root, map[string]bool{"attester": true, "agents": false, "tools": false})
	if err := r.Err(); err != nil {
		return nil, nil, pathErr(err, "", "unknown top-level key (want attester, agents, tools) or missing attester section")
	}
	c, err := readAttester(top["attester"])
	if err != nil {
		return nil, nil, err
	}
	if v := top["attester"].Get("admissionPolicy"); v != nil {
		if c.AdmissionPolicy, err = readAdmissionPolicy(v, o); err != nil {
			return nil, nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	gc, err := gate.ParseConfigValue(root, gate.ParseOptions{Development: c.Development, AllowForeignKeys: true, Logger: o.Logger})
	if err != nil {
		var ge *gate.ConfigError
		if errors.As(err, &ge) {
			return nil, nil, &ConfigError{Key: ge.Key, Msg: ge.Err.Error() + ": " + ge.Msg}
		}
		return nil, nil, &ConfigError{Key: "(gate)", Msg: err.Error()}
	}
	return c, gc, nil
}

// pathErr turns a jsonobj error into a ConfigError naming its key.
func pathErr(err error, fallbackKey, msg string) error {
	var pe *jsonobj.PathError
	key := fallbackKey
	if errors.As(err, &pe) && pe.Path != jsonobj.Root {
		key = strings.TrimPrefix(strings.TrimPrefix(pe.Path, jsonobj.Root), ".")
		switch {
		case errors.Is(err, jsonobj.ErrUnknownField):
			msg = "unknown key"
		case errors.Is(err, jsonobj.ErrMissingField):
			msg = "required"
		case errors.Is(err, jsonobj.ErrWrongType):
			msg = "wrong type or value"
		case errors.Is(err, jsonobj.ErrTooLarge):
			msg = "too large"
		}
	}
	return &ConfigError{Key: key, Msg: msg}
}

func syntaxReason(err error) string {
	var pe *pohjson.Error
	switch {
	case errors.Is(err, pohjson.ErrDuplicateKey):
		if errors.As(err, &pe) {
			return fmt.Sprintf("duplicate key at offset %d", pe.Offset)
		}
		return "duplicate key"
	case errors.Is(err, jsonobj.ErrTooLarge):
		return fmt.Sprintf("larger than %d bytes", MaxConfigBytes)
	case errors.As(err, &pe):
		return fmt.Sprintf("%v at offset %d", pe.Err, pe.Offset)
	}
	return "invalid JSON"
}

// readAttester reads the attester section member by member.
func readAttester(v *pohjson.Value) (*Config, error) {
	const p = "$.attester"
	var r jsonobj.Reader
	m := r.Object(v, p, map[string]bool{
		"listen": false, "metricsListen": false, "controlSocket": false, "controlUids": false, "owners": false,
		"maxTurnsPerRun": false, "maxOwnerMessagesPerRun": false, "maxToolCallsPerRun": false, "uploadBudgetBytes": false,
		"tpm": false, "platform": false, "stateDir": false, "allowUnlockedMemory": false, "trustedTemplates": false,
		"maxPackBytes": false, "maxRuns": false, "maxConnections": false, "development": false, "modelProvider": false, "model": false,
		"admissionPolicy": false, // read by readAdmissionPolicy
	})
	str := func(k string) string {
		s, _ := r.Str(m[k], jsonobj.Key(p, k))
		return s
	}
	c := &Config{
		Listen: str("listen"), MetricsListen: str("metricsListen"), ControlSocket: str("controlSocket"),
		Platform: str("platform"), StateDir: str("stateDir"), ModelProvider: str("modelProvider"), Model: str("model"),
		AllowUnlockedMemory: r.Bool(m["allowUnlockedMemory"], jsonobj.Key(p, "allowUnlockedMemory")),
		Development:         r.Bool(m["development"], jsonobj.Key(p, "development")),
	}
	ints := []struct {
		k   string
		dst *int
	}{{"maxTurnsPerRun", &c.MaxTurnsPerRun}, {"maxOwnerMessagesPerRun", &c.MaxOwnerMessagesPerRun}, {"maxToolCallsPerRun", &c.MaxToolCallsPerRun}, {"maxRuns", &c.MaxRuns}, {"maxConnections", &c.MaxConnections}}
	for _, f := range ints {
		*f.dst = int(r.Int(m[f.k], jsonobj.Key(p, f.k), -1<<31, 1<<31-1))
	}
	c.MaxPackBytes = r.Int(m["maxPackBytes"], jsonobj.Key(p, "maxPackBytes"), -1<<62, 1<<62)
	c.UploadBudgetBytes = r.Int(m["uploadBudgetBytes"], jsonobj.Key(p, "uploadBudgetBytes"), -1<<62, 1<<62)
	if v := m["controlUids"]; v != nil {
		c.ControlUIDs = []int{}
		for i, e := range r.Array(v, jsonobj.Key(p, "controlUids"), 1, 64) {
			c.ControlUIDs = append(c.ControlUIDs, int(r.Int(e, jsonobj.Index(jsonobj.Key(p, "controlUids"), i), -1, 1<<31-1)))
		}
	}
	if v := m["owners"]; v != nil {
		c.Owners = r.Strings(v, jsonobj.Key(p, "owners"), 0, 1024, maxChannelBytes+1+maxSenderIDBytes)
	}
	if v := m["tpm"]; v != nil {
		tm := r.Object(v, jsonobj.Key(p, "tpm"), map[string]bool{"address": false})
		c.TPM.Address, _ = r.Str(tm["address"], jsonobj.Key(jsonobj.Key(p, "tpm"), "address"))
	}
	if v := m["trustedTemplates"]; v != nil {
		c.TrustedTemplates = map[string]string{}
		for _, mm := range r.Members(v, jsonobj.Key(p, "trustedTemplates"), 0, 4096) {
			c.TrustedTemplates[mm.Key], _ = r.Str(mm.Value, jsonobj.Key(jsonobj.Key(p, "trustedTemplates"), mm.Key))
		}
	}
	if err := r.Err(); err != nil {
		return nil, pathErr(err, "attester", "invalid")
	}
	return c, nil
}

// readAdmissionPolicy reads attester.admissionPolicy: an absolute path to
// an admission policy file, or the policy inline as an object. A policy
// that does not parse is a configuration error naming its JSON path.
func readAdmissionPolicy(v *pohjson.Value, o ConfigOptions) (*admission.Policy, error) {
	const key = "attester.admissionPolicy"
	var data []byte
	switch v.Kind() {
	case pohjson.String:
		path, _ := v.Str()
		if !filepath.IsAbs(path) {
			return nil, &ConfigError{Key: key, Msg: "want an absolute path to an admission policy file, or the policy as an object"}
		}
		var err error
		if data, err = o.ReadFile(path); err != nil {
			if tl, ok := errors.AsType[*bounded.TooLargeError](err); ok {
				return nil, &ConfigError{Key: key, Msg: fmt.Sprintf("the admission policy file is larger than %d bytes", tl.Limit)}
			}
			return nil, &ConfigError{Key: key, Msg: fmt.Sprintf("cannot read the admission policy file: %v", errors.Unwrap(err))}
		}
	case pohjson.Object:
		var err error
		if data, err = pohjson.Stringify(v); err != nil {
			return nil, &ConfigError{Key: key, Msg: "cannot encode the inline admission policy"}
		}
	default:
		return nil, &ConfigError{Key: key, Msg: "want an absolute path to an admission policy file, or the policy as an object"}
	}
	if len(data) > admission.MaxPolicySize {
		return nil, &ConfigError{Key: key, Msg: fmt.Sprintf("the admission policy is larger than %d bytes", admission.MaxPolicySize)}
	}
	p, err := admission.Parse(data)
	if err != nil {
		return nil, &ConfigError{Key: key, Msg: "not a valid admission policy: " + err.Error()}
	}
	return p, nil
}

// A string value may reference a secret instead of holding it:
// ${NAME} (NAME: [A-Z_][A-Z0-9_]*) is the environment variable NAME, and
// ${file:/absolute/path} the content of that file without one trailing
// newline. "$${" is a literal "${". Anything else after "${", an unset
// variable or an unreadable file is an error naming the key; the resolved
// value is never quoted in an error.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// maxRefBytes bounds a value read through ${file:...}.
const maxRefBytes = 64 << 10

// readFileBounded reads a file the configuration names, at most the size
// of the largest one it may name (an admission policy), so that an
// oversize or endless file (a FIFO, /dev/zero) is refused without being
// read whole.
func readFileBounded(path string) ([]byte, error) {
	return bounded.ReadFile(path, int64(max(admission.MaxPolicySize, maxRefBytes)))
}

func resolveRefs(v *pohjson.Value, path string, o ConfigOptions) (*pohjson.Value, error) {
	switch v.Kind() {
	case pohjson.Object:
		ms := v.Members()
		out := make([]pohjson.Member, len(ms))
		for i, m := range ms {
			rv, err := resolveRefs(m.Value, jsonobj.Key(path, m.Key), o)
			if err != nil {
				return nil, err
			}
			out[i] = pohjson.M(m.Key, rv)
		}
		return pohjson.NewObject(out...), nil
	case pohjson.Array:
		es := v.Elems()
		out := make([]*pohjson.Value, len(es))
		for i, e := range es {
			rv, err := resolveRefs(e, jsonobj.Index(path, i), o)
			if err != nil {
				return nil, err
			}
			out[i] = rv
		}
		return pohjson.NewArray(out...), nil
	case pohjson.String:
		s, _ := v.Str()
		if !strings.Contains(s, "${") {
			return v, nil
		}
		r, err := resolveString(s, o)
		if err != nil {
			return nil, &ConfigError{Key: strings.TrimPrefix(strings.TrimPrefix(path, jsonobj.Root), "."), Msg: err.Error()}
		}
		return pohjson.NewString(r), nil
	}
	return v, nil
}

func resolveString(s string, o ConfigOptions) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("unterminated ${ reference")
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		if path, ok := strings.CutPrefix(ref, "file:"); ok {
			if !filepath.IsAbs(path) {
				return "", errors.New("${file:...} needs an absolute path")
			}
			data, err := o.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("cannot read the file named by ${file:...}: %w", errors.Unwrap(err))
			}
			if len(data) > maxRefBytes {
				return "", fmt.Errorf("the file named by ${file:...} is larger than %d bytes", maxRefBytes)
			}
			data = bytes.TrimSuffix(data, []byte("\n"))
			b.Write(data)
			continue
		}
		if !envName.MatchString(ref) {
			return "", errors.New("malformed ${...} reference (want ${NAME} or ${file:/path})")
		}
		val, ok := o.LookupEnv(ref)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", ref)
		}
		b.WriteString(val)
	}
}

func (c *Config) validate() error {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8443"
	}
	if c.Platform == "" {
		c.Platform = "auto"
	}
	switch c.Platform {
	case "auto", "sev-snp", "tdx", "tpm", "simulated":
	default:
		return &ConfigError{Key: "attester.platform", Msg: fmt.Sprintf("unknown platform %q (want auto, sev-snp, tdx, tpm or simulated)", c.Platform)}
	}
	if c.MetricsListen == "" {
		c.MetricsListen = "127.0.0.1:9464"
	}
	if c.ControlSocket == "" {
		return &ConfigError{Key: "attester.controlSocket", Msg: "required"}
	}
	if !filepath.IsAbs(c.ControlSocket) || filepath.Clean(c.ControlSocket) != c.ControlSocket || len(c.ControlSocket) > 100 {
		return &ConfigError{Key: "attester.controlSocket", Msg: "must be a clean absolute path of at most 100 bytes"}
	}
	if c.ControlUIDs == nil {
		c.ControlUIDs = []int{os.Geteuid()}
	}
	c.uidAllow = map[int]struct{}{}
	for i, u := range c.ControlUIDs {
		if u < 0 || u > 1<<31-2 {
			return &ConfigError{Key: fmt.Sprintf("attester.controlUids[%d]", i), Msg: "not a uid"}
		}
		c.uidAllow[u] = struct{}{}
	}
	c.owners = map[string]struct{}{}
	for i, o := range c.Owners {
		key := fmt.Sprintf("attester.owners[%d]", i)
		ch, sender, ok := strings.Cut(o, ":")
		if !ok || ValidChannel(ch) != nil || ValidSenderID(sender) != nil {
			return &ConfigError{Key: key, Msg: `want "channel:sender_id" (channel: 1-64 of a-z 0-9 _ -; sender_id: 1-256 bytes of UTF-8 without control characters)`}
		}
		if _, dup := c.owners[o]; dup {
			return &ConfigError{Key: key, Msg: "listed twice"}
		}
		c.owners[o] = struct{}{}
	}
	if c.TPM.Address != "" {
		if c.Platform != "tpm" {
			return &ConfigError{Key: "attester.tpm.address", Msg: `requires platform "tpm" (development only: evidence from a TCP TPM is marked simulated)`}
		}
		if _, _, err := net.SplitHostPort(c.TPM.Address); err != nil {
			return &ConfigError{Key: "attester.tpm.address", Msg: "want host:port"}
		}
	}
	if len(c.TrustedTemplates) == 0 {
		return &ConfigError{Key: "attester.trustedTemplates", Msg: "required: list the template hashes this attester accepts"}
	}
	for name, h := range c.TrustedTemplates {
		if !sha256Tagged.MatchString(h) {
			return &ConfigError{Key: jsonobj.Key("attester.trustedTemplates", name), Msg: `want "sha256:" and 64 lower-case hex digits`}
		}
	}
	if c.MaxPackBytes == 0 {
		c.MaxPackBytes = 64 << 20
	}
	if c.MaxPackBytes < 1<<10 || c.MaxPackBytes > 256<<20 {
		return &ConfigError{Key: "attester.maxPackBytes", Msg: "must be between 1 KiB and 256 MiB"}
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = 64
	}
	if c.MaxRuns < 1 || c.MaxRuns > 4096 {
		return &ConfigError{Key: "attester.maxRuns", Msg: "must be between 1 and 4096"}
	}
	for _, l := range []struct {
		key string
		v   *int
		def int
		max int
	}{
		{"attester.maxTurnsPerRun", &c.MaxTurnsPerRun, 4096, 1 << 20},
		{"attester.maxOwnerMessagesPerRun", &c.MaxOwnerMessagesPerRun, 256, 1 << 16},
		{"attester.maxToolCallsPerRun", &c.MaxToolCallsPerRun, 65536, 1 << 24},
		{"attester.maxConnections", &c.MaxConnections, DefaultMaxConnections, 65536},
	} {
		if *l.v == 0 {
			*l.v = l.def
		}
		if *l.v < 1 || *l.v > l.max {
			return &ConfigError{Key: l.key, Msg: fmt.Sprintf("must be between 1 and %d", l.max)}
		}
	}
	if c.UploadBudgetBytes == 0 {
		c.UploadBudgetBytes = 2 * uploadCost(c.MaxPackBytes)
	}
	if c.UploadBudgetBytes < uploadCost(c.MaxPackBytes) || c.UploadBudgetBytes > 16<<30 {
		return &ConfigError{Key: "attester.uploadBudgetBytes", Msg: fmt.Sprintf("must be between %d (one upload of maxPackBytes) and 16 GiB", uploadCost(c.MaxPackBytes))}
	}
	if c.Model == "" || c.ModelProvider == "" {
		return &ConfigError{Key: "attester.model", Msg: "model and modelProvider are required: the attestation commits to the model identity"}
	}
	return nil
}
