package control

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

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
// (docs/spec/attester-api.md section 7), checked and with its defaults
// applied. The keys, their ranges and defaults are declared once, in
// attesterDoc. The rest of the file holds the OpenClaw keys the tool-call
// gate reads (agents.*, tools.*), validated by package gate.
type Config struct {
	// Listen is the TCP address of the public API: identity, healthz and
	// readyz only.
	Listen string
	// MetricsListen is the TCP address of GET /metrics.
	MetricsListen string
	// ControlSocket is the unix socket of the control API (runs, turns,
	// verify, tool calls, audit, attestation, and the rebuilt prompt). Its
	// directory is mode 0700 and owned by the attester.
	ControlSocket string
	// ControlUIDs lists the peer uids (SO_PEERCRED) allowed on the control
	// socket; by default only the attester's own uid.
	ControlUIDs []int
	// Owners lists the owner identities as "channel:sender_id" (for example
	// "telegram:123456"). A turn is an owner turn only when its channel and
	// sender are listed.
	Owners []string
	// MaxTurnsPerRun, MaxOwnerMessagesPerRun and MaxToolCallsPerRun bound a
	// run's state.
	MaxTurnsPerRun         int
	MaxOwnerMessagesPerRun int
	MaxToolCallsPerRun     int
	// UploadBudgetBytes bounds the memory held by run creations in flight
	// (by default two uploads of MaxPackBytes); a creation that does not
	// fit gets 503.
	UploadBudgetBytes int64
	// TPM configures the tpm platform.
	TPM tpmConfig
	// Platform is auto, sev-snp, tdx, tpm or simulated.
	Platform string
	// GPU is off, required (NVIDIA GPU evidence through NVML for every
	// GPU, refused when confidential computing is off or the build has no
	// nvml tag) or simulated (the fake GPU; platform simulated only).
	GPU string
	// StateDir holds the sealed identity blob (optional: without it the
	// identity is ephemeral).
	StateDir string
	// AllowUnlockedMemory permits sealed buffers without mlock/memfd_secret.
	AllowUnlockedMemory bool
	// TrustedTemplates pins the harness template hashes (file name ->
	// "sha256:<hex>"): a pack's templates are refused unless listed.
	TrustedTemplates map[string]string
	// MaxPackBytes bounds an uploaded prompt_pack.enc.
	MaxPackBytes int64
	// MaxRuns bounds concurrently open runs.
	MaxRuns int
	// MaxConnections bounds the connections each listener holds (public,
	// metrics, control socket). See ConnLimiter.
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
	// Gateway configures the model gateway (attester.gateway,
	// docs/spec/model-gateway.md section 7); nil: no upstream, every model
	// call is refused.
	Gateway *gateway.Config

	owners   map[string]struct{}
	uidAllow map[int]struct{}
}

// tpmConfig is attester.tpm.
type tpmConfig struct {
	// Address is the host:port of a swtpm TCP data socket, for development
	// only: the evidence is marked simulated. It requires platform "tpm",
	// "azure-snp" or "azure-tdx" (then a fake paravisor in front of swtpm).
	Address string `conf:"address"`
	// AzureIMDS is the base URL of the Azure instance metadata service,
	// for development only (a fake one): it requires Address. Default
	// http://169.254.169.254.
	AzureIMDS string `conf:"azureImds,max=200"`
	// PCRs is the SHA-256 PCR selection the TPM quotes, seals to and
	// measures (platform-tpm.md section 1); default PCRs 0-7. It requires
	// platform "tpm" or "auto": Azure's paravisor quotes its own selection.
	// A pinned measurement needs PCRs 0..n-1; 0-9 covers the boot loader's
	// kernel command line and initrd as well.
	PCRs []int `conf:"pcrs,min=1,max=24,unique"`
}

// fileDoc declares the configuration file: the attester section, and the
// sections package gate reads from the same tree (agents, tools). Any
// other top-level key is refused.
type fileDoc struct {
	Attester attesterDoc    `conf:"attester,required"`
	Agents   *pohjson.Value `conf:"agents"`
	Tools    *pohjson.Value `conf:"tools"`
}

