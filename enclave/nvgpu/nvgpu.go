// Package nvgpu produces NVIDIA GPU confidential-computing evidence: the
// GPU's signed SPDM measurement report over a nonce derived from the run's
// REPORT_DATA (evidence.ReportData.GPUNonce), with the device certificate
// chain. The evidence travels beside the CPU evidence in the evidence
// document (docs/spec/attestation-v1.md, "GPU evidence").
//
// The device is behind the gpuDevice interface. OpenNVML (built only with the
// nvml build tag, so default builds need no libnvidia-ml) talks to real
// GPUs; NewSimulated uses a fake device that signs under the TEST ONLY
// simulated NVIDIA root (wire/simroots). A GPU whose confidential-computing
// mode is off is refused: it never yields evidence.
package nvgpu

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/nvspdm"
)

// maxChainPEM bounds the certificate chain a device returns (NVML's buffer
// is 5 KiB).
const maxChainPEM = 16 << 10

// errCCOff is returned when the GPU's confidential-computing mode is off.
var errCCOff = errors.New("nvgpu: the gpu is not in production confidential-computing mode (off, devtools mode or a non-production environment); refusing to produce gpu evidence")

// gpuDevice is one GPU as NVML exposes it.
type gpuDevice interface {
	// ccEnabled reports whether confidential computing is on for the GPU.
	ccEnabled() (bool, error)
	// attest returns the GPU's attestation report (SPDM GET_MEASUREMENTS
	// request and signed response) for nonce, and its attestation
	// certificate chain (PEM, leaf first).
	attest(nonce [32]byte) (report, chainPEM []byte, err error)
}

// GPU produces evidence from one gpuDevice. It is an enclave.Quoter.
type GPU struct {
	dev       gpuDevice
	simulated bool
}

var _ enclave.Quoter = (*GPU)(nil)

// newGPU returns a GPU for dev after checking that confidential computing
// is on.
func newGPU(dev gpuDevice, simulated bool) (*GPU, error) {
	g := &GPU{dev: dev, simulated: simulated}
	if err := g.checkCC(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *GPU) checkCC() error {
	on, err := g.dev.ccEnabled()
	if err != nil {
		return fmt.Errorf("nvgpu: reading the confidential-computing state: %w", err)
	}
	if !on {
		return errCCOff
	}
	return nil
}

// Quote returns the GPU's evidence whose requester nonce is rd.GPUNonce().
// It checks the confidential-computing mode again, that the report parses
// and carries that nonce, and that the chain is PEM certificates.
func (g *GPU) Quote(_ context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	if err := g.checkCC(); err != nil {
		return nil, err
	}
	nonce := rd.GPUNonce()
	report, chainPEM, err := g.dev.attest(nonce)
	if err != nil {
		return nil, fmt.Errorf("nvgpu: attestation report: %w", err)
	}
	rep, err := nvspdm.Parse(report)
	if err != nil {
		return nil, fmt.Errorf("nvgpu: the gpu returned a report that does not parse: %w", err)
	}
	if rep.Nonce != nonce {
		return nil, errors.New("nvgpu: the gpu report does not carry the requested nonce")
	}
	chain, err := pemChain(chainPEM)
	if err != nil {
		return nil, err
	}
	return &evidence.Evidence{
		Platform:  evidence.PlatformNVIDIAGPU,
		Simulated: g.simulated,
		Format:    nvspdm.Format,
		Blob:      report,
		CertChain: chain,
	}, nil
}

// pemChain decodes PEM certificates (DER, in order); anything else in the
// input is refused.
func pemChain(b []byte) ([][]byte, error) {
	if len(b) > maxChainPEM {
		return nil, fmt.Errorf("nvgpu: certificate chain is %d bytes, limit %d", len(b), maxChainPEM)
	}
	var out [][]byte
	for {
		blk, rest := pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("nvgpu: certificate chain holds a %q block", blk.Type)
		}
		out = append(out, blk.Bytes)
		b = rest
	}
	if len(out) == 0 || len(trimNUL(b)) != 0 {
		return nil, errors.New("nvgpu: certificate chain is not a list of pem certificates")
	}
	return out, nil
}

// trimNUL drops the whitespace and NUL padding NVML leaves after the
// chain.
func trimNUL(b []byte) []byte {
	for len(b) > 0 {
		switch b[len(b)-1] {
		case 0, ' ', '\n', '\r', '\t':
			b = b[:len(b)-1]
		default:
			return b
		}
	}
	return b
}
