// Package sevsnp is the AMD SEV-SNP backend: it obtains extended attestation
// reports from the guest device of a confidential VM (configfs-tsm or
// /dev/sev-guest) through github.com/google/go-sev-guest and packages them as
// evidence.Evidence in the format of package snpevidence
// (docs/spec/platform-sevsnp.md).
//
// go-sev-guest registers global command-line flags (sev_guest_device_path,
// default_vmpl, self_throttle_*) when imported; this package defines none.
package sevsnp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/client"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

// Transports, for Options.Transport.
const (
	// transportConfigFS is the kernel's configfs-tsm report interface
	// (/sys/kernel/config/tsm/report, provider sev_guest).
	transportConfigFS = "configfs-tsm"
	// transportIoctl is the /dev/sev-guest ioctl interface.
	transportIoctl = "sev-guest"
)

// sealingKeyLabel is the HKDF info prefix of SealingKey.
const sealingKeyLabel = "clawea.dev/attester/v1/sealing-key/sev-snp"

// maxLabelSize bounds SealingKey labels.
const maxLabelSize = 256

const maxVMPL = 3

var (
	// errBadOptions is returned by Open for invalid options.
	errBadOptions = errors.New("sevsnp: invalid options")
	// errDevice is returned when the guest device fails a request.
	errDevice = errors.New("sevsnp: device request failed")
	// errReportDataMismatch is returned when the device returns a report
	// whose REPORT_DATA is not the one requested.
	errReportDataMismatch = errors.New("sevsnp: report does not carry the requested report data")
	// errSelfCheck is returned when a fresh report's signature does not
	// verify under the endorsement certificate that would accompany it.
	errSelfCheck = errors.New("sevsnp: report signature does not verify under its endorsement certificate")
	// errBadLabel is returned by SealingKey for an empty or oversized label.
	errBadLabel = errors.New("sevsnp: invalid sealing key label")
)

// Options configure Open. The zero value autodetects the transport.
type Options struct {
	// Transport selects transportConfigFS or transportIoctl; empty tries
	// configfs-tsm first, then /dev/sev-guest.
	Transport string
	// VMPL is the privilege level requested for reports and derived keys
	// (0-3). Nil means the driver's default for reports and 0 for keys.
	VMPL *uint
	// EndorsementCert is the DER VCEK or VLEK certificate of this machine
	// at its current TCB, for hosts whose certificate table lacks it. When
	// the host supplies one, the host's is used.
	EndorsementCert []byte
}

// Device is an open SEV-SNP guest device. It serializes requests and is safe
// for concurrent use.
type Device struct {
	mu          sync.Mutex
	transport   string
	src         quoteSource
	keyDev      client.Device // nil when MSG_KEY_REQ is unavailable
	vmpl        *uint
	endorsement []byte
	measurement []byte // cached: constant for the life of the VM
}

var (
	_ enclave.Quoter       = (*Device)(nil)
	_ enclave.Namer        = (*Device)(nil)
	_ enclave.Measurer     = (*Device)(nil)
	_ enclave.SealingKeyer = (*Device)(nil)
)

// quoteSource returns a raw report and the host's certificate table (nil if
// none) for report data.
type quoteSource interface {
	rawQuote(rd [64]byte) (report, certTable []byte, err error)
}

// providerSource wraps a go-sev-guest QuoteProvider (configfs-tsm), whose
// output is the report followed by the certificate table.
type providerSource struct {
	qp   client.QuoteProvider
	lqp  client.LeveledQuoteProvider // nil if qp is not leveled
	vmpl *uint
}

func (s *providerSource) rawQuote(rd [64]byte) (report, table []byte, err error) {
	// go-sev-guest parses the host's certificate table inside the provider;
	// the host is untrusted and some malformed tables make that parser
	// panic. Turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			report, table, err = nil, nil, fmt.Errorf("%w: provider failed on the host's certificate table", errDevice)
		}
	}()
	var raw []byte
	if s.vmpl != nil {
		if s.lqp == nil {
			return nil, nil, fmt.Errorf("%w: provider cannot select a vmpl", errDevice)
		}
		raw, err = s.lqp.GetRawQuoteAtLevel(rd, *s.vmpl)
	} else {
		raw, err = s.qp.GetRawQuote(rd)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errDevice, err)
	}
	if len(raw) < abi.ReportSize {
		return nil, nil, fmt.Errorf("%w: quote is %d bytes, shorter than a report", errDevice, len(raw))
	}
	if len(raw)-abi.ReportSize > snpevidence.MaxCertTableSize {
		return nil, nil, fmt.Errorf("%w: certificate table exceeds %d bytes", errDevice, snpevidence.MaxCertTableSize)
	}
	return raw[:abi.ReportSize:abi.ReportSize], raw[abi.ReportSize:], nil
}