// attesterDoc declares the attester section (docs/spec/attester-api.md
// section 7): every key, its range and its default. A default applies
// only when its key is absent. CheckConf checks the values the tags
// cannot express.
type attesterDoc struct {
	Listen                 string            `conf:"listen,default=127.0.0.1:8443"`
	MetricsListen          string            `conf:"metricsListen,default=127.0.0.1:9464"`
	ControlSocket          string            `conf:"controlSocket,required,max=100"`
	ControlUIDs            []int             `conf:"controlUids,min=1,max=64"`
	Owners                 []string          `conf:"owners,max=1024,unique"`
	MaxTurnsPerRun         int               `conf:"maxTurnsPerRun,min=1,max=1048576,default=4096"`
	MaxOwnerMessagesPerRun int               `conf:"maxOwnerMessagesPerRun,min=1,max=65536,default=256"`
	MaxToolCallsPerRun     int               `conf:"maxToolCallsPerRun,min=1,max=16777216,default=65536"`
	UploadBudgetBytes      *int64            `conf:"uploadBudgetBytes,min=0,max=17179869184"`
	TPM                    tpmConfig         `conf:"tpm"`
	Platform               string            `conf:"platform,enum=auto|sev-snp|tdx|azure-snp|azure-tdx|tpm|simulated,default=auto"`
	GPU                    string            `conf:"gpu,enum=off|required|simulated,default=off"`
	StateDir               string            `conf:"stateDir"`
	AllowUnlockedMemory    bool              `conf:"allowUnlockedMemory"`
	TrustedTemplates       map[string]string `conf:"trustedTemplates,required,min=1,max=4096"`
	MaxPackBytes           int64             `conf:"maxPackBytes,min=1024,max=268435456,default=67108864"`
	MaxRuns                int               `conf:"maxRuns,min=1,max=4096,default=64"`
	MaxConnections         int               `conf:"maxConnections,min=1,max=65536,default=500"`
	Development            bool              `conf:"development"`
	ModelProvider          string            `conf:"modelProvider,required,min=1"`
	Model                  string            `conf:"model,required,min=1"`
	// AdmissionPolicy is read by readAdmissionPolicy.
	AdmissionPolicy *pohjson.Value `conf:"admissionPolicy"`
	// Gateway is the model gateway (docs/spec/model-gateway.md section 7).
	Gateway *gatewayDoc `conf:"gateway"`
}

// platforms are the values of attester.platform (the enum of
// attesterDoc.Platform) and of --platform.
var platforms = []string{"auto", "sev-snp", "tdx", "azure-snp", "azure-tdx", "tpm", "simulated"}

