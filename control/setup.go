package control

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/sealed"
)

// Setup opens the platform named by d.Config, loads or creates the identity
// and builds the Service from d and them (d's Identity, Platform and
// PlatformReport are set here). The returned function releases everything.
func Setup(ctx context.Context, d Deps) (*Service, func(), error) {
	cfg, log := d.Config, d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := detect.Options{TPM: tpm.Options{PCRs: cfg.TPM.PCRs}}
	if cfg.TPM.Address != "" {
		// Development only: config validation allows it with platform tpm
		// alone, and the TPM marks such evidence simulated.
		opts.TPM.Address, opts.TPM.AzureIMDS = cfg.TPM.Address, cfg.TPM.AzureIMDS
		log.Warn("DEVELOPMENT ONLY: using a TPM over TCP (swtpm); its evidence is marked simulated", "address", cfg.TPM.Address)
	}
	p, rep, err := detect.Open(ctx, cfg.Platform, opts)
	if err != nil {
		log.Error("platform detection failed", "report", rep.String())
		return nil, nil, err
	}
	log.Info("platform chosen", "platform", rep.Chosen, "simulated", rep.Simulated, "report", rep.String())
	gpus, err := openGPUs(cfg.GPU)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	if len(gpus) > 0 {
		log.Info("gpu evidence enabled", "gpus", len(gpus), "mode", cfg.GPU)
	}
	d.GPUs = gpus
	mopts := sealed.Options{AllowUnlocked: cfg.AllowUnlockedMemory}
	sealer, err := platformSealer(p, rep, mopts)
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
	id, err := LoadIdentity(ctx, cfg.StateDir, sealer, mopts, log)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	d.Identity, d.Platform, d.PlatformReport = id, p, rep
	s, err := New(d)
	if err != nil {
		id.Close()
		p.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); id.Close(); p.Close() }, nil
}

// openGPUs opens the GPUs attester.gpu names: none for off, every NVIDIA GPU
// through NVML for required (an error when NVML, a GPU or confidential
// computing is missing), the fake GPU for simulated.
func openGPUs(mode string) ([]enclave.Quoter, error) {
	var gpus []*nvgpu.GPU
	switch mode {
	case "", "off":
		return nil, nil
	case "required":
		var err error
		if gpus, err = nvgpu.OpenNVML(); err != nil {
			return nil, fmt.Errorf("attester.gpu required: %w", err)
		}
	case "simulated":
		g, err := nvgpu.NewSimulated()
		if err != nil {
			return nil, fmt.Errorf("attester.gpu simulated: %w", err)
		}
		gpus = []*nvgpu.GPU{g}
	default:
		return nil, fmt.Errorf("attester.gpu: unknown mode %q", mode)
	}
	qs := make([]enclave.Quoter, len(gpus))
	for i, g := range gpus {
		qs[i] = g
	}
	return qs, nil
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