// ioctlSource uses the /dev/sev-guest extended report ioctl.
type ioctlSource struct {
	dev  client.Device
	vmpl uint
}

func (s *ioctlSource) rawQuote(rd [64]byte) ([]byte, []byte, error) {
	//lint:ignore SA1019 the ioctl path needs the device-level call.
	report, certs, err := client.GetRawExtendedReportAtVmpl(s.dev, rd, int(s.vmpl))
	if err == nil && len(report) == 0 {
		// go-sev-guest returns no report and no error when the host has an
		// empty certificate store.
		err = errors.New("host returned no report")
	}
	if err == nil {
		if len(certs) > snpevidence.MaxCertTableSize {
			return nil, nil, fmt.Errorf("%w: certificate table exceeds %d bytes", errDevice, snpevidence.MaxCertTableSize)
		}
		return report, certs, nil
	}
	// Hosts without a certificate store fail the extended request: fall back
	// to a plain report (go-sev-guest's ioctl provider does the same).
	//lint:ignore SA1019 the leveled quote provider has no plain-report fallback for the ioctl device; this is the library's own fallback path
	report, err2 := client.GetRawReportAtVmpl(s.dev, rd, int(s.vmpl))
	if err2 != nil {
		return nil, nil, fmt.Errorf("%w: extended report: %v; report: %v", errDevice, err, err2)
	}
	return report, nil, nil
}

func (o *Options) check() error {
	switch o.Transport {
	case "", transportConfigFS, transportIoctl:
	default:
		return fmt.Errorf("%w: unknown transport %q", errBadOptions, o.Transport)
	}
	if o.VMPL != nil && *o.VMPL > maxVMPL {
		return fmt.Errorf("%w: vmpl %d", errBadOptions, *o.VMPL)
	}
	if o.EndorsementCert != nil {
		if len(o.EndorsementCert) > snpevidence.MaxCertSize {
			return fmt.Errorf("%w: endorsement certificate is %d bytes", errBadOptions, len(o.EndorsementCert))
		}
		c, err := x509.ParseCertificate(o.EndorsementCert)
		if err != nil {
			return fmt.Errorf("%w: endorsement certificate: %v", errBadOptions, err)
		}
		if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P384() {
			return fmt.Errorf("%w: endorsement certificate key is not ecdsa p-384", errBadOptions)
		}
	}
	return nil
}

// newDevice builds a Device over a quote source and an optional key device.
func newDevice(transport string, src quoteSource, keyDev client.Device, opts Options) *Device {
	return &Device{
		transport:   transport,
		src:         src,
		keyDev:      keyDev,
		vmpl:        opts.VMPL,
		endorsement: bytes.Clone(opts.EndorsementCert),
	}
}

// Platform returns evidence.PlatformSEVSNP.
func (d *Device) Platform() string { return evidence.PlatformSEVSNP }

// String describes the device.
func (d *Device) String() string { return "sevsnp.Device(" + d.transport + ")" }

// Close releases the guest device.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.src = closedSource{}
	if d.keyDev == nil {
		return nil
	}
	err := d.keyDev.Close()
	d.keyDev = nil
	return err
}

type closedSource struct{}

func (closedSource) rawQuote([64]byte) ([]byte, []byte, error) {
	return nil, nil, fmt.Errorf("%w: device closed", errDevice)
}

