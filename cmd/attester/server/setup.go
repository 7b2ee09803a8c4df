package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/sealed"
)

// Setup opens the platform, loads or creates the identity and builds the
// Server. The returned function releases everything.
func Setup(ctx context.Context, cfg *Config, gateConfig map[string]json.RawMessage, log *slog.Logger) (*Server, func(), error) {
	p, rep, err := detect.Open(ctx, cfg.Platform, detect.Options{})
	if err != nil {
		log.Error("platform detection failed", "report", rep.String())
		return nil, nil, err
	}
	log.Info("platform chosen", "platform", rep.Chosen, "simulated", rep.Simulated, "report", rep.String())
	opts := sealed.Options{AllowUnlocked: cfg.AllowUnlockedMemory}
	sealer, err := platformSealer(p, rep, opts)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	if cfg.StateDir != "" {
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			p.Close()
			return nil, nil, fmt.Errorf("state directory: %w", err)
		}
	}
	id, err := LoadIdentity(ctx, cfg.StateDir, sealer, opts, log)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	s, err := New(Deps{Config: cfg, GateConfig: gateConfig, Identity: id, Platform: p, PlatformReport: rep, Logger: log})
	if err != nil {
		id.Close()
		p.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); id.Close(); p.Close() }, nil
}

// platformSealer picks how the identity is sealed: TPM PCR policy, a
// platform-derived key (SEV-SNP MSG_KEY_REQ; the simulated platform's
// simulated key), or none (TDX has no sealing key: the identity is
// ephemeral and a new key attestation is needed after every restart).
func platformSealer(p detect.Platform, rep *detect.Report, opts sealed.Options) (sealed.Sealer, error) {
	if t, ok := detect.Capability[*tpm.TPM](p); ok {
		return &tpm.Sealer{TPM: t, Opts: opts}, nil
	}
	if k, ok := detect.Capability[enclave.SealingKeyer](p); ok {
		kind := "platform-key/" + p.Platform()
		if rep.Simulated {
			kind = "simulated-platform-key/" + p.Platform()
		}
		return sealed.NewKeySealer(kind, k, opts)
	}
	return nil, nil
}

// ListenAgentSocket creates the unix socket the co-located agent uses, with
// mode 0600 in a directory that is not world-writable. A stale socket file is
// replaced; anything else at the path is refused.
func ListenAgentSocket(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if st.Mode().Perm()&0o002 != 0 && st.Mode()&os.ModeSticky == 0 {
		return nil, fmt.Errorf("agent socket: directory %s is world-writable", dir)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("agent socket: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("agent socket: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return ln, nil
}