// CheckConf checks what the tags of attesterDoc cannot express.
func (a *attesterDoc) CheckConf(d *confdoc.Decoder, path string) {
	key := func(k string) string { return jsonobj.Key(path, k) }
	for _, l := range []struct{ k, addr string }{{"listen", a.Listen}, {"metricsListen", a.MetricsListen}} {
		if msg := listenAddrProblem(l.addr); msg != "" {
			d.Fail(key(l.k), confdoc.ErrBadValue, "%s", msg)
		}
	}
	if !filepath.IsAbs(a.ControlSocket) || filepath.Clean(a.ControlSocket) != a.ControlSocket {
		d.Fail(key("controlSocket"), confdoc.ErrBadValue, "must be a clean absolute path")
	}
	for i, u := range a.ControlUIDs {
		if u < 0 || u > 1<<31-2 {
			d.Fail(jsonobj.Index(key("controlUids"), i), confdoc.ErrBadValue, "not a uid")
		}
	}
	for i, o := range a.Owners {
		ch, sender, ok := strings.Cut(o, ":")
		if !ok || validChannel(ch) != nil || validSenderID(sender) != nil {
			d.Fail(jsonobj.Index(key("owners"), i), confdoc.ErrBadValue, `want "channel:sender_id" (channel: 1-64 of a-z 0-9 _ -; sender_id: 1-256 bytes of UTF-8 without control characters)`)
		}
	}
	if msg := tpmAddressProblem(a.Platform, a.TPM.Address); msg != "" {
		d.Fail(jsonobj.Key(key("tpm"), "address"), confdoc.ErrBadValue, "%s", msg)
	}
	if msg := gpuProblem(a.Platform, a.GPU); msg != "" {
		d.Fail(key("gpu"), confdoc.ErrBadValue, "%s", msg)
	}
	for i, p := range a.TPM.PCRs {
		if p < 0 || p > 23 {
			d.Fail(jsonobj.Index(jsonobj.Key(key("tpm"), "pcrs"), i), confdoc.ErrBadValue, "not a PCR index (0-23)")
		}
	}
	if len(a.TPM.PCRs) > 0 && a.Platform != "tpm" && a.Platform != "auto" {
		d.Fail(jsonobj.Key(key("tpm"), "pcrs"), confdoc.ErrBadValue, `requires platform "tpm" or "auto"`)
	}
	if u := a.TPM.AzureIMDS; u != "" && (a.TPM.Address == "" || !(strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasPrefix(u, "http://localhost:"))) {
		d.Fail(jsonobj.Key(key("tpm"), "azureImds"), confdoc.ErrBadValue, `requires tpm.address and a loopback "http://127.0.0.1:PORT" (development only: a fake metadata service)`)
	}
	for _, name := range slices.Sorted(maps.Keys(a.TrustedTemplates)) {
		if !sha256Tagged.MatchString(a.TrustedTemplates[name]) {
			d.Fail(jsonobj.Key(key("trustedTemplates"), name), confdoc.ErrBadValue, `want "sha256:" and 64 lower-case hex digits`)
		}
	}
	if b := a.UploadBudgetBytes; b != nil && *b < uploadCost(a.MaxPackBytes) {
		d.Fail(key("uploadBudgetBytes"), confdoc.ErrBadValue, "must be at least %d (one upload of maxPackBytes)", uploadCost(a.MaxPackBytes))
	}
}

// listenAddrProblem returns why addr is not a TCP listen address
// (host:port, the port a number 0-65535), or "". It never quotes addr.
func listenAddrProblem(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return `want "host:port" with a port number 0-65535`
	}
	return ""
}

// tpmAddressProblem returns why tpm.address addr is refused with
// platform, or "": set, it needs platform tpm and a host:port.
// gpuProblem says why gpu cannot go with platform: the simulated GPU only
// goes with the simulated platform, so that simulated GPU evidence never
// sits beside real CPU evidence.
func gpuProblem(platform, gpu string) string {
	if gpu == "simulated" && platform != "simulated" {
		return `"simulated" requires platform "simulated"`
	}
	return ""
}

func tpmAddressProblem(platform, addr string) string {
	switch {
	case addr == "":
		return ""
	case platform != "tpm" && platform != "azure-snp" && platform != "azure-tdx":
		return `requires platform "tpm", "azure-snp" or "azure-tdx" (development only: evidence from a TCP TPM is marked simulated)`
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "want host:port"
	}
	return ""
}

// configWithDefaults returns the Config of a checked attester section: its
// values, the defaults no tag can give (controlUids: the attester's own
// uid; uploadBudgetBytes: two uploads of maxPackBytes) and the lookup sets
// of owners and controlUids.
func configWithDefaults(a *attesterDoc) *Config {
	c := &Config{
		Listen: a.Listen, MetricsListen: a.MetricsListen, ControlSocket: a.ControlSocket,
		ControlUIDs: a.ControlUIDs, Owners: a.Owners,
		MaxTurnsPerRun: a.MaxTurnsPerRun, MaxOwnerMessagesPerRun: a.MaxOwnerMessagesPerRun, MaxToolCallsPerRun: a.MaxToolCallsPerRun,
		UploadBudgetBytes: 2 * uploadCost(a.MaxPackBytes), TPM: a.TPM, Platform: a.Platform, GPU: a.GPU, StateDir: a.StateDir,
		AllowUnlockedMemory: a.AllowUnlockedMemory, TrustedTemplates: a.TrustedTemplates, MaxPackBytes: a.MaxPackBytes,
		MaxRuns: a.MaxRuns, MaxConnections: a.MaxConnections, Development: a.Development,
		ModelProvider: a.ModelProvider, Model: a.Model,
	}
	if a.Gateway != nil {
		gc := a.Gateway.config()
		c.Gateway = &gc
	}
	if a.ControlUIDs == nil {
		c.ControlUIDs = []int{os.Geteuid()}
	}
	if a.UploadBudgetBytes != nil {
		c.UploadBudgetBytes = *a.UploadBudgetBytes
	}
	c.uidAllow = make(map[int]struct{}, len(c.ControlUIDs))
	for _, u := range c.ControlUIDs {
		c.uidAllow[u] = struct{}{}
	}
	c.owners = make(map[string]struct{}, len(c.Owners))
	for _, o := range c.Owners {
		c.owners[o] = struct{}{}
	}
	return c
}

