// Package sim is the SIMULATED confidential-computing platform. It is a real
// AMD SEV-SNP implementation in software: every Quote is a freshly built
// ATTESTATION_REPORT over the caller's report data, signed with ECDSA P-384
// by a VCEK whose certificate chains to the simulated ARK/ASK pinned in
// wire/simroots (go-sev-guest's published test key hierarchy). The
// real go-sev-guest verifier accepts its evidence only when given those
// roots; with AMD's roots it rejects it.
//
// Every Evidence it returns has Simulated set. It is selected only
// explicitly, by calling New; nothing detects or falls back to it.
package sim

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/testing/data"
)

// defaultSeed is the seed used when Options.Seed is empty.
const defaultSeed = "clawea.dev/attester/v1/sim/default-seed"

// Limits on Options.
const (
	maxSeedSize  = 1024
	maxLabelSize = 256
)

// Domain-separation labels.
const (
	labelChipID     = "clawea.dev/attester/v1/sim/sev-snp/chip-id"
	labelReportID   = "clawea.dev/attester/v1/sim/sev-snp/report-id"
	labelSealRoot   = "clawea.dev/attester/v1/sim/sev-snp/sealing-root"
	labelMeasure    = "clawea.dev/attester/v1/sim/sev-snp/default-measurement"
	sealingKeyLabel = "clawea.dev/attester/v1/sealing-key/sev-snp-SIMULATED"
)

// Simulated platform constants. The TCB is a plausible Milan level; the
// firmware API version is 1.55 build 21.
var simTCB = kds.TCBParts{BlSpl: 3, TeeSpl: 0, SnpSpl: 8, UcodeSpl: 115}

const (
	simPlatformInfo = 0x1 // SMT enabled
	simFwMajor      = 1
	simFwMinor      = 55
	simFwBuild      = 21
	// defaultPolicy is the simulated guest policy: ABI 0.0, SMT allowed,
	// reserved bit 17 set, migration agent and debug off.
	defaultPolicy = uint64(1<<16 | 1<<17)
	policyDebug   = uint64(1 << 19)
	reportVersion = abi.ReportVersion3
)

var (
	// errBadOptions is returned by New for invalid options.
	errBadOptions = errors.New("sim: invalid options")
	// errBadLabel is returned by SealingKey for an empty or oversized label.
	errBadLabel = errors.New("sim: invalid sealing key label")
)

// Options configure a Simulator. The zero value is a valid simulator with
// defaultSeed, a fixed measurement and debugging off.
type Options struct {
	// Seed identifies the simulated machine: CHIP_ID, REPORT_ID and the
	// sealing-key root derive from it. At most maxSeedSize bytes.
	Seed []byte
	// Measurement is the launch MEASUREMENT (48 bytes). Empty means
	// SHA-384 of a fixed label.
	Measurement []byte
	// HostData is HOST_DATA (32 bytes). Empty means zeros.
	HostData []byte
	// Debug sets the DEBUG bit of the guest policy (for negative tests:
	// verifiers must reject it).
	Debug bool
}

// Simulator is a simulated SEV-SNP platform. It is safe for concurrent use.
type Simulator struct {
	chipID      [abi.ChipIDSize]byte
	reportID    [abi.ReportIDSize]byte
	measurement [abi.MeasurementSize]byte
	hostData    [abi.HostDataSize]byte
	policy      uint64
	tcb         kds.TCBVersion
	sealRoot    [32]byte
	vcek        *ecdsa.PrivateKey
	certTable   []byte
}

var (
	_ enclave.Quoter       = (*Simulator)(nil)
	_ enclave.Namer        = (*Simulator)(nil)
	_ enclave.Measurer     = (*Simulator)(nil)
	_ enclave.SealingKeyer = (*Simulator)(nil)
)

// New returns a simulated SEV-SNP platform.
func New(opts Options) (*Simulator, error) {
	seed := opts.Seed
	if len(seed) == 0 {
		seed = []byte(defaultSeed)
	}
	if len(seed) > maxSeedSize {
		return nil, fmt.Errorf("%w: seed is %d bytes, limit %d", errBadOptions, len(seed), maxSeedSize)
	}
	s := &Simulator{policy: defaultPolicy, vcek: data.VCEKPrivateKey}
	if opts.Debug {
		s.policy |= policyDebug
	}
	switch len(opts.Measurement) {
	case 0:
		s.measurement = sha512.Sum384([]byte(labelMeasure))
	case abi.MeasurementSize:
		copy(s.measurement[:], opts.Measurement)
	default:
		return nil, fmt.Errorf("%w: measurement is %d bytes, want %d", errBadOptions, len(opts.Measurement), abi.MeasurementSize)
	}
	switch len(opts.HostData) {
	case 0:
	case abi.HostDataSize:
		copy(s.hostData[:], opts.HostData)
	default:
		return nil, fmt.Errorf("%w: host data is %d bytes, want %d", errBadOptions, len(opts.HostData), abi.HostDataSize)
	}
	s.chipID = sha512.Sum512(append([]byte(labelChipID+"\x00"), seed...))
	rid := sha256.Sum256(append([]byte(labelReportID+"\x00"), seed...))
	s.reportID = rid
	root, err := hkdf.Key(sha256.New, seed, nil, labelSealRoot, 32)
	if err != nil {
		return nil, fmt.Errorf("sim: sealing root: %w", err)
	}
	copy(s.sealRoot[:], root)
	tcb, err := kds.ComposeTCBParts(simTCB)
	if err != nil {
		return nil, fmt.Errorf("sim: tcb: %w", err)
	}
	s.tcb = tcb

	roots := simroots.SEVSNPRoots()
	if len(roots) != 1 {
		return nil, errors.New("sim: simulated roots unavailable")
	}
	vcekDER, err := issueVCEK(roots[0].ASK, data.ASKPrivateKey, s.vcek.Public(), s.chipID[:], tcb)
	if err != nil {
		return nil, err
	}
	s.certTable, err = snpevidence.MarshalCertTable([]snpevidence.CertTableEntry{
		{GUID: snpevidence.GUIDARK, Data: roots[0].ARK.Raw},
		{GUID: snpevidence.GUIDASK, Data: roots[0].ASK.Raw},
		{GUID: snpevidence.GUIDVCEK, Data: vcekDER},
	})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return s, nil
}

