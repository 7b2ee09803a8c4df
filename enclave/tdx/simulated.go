package tdx

import (
	"bytes"
	"context"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
)

// Simulated is a TDX platform backed by a fake quoting enclave. Its quotes
// are real TDX v4 quotes, really signed, under the TEST ONLY hierarchy of
// package fakeqe (by default the pinned root of package tdxsimroots), and
// its evidence is marked Simulated. A production verifier refuses it.
type Simulated struct {
	qe       *fakeqe.QE
	eventLog []byte
}

var (
	_ enclave.Quoter   = (*Simulated)(nil)
	_ enclave.Namer    = (*Simulated)(nil)
	_ enclave.Measurer = (*Simulated)(nil)
)

// NewSimulated returns a simulated TDX platform; the zero Options give the
// pinned hierarchy and fakeqe.DefaultTD.
func NewSimulated(opts fakeqe.Options) (*Simulated, error) {
	qe, err := fakeqe.New(opts)
	if err != nil {
		return nil, err
	}
	return &Simulated{qe: qe, eventLog: bytes.Clone(opts.EventLog)}, nil
}

// Quote returns simulated evidence over rd.
func (s *Simulated) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	ev, err := buildEvidence(ctx, s.qe, rd, true)
	if err != nil {
		return nil, err
	}
	if s.eventLog != nil {
		ev.Aux = map[string][]byte{auxEventLog: bytes.Clone(s.eventLog)}
	}
	return ev, nil
}

// Platform returns evidence.PlatformTDX.
func (s *Simulated) Platform() string { return evidence.PlatformTDX }

// LaunchMeasurement returns the simulated MRTD (48 bytes).
func (s *Simulated) LaunchMeasurement(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	td := s.qe.TD()
	return append([]byte(nil), td.MRTD[:]...), nil
}