// override applies the command line's overrides (o.Platform and
// o.Listen; "" when not given) and checks the result as ParseConfigWith
// checks the file; the error names the flag and the key.
func (c *Config) override(o ConfigOptions) error {
	if o.Platform != "" {
		if err := c.setPlatform(o.Platform); err != nil {
			return fmt.Errorf("--platform: %w", err)
		}
	}
	if o.Listen != "" {
		if err := c.setListen(o.Listen); err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	}
	return nil
}

// setPlatform overrides attester.platform (the --platform flag) and checks
// the result as ParseConfigWith would.
func (c *Config) setPlatform(name string) error {
	if !slices.Contains(platforms, name) {
		return configErr("attester.platform", confdoc.ErrBadValue, "must be one of %s", strings.Join(platforms, ", "))
	}
	if msg := tpmAddressProblem(name, c.TPM.Address); msg != "" {
		return configErr("attester.tpm.address", confdoc.ErrBadValue, "%s", msg)
	}
	if msg := gpuProblem(name, c.GPU); msg != "" {
		return configErr("attester.gpu", confdoc.ErrBadValue, "%s", msg)
	}
	c.Platform = name
	return nil
}

// setListen overrides attester.listen (the --listen flag) and checks the
// result as ParseConfigWith would.
func (c *Config) setListen(addr string) error {
	if msg := listenAddrProblem(addr); msg != "" {
		return configErr("attester.listen", confdoc.ErrBadValue, "%s", msg)
	}
	c.Listen = addr
	return nil
}

// owner returns whether channel:sender is a configured owner.
func (c *Config) owner(channel, sender string) bool {
	_, ok := c.owners[channel+":"+sender]
	return ok
}

// errConfig is the document sentinel of the configuration file: every
// *confdoc.ConfigError from ParseConfigWith matches it, the gate's
// included, and its text starts their messages.
var errConfig = errors.New("config")

// configErr returns a *confdoc.ConfigError of the configuration file at key.
func configErr(key string, class error, format string, args ...any) *confdoc.ConfigError {
	return &confdoc.ConfigError{Doc: errConfig, Key: key, Err: class, Msg: fmt.Sprintf(format, args...)}
}

var sha256Tagged = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ConfigOptions inject the environment for ${...} references (tests).
type ConfigOptions struct {
	// Logger receives the gate's development-mode warning; nil discards.
	Logger *slog.Logger
	// LookupEnv resolves ${VAR}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ReadFile resolves ${file:/path}; nil means a bounded read of the file.
	ReadFile func(string) ([]byte, error)
	// Platform and Listen, when set, override attester.platform and
	// attester.listen (the --platform and --listen flags); the result is
	// checked as the file is.
	Platform, Listen string
}