// Platform returns evidence.PlatformSEVSNP: the simulator speaks SEV-SNP; the
// evidence's Simulated flag says it is not hardware.
func (s *Simulator) Platform() string { return evidence.PlatformSEVSNP }

// String describes the simulator without any key material.
func (s *Simulator) String() string { return "sim.Simulator(sev-snp, SIMULATED)" }

// Quote returns simulated SEV-SNP evidence whose REPORT_DATA is rd.
func (s *Simulator) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	b := rd.Bytes()
	report, err := s.report(b)
	if err != nil {
		return nil, err
	}
	ev, err := snpevidence.Build(report, s.certTable, nil, true)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return ev, nil
}

// report builds and signs an ATTESTATION_REPORT over reportData.
func (s *Simulator) report(reportData [64]byte) ([]byte, error) {
	r := &spb.Report{
		Version:         reportVersion,
		GuestSvn:        0,
		Policy:          s.policy,
		FamilyId:        make([]byte, abi.FamilyIDSize),
		ImageId:         make([]byte, abi.ImageIDSize),
		Vmpl:            0,
		SignatureAlgo:   abi.SignEcdsaP384Sha384,
		CurrentTcb:      uint64(s.tcb),
		PlatformInfo:    simPlatformInfo,
		SignerInfo:      abi.ComposeSignerInfo(abi.SignerInfo{SigningKey: abi.VcekReportSigner}),
		ReportData:      reportData[:],
		Measurement:     bytes.Clone(s.measurement[:]),
		HostData:        bytes.Clone(s.hostData[:]),
		IdKeyDigest:     make([]byte, abi.IDKeyDigestSize),
		AuthorKeyDigest: make([]byte, abi.AuthorKeyDigestSize),
		ReportId:        bytes.Clone(s.reportID[:]),
		ReportIdMa:      bytes.Repeat([]byte{0xff}, abi.ReportIDMASize),
		ReportedTcb:     uint64(s.tcb),
		Cpuid1EaxFms:    abi.MaskedCpuid1EaxFromSevProduct(abi.DefaultSevProduct()),
		ChipId:          bytes.Clone(s.chipID[:]),
		CommittedTcb:    uint64(s.tcb),
		CurrentBuild:    simFwBuild,
		CurrentMinor:    simFwMinor,
		CurrentMajor:    simFwMajor,
		CommittedBuild:  simFwBuild,
		CommittedMinor:  simFwMinor,
		CommittedMajor:  simFwMajor,
		LaunchTcb:       uint64(s.tcb),
		Signature:       make([]byte, abi.SignatureSize),
	}
	raw, err := abi.ReportToAbiBytes(r)
	if err != nil {
		return nil, fmt.Errorf("sim: encode report: %w", err)
	}
	digest := sha512.Sum384(abi.SignedComponent(raw))
	sigR, sigS, err := ecdsa.Sign(rand.Reader, s.vcek, digest[:])
	if err != nil {
		return nil, fmt.Errorf("sim: sign report: %w", err)
	}
	if err := abi.SetSignature(sigR, sigS, raw); err != nil {
		return nil, fmt.Errorf("sim: sign report: %w", err)
	}
	return raw, nil
}

// LaunchMeasurement returns the simulated MEASUREMENT.
func (s *Simulator) LaunchMeasurement(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return bytes.Clone(s.measurement[:]), nil
}

// SealingKey returns a 32-byte SIMULATED sealing key: HKDF-SHA256 keyed with
// the seed-derived sealing root, info = sealingKeyLabel || 0x00 ||
// MEASUREMENT || u64le(POLICY) || u16be(len(label)) || label. It is as
// secret as the seed (defaultSeed is public) and protects nothing.
func (s *Simulator) SealingKey(ctx context.Context, label string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(label) == 0 || len(label) > maxLabelSize {
		return nil, fmt.Errorf("%w: length %d", errBadLabel, len(label))
	}
	info := make([]byte, 0, len(sealingKeyLabel)+1+abi.MeasurementSize+8+2+len(label))
	info = append(info, sealingKeyLabel...)
	info = append(info, 0)
	info = append(info, s.measurement[:]...)
	info = binary.LittleEndian.AppendUint64(info, s.policy)
	info = binary.BigEndian.AppendUint16(info, uint16(len(label)))
	info = append(info, label...)
	return hkdf.Key(sha256.New, s.sealRoot[:], nil, string(info), 32)
}
