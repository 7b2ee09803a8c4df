package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// MaxConfigBytes bounds the configuration file.
const MaxConfigBytes = 1 << 20

// Config is the "attester" section of the configuration file. The rest of
// the file holds the OpenClaw keys the tool-call gate reads (agents.*,
// tools.*), validated by package gate.
type Config struct {
	// Listen is the TCP address of the API (default 127.0.0.1:8443).
	Listen string `json:"listen"`
	// AgentSocket is the unix socket path where the co-located agent fetches
	// the rebuilt prompt (mode 0600). Required.
	AgentSocket string `json:"agentSocket"`
	// Platform is auto, sev-snp, tdx, tpm or simulated (default auto).
	Platform string `json:"platform"`
	// StateDir holds the sealed identity blob (optional: without it the
	// identity is ephemeral).
	StateDir string `json:"stateDir"`
	// AllowUnlockedMemory permits sealed buffers without mlock/memfd_secret.
	AllowUnlockedMemory bool `json:"allowUnlockedMemory"`
	// TrustedTemplates pins the harness template hashes (file name ->
	// "sha256:<hex>"). Required: a pack's templates are refused unless listed.
	TrustedTemplates map[string]string `json:"trustedTemplates"`
	// MaxPackBytes bounds an uploaded prompt_pack.enc (default 64 MiB).
	MaxPackBytes int64 `json:"maxPackBytes"`
	// MaxRuns bounds concurrently open runs (default 64).
	MaxRuns int `json:"maxRuns"`
	// Development relaxes checks meant for production (http webhooks).
	Development bool `json:"development"`
	// ModelProvider and Model identify the model the agent uses; they are
	// committed in measurements.model_weights_digest_b64u.
	ModelProvider string `json:"modelProvider"`
	Model         string `json:"model"`
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

// ParseConfig splits a configuration file into the attester section and the
// remaining OpenClaw sections (returned raw for the gate).
func ParseConfig(data []byte) (*Config, map[string]json.RawMessage, error) {
	if len(data) > MaxConfigBytes {
		return nil, nil, &ConfigError{Key: "(file)", Msg: fmt.Sprintf("larger than %d bytes", MaxConfigBytes)}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, &ConfigError{Key: "(file)", Msg: "not a JSON object: " + safeJSONError(err)}
	}
	raw, ok := top["attester"]
	if !ok {
		return nil, nil, &ConfigError{Key: "attester", Msg: "missing section"}
	}
	delete(top, "attester")
	for k := range top {
		if k != "agents" && k != "tools" {
			return nil, nil, &ConfigError{Key: k, Msg: "unknown top-level key (want attester, agents, tools)"}
		}
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, nil, &ConfigError{Key: "attester", Msg: safeJSONError(err)}
	}
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	return &c, top, nil
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
	if c.AgentSocket == "" {
		return &ConfigError{Key: "attester.agentSocket", Msg: "required"}
	}
	if !strings.HasPrefix(c.AgentSocket, "/") {
		return &ConfigError{Key: "attester.agentSocket", Msg: "must be an absolute path"}
	}
	if len(c.TrustedTemplates) == 0 {
		return &ConfigError{Key: "attester.trustedTemplates", Msg: "required: list the template hashes this attester accepts"}
	}
	for name, h := range c.TrustedTemplates {
		if !sha256Tagged.MatchString(h) {
			return &ConfigError{Key: "attester.trustedTemplates." + name, Msg: `want "sha256:" and 64 lower-case hex digits`}
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
	if c.Model == "" || c.ModelProvider == "" {
		return &ConfigError{Key: "attester.model", Msg: "model and modelProvider are required: the attestation commits to the model identity"}
	}
	return nil
}