// ParseConfigWith parses the configuration file once, strictly
// (schema/confdoc: duplicate keys refused, keys case-sensitive, unknown keys
// refused, nothing after the document), resolves ${VAR} and ${file:/path}
// references in string values (with o's lookups; the zero ConfigOptions
// reads the process environment and the files), and returns the attester
// section and the gate's configuration (agents and tools, read by package
// gate from the same tree). Every error is a *confdoc.ConfigError naming
// the key that is wrong (Key: `attester.maxRuns`, `tools.deny`), the class
// of the problem (Err) and what is wrong (Msg), and matching errConfig; no
// value (and no resolved secret) is ever quoted.
// Nothing else reads the file: all configuration errors surface here,
// before the platform is opened or the identity unsealed.
func ParseConfigWith(data []byte, o ConfigOptions) (*Config, *gate.Config, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.ReadFile == nil {
		o.ReadFile = readFileBounded
	}
	f := &configFile{opts: o}
	popts := pohjson.ParseOptions{MaxBytes: MaxConfigBytes, MaxDepth: 16, AllowFloats: true}
	if err := confdoc.Parse(data, popts, f, confdoc.Options{Doc: errConfig}); err != nil {
		return nil, nil, err
	}
	c := configWithDefaults(&f.doc.Attester)
	if v := f.doc.Attester.AdmissionPolicy; v != nil {
		var err error
		if c.AdmissionPolicy, err = readAdmissionPolicy(v, o); err != nil {
			return nil, nil, err
		}
	}
	gc, err := gate.ParseConfigValue(f.root, gate.ParseOptions{Development: c.Development, AllowForeignKeys: true, Logger: o.Logger})
	if err != nil {
		ce, ok := errors.AsType[*confdoc.ConfigError](err)
		if !ok {
			ce = &confdoc.ConfigError{Err: err}
		}
		ce.Doc = errConfig
		return nil, nil, ce
	}
	if err := c.override(o); err != nil {
		return nil, nil, err
	}
	return c, gc, nil
}

// configFile is the configuration file as confdoc.Parse reads it: the
// ${...} references of the parsed tree are resolved (resolveRefs) first,
// then the declared document (fileDoc) is decoded from the result, which
// the gate reads too (root).
type configFile struct {
	opts ConfigOptions
	root *pohjson.Value
	doc  fileDoc
}

// UnmarshalConf resolves the references of the file v, then decodes it.
func (f *configFile) UnmarshalConf(d *confdoc.Decoder, v *pohjson.Value, path string) {
	if f.root = resolveRefs(d, v, path, f.opts); !d.Failed() {
		d.Decode(f.root, path, &f.doc)
	}
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
			return nil, configErr(key, confdoc.ErrBadValue, "want an absolute path to an admission policy file, or the policy as an object")
		}
		var err error
		if data, err = o.ReadFile(path); err != nil {
			if tl, ok := errors.AsType[*bounded.TooLargeError](err); ok {
				return nil, configErr(key, jsonobj.ErrTooLarge, "the admission policy file is larger than %d bytes", tl.Limit)
			}
			return nil, configErr(key, confdoc.ErrBadValue, "cannot read the admission policy file: %v", errors.Unwrap(err))
		}
	case pohjson.Object:
		var err error
		if data, err = pohjson.Stringify(v); err != nil {
			return nil, configErr(key, confdoc.ErrBadValue, "cannot encode the inline admission policy")
		}
	default:
		return nil, configErr(key, jsonobj.ErrWrongType, "want an absolute path to an admission policy file, or the policy as an object")
	}
	if len(data) > admission.MaxPolicySize {
		return nil, configErr(key, jsonobj.ErrTooLarge, "the admission policy is larger than %d bytes", admission.MaxPolicySize)
	}
	p, err := admission.Parse(data)
	if err != nil {
		return nil, configErr(key, confdoc.ErrBadValue, "not a valid admission policy: %v", err)
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

// resolveRefs returns v with the references in its strings resolved. An
// unresolvable one is refused (d.Fail) at its path, and resolveRefs
// returns nil.
func resolveRefs(d *confdoc.Decoder, v *pohjson.Value, path string, o ConfigOptions) *pohjson.Value {
	switch v.Kind() {
	case pohjson.Object:
		ms := v.Members()
		out := make([]pohjson.Member, len(ms))
		for i, m := range ms {
			if out[i] = pohjson.M(m.Key, resolveRefs(d, m.Value, jsonobj.Key(path, m.Key), o)); d.Failed() {
				return nil
			}
		}
		return pohjson.NewObject(out...)
	case pohjson.Array:
		es := v.Elems()
		out := make([]*pohjson.Value, len(es))
		for i, e := range es {
			if out[i] = resolveRefs(d, e, jsonobj.Index(path, i), o); d.Failed() {
				return nil
			}
		}
		return pohjson.NewArray(out...)
	case pohjson.String:
		s, _ := v.Str()
		if !strings.Contains(s, "${") {
			return v
		}
		r, err := resolveString(s, o)
		if err != nil {
			d.Fail(path, confdoc.ErrBadValue, "%v", err)
			return nil
		}
		return pohjson.NewString(r)
	}
	return v
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
