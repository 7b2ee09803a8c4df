// Package tdx is the Intel TDX backend of package enclave.
//
// Device talks to the TDX guest through configfs-tsm
// (/sys/kernel/config/tsm/report, via github.com/google/go-configfs-tsm) or,
// failing that, the legacy /dev/tdx_guest ioctls (via
// github.com/google/go-tdx-guest/client). Simulated is the same evidence path
// fed by a fake quoting enclave (package fakeqe) whose PCK chain ends in the
// pinned TEST ONLY root of package tdxsimroots; its evidence is marked
// Simulated.
//
// Both return Evidence{Platform: "tdx", Format: "tdx/quote-v4"} whose Blob is
// the quote exactly as the quoting enclave signed it (bytes a device appends
// after the quote's own length are dropped) and whose CertChain is the PCK
// chain from the quote's certification data, DER, leaf first. The backend
// checks that the quote is well formed, is a v4 ECDSA-P256 TDX quote and
// carries the requested REPORT_DATA; it verifies no signature (that is the
// verifier's job, docs/spec/platform-tdx.md).
//
// Importing this package imports go-tdx-guest's client, which registers the
// global flag -tdx_guest_device_path; this package defines no flags.
package tdx

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tpmquote"
)

// format is Evidence.Format for a TDX quote v4.
const format = tdxquote.Format

// auxEventLog is the Evidence.Aux key of the CC event log
// (docs/spec/platform-tdx.md): the same name as the TPM event log's.
const auxEventLog = tpmquote.AuxEventLog

// defaultCCELPath is where Linux exposes the ACPI CCEL table's log area.
const defaultCCELPath = "/sys/firmware/acpi/tables/data/CCEL"

// Errors.
var (
	// errQuoteFailed reports that the platform could not produce a quote.
	errQuoteFailed = errors.New("tdx: quote generation failed")
	// errBadQuote reports that the platform returned bytes that are not an
	// acceptable quote; it wraps the tdxquote error.
	errBadQuote = errors.New("tdx: platform returned an unacceptable quote")
	// errReportDataMismatch reports a quote whose REPORT_DATA is not the one
	// requested.
	errReportDataMismatch = errors.New("tdx: quote report data does not match the request")
	// errClosed is returned after Close.
	errClosed = errors.New("tdx: device is closed")
)

// probeLabel derives the REPORT_DATA of the internal quotes Device takes to
// read its own MRTD and TCB. Those quotes are parsed and dropped, never
// returned.
const probeLabel = "clawea.dev/attester/v1/tdx/self-probe"

func probeReportData() [64]byte { return sha512.Sum512([]byte(probeLabel)) }

// rawQuoter is what both backends share: something that returns raw quote
// bytes for 64 bytes of report data.
type rawQuoter interface {
	GetRawQuote(reportData [64]byte) ([]byte, error)
}

// quote asks src for a quote over rd and checks what came back.
func quote(ctx context.Context, src rawQuoter, rd [64]byte) (*tdxquote.Quote, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	raw, err := src.GetRawQuote(rd)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errQuoteFailed, err)
	}
	n, err := tdxquote.Length(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errBadQuote, err)
	}
	blob := bytes.Clone(raw[:n])
	q, err := tdxquote.ParseEvidence(blob)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errBadQuote, err)
	}
	if q.Body.ReportData != rd {
		return nil, nil, errReportDataMismatch
	}
	return q, blob, nil
}

// buildEvidence builds Evidence for a fresh quote over rd.
func buildEvidence(ctx context.Context, src rawQuoter, rd evidence.ReportData, simulated bool) (*evidence.Evidence, error) {
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	q, blob, err := quote(ctx, src, rd.Bytes())
	if err != nil {
		return nil, err
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadQuote, err)
	}
	return &evidence.Evidence{
		Platform:  evidence.PlatformTDX,
		Simulated: simulated,
		Format:    format,
		Blob:      blob,
		CertChain: chain,
	}, nil
}