// Quote returns evidence over an extended attestation report whose
// REPORT_DATA is rd: Blob is the raw report as signed, CertChain the
// VCEK/VLEK (then ASK, ARK when the host provides them), Aux["cert_table"]
// the host's certificate table in canonical encoding. Before returning, it
// checks that the report carries rd and that its signature verifies under the
// leaf certificate.
func (d *Device) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	want := rd.Bytes()
	d.mu.Lock()
	report, table, err := d.src.rawQuote(want)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(report) != abi.ReportSize {
		return nil, fmt.Errorf("%w: report is %d bytes", errDevice, len(report))
	}
	if !bytes.Equal(report[0x50:0x90], want[:]) {
		return nil, errReportDataMismatch
	}
	canon, err := snpevidence.CanonicalCertTable(table)
	if err != nil {
		return nil, fmt.Errorf("sevsnp: host certificate table: %w", err)
	}
	ev, err := snpevidence.Build(report, canon, d.endorsement, false)
	if err != nil {
		return nil, err
	}
	p, err := snpevidence.Parse(ev)
	if err != nil {
		return nil, err
	}
	if err := checkSignature(p.Report, p.Leaf); err != nil {
		return nil, err
	}
	return ev, nil
}

// checkSignature verifies the report's ECDSA P-384 signature under leaf.
func checkSignature(report []byte, leaf *x509.Certificate) error {
	der, err := abi.ReportToSignatureDER(report)
	if err != nil {
		return fmt.Errorf("%w: %v", errSelfCheck, err)
	}
	if err := leaf.CheckSignature(x509.ECDSAWithSHA384, abi.SignedComponent(report), der); err != nil {
		return fmt.Errorf("%w: %v", errSelfCheck, err)
	}
	return nil
}

// freshReport returns a parsed report over all-zero report data. It is for
// reading launch-time fields, never evidence.
func (d *Device) freshReport() (*spb.Report, error) {
	d.mu.Lock()
	report, _, err := d.src.rawQuote([64]byte{})
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r, err := abi.ReportToProto(report)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errDevice, err)
	}
	return r, nil
}

// LaunchMeasurement returns the 48-byte MEASUREMENT of a fresh report.
func (d *Device) LaunchMeasurement(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	m := d.measurement
	d.mu.Unlock()
	if m != nil {
		return bytes.Clone(m), nil
	}
	r, err := d.freshReport()
	if err != nil {
		return nil, err
	}
	m = bytes.Clone(r.GetMeasurement())
	d.mu.Lock()
	d.measurement = m
	d.mu.Unlock()
	return bytes.Clone(m), nil
}

// derivedKeyRequest is the MSG_KEY_REQ SealingKey sends: root key VCEK (so
// the key is bound to this chip), mixing MEASUREMENT, POLICY, FAMILY_ID and
// IMAGE_ID (so another workload gets another key). TCB_VERSION and GUEST_SVN
// are not mixed: the key survives firmware updates; TCB is judged by the
// verifier from the evidence instead.
func (d *Device) derivedKeyRequest() *client.SnpDerivedKeyReq {
	var vmpl uint32
	if d.vmpl != nil {
		vmpl = uint32(*d.vmpl)
	}
	return &client.SnpDerivedKeyReq{
		UseVCEK: true,
		GuestFieldSelect: client.GuestFieldSelect{
			Measurement: true,
			GuestPolicy: true,
			FamilyID:    true,
			ImageID:     true,
		},
		Vmpl: vmpl,
	}
}

// SealingKey returns a 32-byte key: HKDF-SHA256 with the 32-byte derived key
// of derivedKeyRequest as secret, no salt, and info = sealingKeyLabel || 0x00
// || u16be(len(label)) || label. It needs /dev/sev-guest.
func (d *Device) SealingKey(ctx context.Context, label string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(label) == 0 || len(label) > maxLabelSize {
		return nil, fmt.Errorf("%w: length %d", errBadLabel, len(label))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keyDev == nil {
		return nil, fmt.Errorf("%w: sev-snp: derived keys need /dev/sev-guest", enclave.ErrNotAvailable)
	}
	resp, err := client.GetDerivedKeyAcknowledgingItsLimitations(d.keyDev, d.derivedKeyRequest())
	if err != nil {
		return nil, fmt.Errorf("%w: derived key: %v", errDevice, err)
	}
	defer clear(resp.Data[:])
	if resp.Status != 0 {
		return nil, fmt.Errorf("%w: derived key status %#x", errDevice, resp.Status)
	}
	info := make([]byte, 0, len(sealingKeyLabel)+3+len(label))
	info = append(info, sealingKeyLabel...)
	info = append(info, 0)
	info = binary.BigEndian.AppendUint16(info, uint16(len(label)))
	info = append(info, label...)
	return hkdf.Key(sha256.New, resp.Data[:], nil, string(info), 32)
}
