// Package detect chooses the platform the attester runs on and says why.
//
// Auto-detection tries the confidential-VM report devices first (SEV-SNP,
// then TDX), then an Azure confidential VM's paravisor vTPM (its HCL report
// NV index), then a TPM. The simulated platform is never auto-detected: it is
// chosen only by name, and every piece of evidence it produces is marked
// simulated.
package detect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sevsnp"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/wire/evidence"
)

// Names accepted by Open.
const (
	auto      = "auto"
	sevSNP    = evidence.PlatformSEVSNP
	tdxName   = evidence.PlatformTDX
	azureSNP  = evidence.PlatformAzureSNP
	azureTDX  = evidence.PlatformAzureTDX
	tpmName   = evidence.PlatformTPM
	Simulated = "simulated"
)

// names lists the accepted platform names.
func names() []string { return []string{auto, sevSNP, tdxName, azureSNP, azureTDX, tpmName, Simulated} }

// Platform is an opened backend.
type Platform interface {
	enclave.Quoter
	enclave.Namer
	Close() error
}

// Options configure the backends Open may try.
type Options struct {
	SEVSNP sevsnp.Options
	TPM    tpm.Options
	Sim    sim.Options
}

// attempt records one backend Open tried.
type attempt struct {
	Platform string
	OK       bool
	Reason   string
}

// Report says what Open found and why it chose what it did.
type Report struct {
	Requested string
	Chosen    string
	Simulated bool
	Attempts  []attempt
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform: requested %s, chosen %s", r.Requested, r.Chosen)
	if r.Simulated {
		b.WriteString(" (SIMULATED: evidence is signed by test roots)")
	}
	for _, a := range r.Attempts {
		status := "unavailable"
		if a.OK {
			status = "available"
		}
		fmt.Fprintf(&b, "\n  %s: %s", a.Platform, status)
		if a.Reason != "" {
			fmt.Fprintf(&b, " (%s)", a.Reason)
		}
	}
	return b.String()
}

// azureAny is the auto-detection attempt of an Azure confidential VM of
// either kind.
const azureAny = "azure"

// errUnknownPlatform is returned for a name not in names.
var errUnknownPlatform = errors.New("detect: unknown platform")

type nopCloser struct{ backend }

type backend interface {
	enclave.Quoter
	enclave.Namer
}

func (nopCloser) Close() error { return nil }

// Unwrap exposes the backend for optional-capability type assertions.
func (n nopCloser) Unwrap() any { return n.backend }

// Open opens the named platform. With Auto it tries SEV-SNP, TDX and TPM in
// that order and returns the first available; if none is, the error wraps
// enclave.ErrNotAvailable and the report lists every reason.
func Open(ctx context.Context, name string, opts Options) (Platform, *Report, error) {
	rep := &Report{Requested: name}
	try := func(p string) (Platform, error) {
		var (
			pl  Platform
			err error
		)
		switch p {
		case sevSNP:
			var d *sevsnp.Device
			if d, err = sevsnp.Open(opts.SEVSNP); err == nil {
				pl = d
			}
		case tdxName:
			var d *tdx.Device
			if d, err = tdx.Open(); err == nil {
				pl = d
			}
		case tpmName:
			var d *tpm.TPM
			if d, err = tpm.Open(ctx, opts.TPM); err == nil {
				pl = d
			}
		case azureSNP, azureTDX, azureAny:
			want, o := p, opts.TPM
			if p == azureAny {
				// Auto: the paravisor's quote covers all PCRs whatever
				// a plain TPM's selection is.
				want, o.PCRs = "", nil
			}
			if d, derr := tpm.OpenAzure(ctx, want, o); derr == nil {
				pl, p = d, d.Platform()
			} else {
				err = derr
			}
		case Simulated:
			var s *sim.Simulator
			if s, err = sim.New(opts.Sim); err == nil {
				pl = nopCloser{s}
			}
		}
		a := attempt{Platform: p, OK: err == nil}
		if err != nil {
			a.Reason = err.Error()
		}
		rep.Attempts = append(rep.Attempts, a)
		return pl, err
	}
	switch name {
	case sevSNP, tdxName, azureSNP, azureTDX, tpmName, Simulated:
		p, err := try(name)
		if err != nil {
			return nil, rep, fmt.Errorf("detect: %s: %w", name, err)
		}
		rep.Chosen, rep.Simulated = name, name == Simulated
		return p, rep, nil
	case auto, "":
		rep.Requested = auto
		for _, n := range []string{sevSNP, tdxName, azureAny, tpmName} {
			p, err := try(n)
			if err == nil {
				rep.Chosen = p.Platform()
				return p, rep, nil
			}
			if !errors.Is(err, enclave.ErrNotAvailable) {
				// A device that exists but fails is an error, not a reason to
				// fall through to a weaker platform.
				return nil, rep, fmt.Errorf("detect: %s is present but failed: %w", n, err)
			}
		}
		return nil, rep, fmt.Errorf("detect: no confidential-computing platform found (simulated must be chosen explicitly): %w", enclave.ErrNotAvailable)
	}
	return nil, rep, fmt.Errorf("%w %q (want one of %s)", errUnknownPlatform, name, strings.Join(names(), ", "))
}

// Capability returns p's backend as T when it implements the optional
// capability T (enclave.Measurer, enclave.SealingKeyer).
func Capability[T any](p Platform) (T, bool) {
	if t, ok := p.(T); ok {
		return t, true
	}
	if u, ok := p.(interface{ Unwrap() any }); ok {
		t, ok := u.Unwrap().(T)
		return t, ok
	}
	var zero T
	return zero, false
}
