package tpm

import (
	"context"
	"fmt"

	"github.com/clawea/attester/sealed"
)

// sealerKind is the sealed.Sealer kind of PCR-policy sealing.
const sealerKind = "tpm-pcr-policy"

// Sealer adapts a TPM's PCR-policy sealing to sealed.Sealer, so the attester
// can seal its identity key to the platform. Unsealed secrets go straight
// into locked memory.
type Sealer struct {
	TPM  *TPM
	Opts sealed.Options
}

var _ sealed.Sealer = (*Sealer)(nil)

// Kind implements sealed.Sealer.
func (s *Sealer) Kind() string { return sealerKind }

// Seal implements sealed.Sealer (secrets up to maxSealSecret bytes).
func (s *Sealer) Seal(ctx context.Context, label string, secret []byte) ([]byte, error) {
	return s.TPM.SealPCR(ctx, label, secret)
}

// Unseal implements sealed.Sealer.
func (s *Sealer) Unseal(ctx context.Context, label string, blob []byte) (*sealed.Buffer, error) {
	buf, err := sealed.New(maxSealSecret, s.Opts)
	if err != nil {
		return nil, err
	}
	n, err := s.TPM.UnsealPCR(ctx, label, blob, buf.Bytes())
	if err != nil {
		buf.Destroy()
		return nil, err
	}
	out, err := sealed.NewFrom(buf.Bytes()[:n], s.Opts)
	buf.Destroy()
	if err != nil {
		return nil, fmt.Errorf("tpm: unseal: %w", err)
	}
	return out, nil
}
