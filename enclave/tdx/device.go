package tdx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/google/go-configfs-tsm/configfs/configfsi"
	"github.com/google/go-configfs-tsm/configfs/linuxtsm"
	"github.com/google/go-configfs-tsm/report"
	"github.com/google/go-tdx-guest/client"
)

// Transport names, as reported by Device.Transport.
const (
	transportConfigFS = "configfs-tsm"
	transportDevice   = "/dev/tdx_guest"
)

// configfsProvider is the configfs-tsm report provider name of TDX.
const configfsProvider = "tdx_guest"

// Device is the TDX guest of the machine this process runs in. It is safe
// for concurrent use; requests are serialized.
type Device struct {
	mu        sync.Mutex
	src       rawQuoter
	closer    func() error
	transport string
	closed    bool
	// ccelPath is the CC event log Quote reads into Aux "event_log".
	ccelPath string
}

var (
	_ enclave.Quoter   = (*Device)(nil)
	_ enclave.Namer    = (*Device)(nil)
	_ enclave.Measurer = (*Device)(nil)
)

// Open finds the TDX guest: configfs-tsm with provider "tdx_guest" first,
// then the /dev/tdx_guest device (path per go-tdx-guest's
// -tdx_guest_device_path flag). When neither is there it returns an error
// wrapping enclave.ErrNotAvailable with both reasons.
func Open() (*Device, error) {
	cfErr := probeConfigFS()
	if cfErr == nil {
		c, err := linuxtsm.MakeClient()
		if err == nil {
			return &Device{src: &configfsSource{client: c}, transport: transportConfigFS, ccelPath: defaultCCELPath}, nil
		}
		cfErr = err
	}
	dev, devErr := client.OpenDevice()
	if devErr == nil {
		return &Device{src: &deviceSource{dev: dev}, closer: dev.Close, transport: transportDevice, ccelPath: defaultCCELPath}, nil
	}
	return nil, fmt.Errorf("%w: tdx: configfs-tsm: %v; %s: %v", enclave.ErrNotAvailable, cfErr, transportDevice, devErr)
}

// probeConfigFS checks that configfs-tsm exists and its report provider is
// TDX, leaving no report entry behind.
func probeConfigFS() error {
	c, err := linuxtsm.MakeClient()
	if err != nil {
		return err
	}
	r, err := report.CreateOpenReport(c)
	if err != nil {
		return err
	}
	p, err := r.ReadOption("provider")
	err = errors.Join(err, r.Destroy())
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(p)); got != configfsProvider {
		return fmt.Errorf("report provider is %q, not %q", got, configfsProvider)
	}
	return nil
}

// Close releases the device. Later calls return errClosed.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.closer != nil {
		return d.closer()
	}
	return nil
}

// lockedSource serializes access to a Device's source. It is unexported so
// that Device offers no way to quote over raw, caller-chosen report data.
type lockedSource struct{ d *Device }

func (l lockedSource) GetRawQuote(rd [64]byte) ([]byte, error) {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	return d.src.GetRawQuote(rd)
}

// Quote returns hardware evidence over rd, with the CC event log when the
// ACPI CCEL table's log area is readable.
func (d *Device) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	ev, err := buildEvidence(ctx, lockedSource{d}, rd, false)
	if err != nil {
		return nil, err
	}
	log, err := enclave.ReadEventLog(d.ccelPath)
	if err != nil {
		return nil, err
	}
	if log != nil {
		ev.Aux = map[string][]byte{auxEventLog: log}
	}
	return ev, nil
}

// Platform returns evidence.PlatformTDX.
func (d *Device) Platform() string { return evidence.PlatformTDX }

// LaunchMeasurement returns MRTD (48 bytes), read from a fresh internal
// quote.
func (d *Device) LaunchMeasurement(ctx context.Context) ([]byte, error) {
	q, _, err := quote(ctx, lockedSource{d}, probeReportData())
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), q.Body.MRTD[:]...), nil
}

// configfsSource gets quotes through configfs-tsm.
type configfsSource struct {
	client configfsi.Client
}

func (s *configfsSource) GetRawQuote(rd [64]byte) ([]byte, error) {
	resp, err := report.Get(s.client, &report.Request{InBlob: rd[:]})
	if err != nil {
		return nil, err
	}
	if got := strings.TrimSpace(resp.Provider); got != configfsProvider {
		return nil, fmt.Errorf("report provider is %q, not %q", got, configfsProvider)
	}
	return resp.OutBlob, nil
}

// deviceSource gets quotes through the /dev/tdx_guest ioctls.
type deviceSource struct {
	dev client.Device
}

func (s *deviceSource) GetRawQuote(rd [64]byte) ([]byte, error) {
	return client.GetRawQuote(s.dev, rd)
}
