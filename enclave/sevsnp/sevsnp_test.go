package sevsnp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/google/go-sev-guest/abi"
	labi "github.com/google/go-sev-guest/client/linuxabi"
	sgtest "github.com/google/go-sev-guest/testing"
	"github.com/google/go-sev-guest/validate"
	"github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

var (
	fakeCreated = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	fakeNow     = fakeCreated.Add(24 * time.Hour)
	fakeMeas    = bytes.Repeat([]byte{0x5a}, abi.MeasurementSize)
)

func reportData(t testing.TB, nonce byte) evidence.ReportData {
	t.Helper()
	rd, err := evidence.NewReportData([32]byte{nonce}, ed25519.PublicKey(make([]byte, 32)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// fakeReport is an unsigned v3 Milan report over rd with fakeMeas; the fake
// device signs it with go-sev-guest's fake VCEK when asked.
func fakeReport(rd [64]byte) [labi.SnpReportRespReportSize]byte {
	r := sgtest.CreateRawReport(&sgtest.TestReportOptions{
		ReportData: rd[:],
		FMS:        abi.MaskedCpuid1EaxFromSevProduct(abi.DefaultSevProduct()),
		Version:    abi.ReportVersion3,
	})
	copy(r[0x90:0xc0], fakeMeas)
	return r
}

type fake struct {
	signer *sgtest.AmdSigner
	dev    *sgtest.Device
}

// newFake is go-sev-guest's fake /dev/sev-guest (a fake AMD-SP signing with
// a fake ARK/ASK/VCEK hierarchy) answering for the given report data.
func newFake(t testing.TB, withCerts bool, rds ...[64]byte) *fake {
	t.Helper()
	signer, err := sgtest.DefaultTestOnlyCertChain("Milan-B1", fakeCreated)
	if err != nil {
		t.Fatal(err)
	}
	var certs []byte
	if withCerts {
		if certs, err = signer.CertTableBytes(); err != nil {
			t.Fatal(err)
		}
	}
	rsp := map[string]any{}
	for _, rd := range append(rds, [64]byte{}) {
		rsp[hex.EncodeToString(rd[:])] = &sgtest.GetReportResponse{Resp: labi.SnpReportRespABI{Data: fakeReport(rd)}}
	}
	return &fake{signer: signer, dev: &sgtest.Device{
		ReportDataRsp: rsp,
		Certs:         certs,
		Signer:        signer,
		SevProduct:    abi.DefaultSevProduct(),
		Keys:          map[string][]byte{},
	}}
}

func (f *fake) roots() map[string][]*trust.AMDRootCerts {
	return map[string][]*trust.AMDRootCerts{"Milan": {{ProductLine: "Milan", ProductCerts: &trust.ProductCerts{Ark: f.signer.Ark, Ask: f.signer.Ask}}}}
}

func (f *fake) ioctlDevice(opts Options) *Device {
	return newDevice(transportIoctl, &ioctlSource{dev: f.dev}, f.dev, opts)
}

func (f *fake) configfsDevice(opts Options) *Device {
	return newDevice(transportConfigFS, &providerSource{qp: &sgtest.QuoteProvider{Device: f.dev}, vmpl: opts.VMPL}, nil, opts)
}

func checkEvidence(t *testing.T, f *fake, ev *evidence.Evidence, rd evidence.ReportData) {
	t.Helper()
	if ev.Platform != evidence.PlatformSEVSNP || ev.Format != snpevidence.Format || ev.Simulated {
		t.Fatalf("marking: %q %q simulated=%v", ev.Platform, ev.Format, ev.Simulated)
	}
	p, err := snpevidence.Parse(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ev.CertChain[0], f.signer.Vcek.Raw) {
		t.Fatal("leaf is not the vcek")
	}
	a, err := p.Attestation()
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: fakeNow, TrustedRoots: f.roots()}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	b := rd.Bytes()
	if err := validate.SnpAttestation(a, &validate.Options{ReportData: b[:], Measurement: fakeMeas, GuestPolicy: abi.SnpPolicy{Debug: true}}); err != nil {
		t.Fatalf("validate: %v", err)
	}
	// The fake's guest policy has DEBUG set: a production policy refuses it.
	if err := validate.SnpAttestation(a, &validate.Options{ReportData: b[:]}); err == nil {
		t.Fatal("validate accepted a debug policy")
	}
	// Production roots refuse the fake hierarchy.
	a, _ = p.Attestation()
	if err := verify.SnpAttestation(a, &verify.Options{DisableCertFetching: true, Now: fakeNow}); err == nil {
		t.Fatal("production roots accepted the fake hierarchy")
	}
}

func TestQuoteIoctl(t *testing.T) {
	rd := reportData(t, 1)
	f := newFake(t, true, rd.Bytes())
	ev, err := f.ioctlDevice(Options{}).Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	checkEvidence(t, f, ev, rd)
	if len(ev.CertChain) != 3 || ev.Aux[snpevidence.AuxCertTable] == nil {
		t.Fatalf("chain %d, aux %v", len(ev.CertChain), ev.Aux != nil)
	}
}

func TestQuoteConfigFSProvider(t *testing.T) {
	rd := reportData(t, 2)
	f := newFake(t, true, rd.Bytes())
	d := f.configfsDevice(Options{})
	ev, err := d.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	checkEvidence(t, f, ev, rd)
	if d.transport != transportConfigFS || d.Platform() != evidence.PlatformSEVSNP {
		t.Fatal(d.transport, d.Platform())
	}
	// A leveled request on a provider that cannot level fails closed.
	vmpl := uint(1)
	if _, err := f.configfsDevice(Options{VMPL: &vmpl}).Quote(context.Background(), rd); !errors.Is(err, errDevice) {
		t.Fatalf("vmpl on unleveled provider: %v", err)
	}
}

func TestQuoteHostileCertTable(t *testing.T) {
	rd := reportData(t, 3)
	f := newFake(t, true, rd.Bytes())
	// One entry whose offset+length wraps around 2^32.
	table := make([]byte, 48+16)
	copy(table, snpevidence.GUIDVCEK[:])
	binary.LittleEndian.PutUint32(table[16:], 0xffffff00)
	binary.LittleEndian.PutUint32(table[20:], 0x200)
	f.dev.Certs = table
	for name, d := range map[string]*Device{"configfs": f.configfsDevice(Options{}), "ioctl": f.ioctlDevice(Options{})} {
		ev, err := d.Quote(context.Background(), rd)
		if err == nil || ev != nil {
			t.Errorf("%s: hostile table accepted", name)
		}
	}
}

func TestQuoteWithoutHostCerts(t *testing.T) {
	rd := reportData(t, 4)
	f := newFake(t, false, rd.Bytes())
	if _, err := f.ioctlDevice(Options{}).Quote(context.Background(), rd); !errors.Is(err, snpevidence.ErrNoEndorsementCert) {
		t.Fatalf("no certs: %v, want ErrNoEndorsementCert", err)
	}
	ev, err := f.ioctlDevice(Options{EndorsementCert: f.signer.Vcek.Raw}).Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.CertChain) != 1 || ev.Aux != nil {
		t.Fatalf("chain %d aux %v", len(ev.CertChain), ev.Aux)
	}
	checkEvidence(t, f, ev, rd)

	// A configured certificate for another key fails the self-check.
	other := selfSignedP384(t)
	if _, err := f.ioctlDevice(Options{EndorsementCert: other}).Quote(context.Background(), rd); !errors.Is(err, errSelfCheck) {
		t.Fatalf("wrong endorsement cert: %v, want ErrSelfCheck", err)
	}
}

func selfSignedP384(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not a vcek"}, NotAfter: fakeNow.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestQuoteReportDataMismatch(t *testing.T) {
	rd := reportData(t, 5)
	f := newFake(t, true)
	// The device answers rd with a report over other data.
	b := rd.Bytes()
	other := reportData(t, 6).Bytes()
	f.dev.ReportDataRsp[hex.EncodeToString(b[:])] = &sgtest.GetReportResponse{Resp: labi.SnpReportRespABI{Data: fakeReport(other)}}
	if _, err := f.ioctlDevice(Options{}).Quote(context.Background(), rd); !errors.Is(err, errReportDataMismatch) {
		t.Fatalf("got %v, want ErrReportDataMismatch", err)
	}
}

func TestQuoteDeviceErrors(t *testing.T) {
	rd := reportData(t, 7)
	f := newFake(t, true) // no response for rd
	if _, err := f.ioctlDevice(Options{}).Quote(context.Background(), rd); !errors.Is(err, errDevice) {
		t.Fatalf("got %v, want ErrDevice", err)
	}
	if _, err := f.ioctlDevice(Options{}).Quote(context.Background(), evidence.ReportData{}); !errors.Is(err, evidence.ErrZeroReportData) {
		t.Fatalf("zero report data: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.ioctlDevice(Options{}).Quote(ctx, rd); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	d := f.ioctlDevice(Options{})
	f.dev.Open("")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Quote(context.Background(), rd); !errors.Is(err, errDevice) {
		t.Fatalf("closed device: %v", err)
	}
}

func TestMeasurement(t *testing.T) {
	f := newFake(t, true)
	d := f.ioctlDevice(Options{})
	m, err := d.LaunchMeasurement(context.Background())
	if err != nil || !bytes.Equal(m, fakeMeas) {
		t.Fatalf("LaunchMeasurement = %x, %v", m, err)
	}
	m[0] ^= 1 // callers get copies
	if m2, _ := d.LaunchMeasurement(context.Background()); !bytes.Equal(m2, fakeMeas) {
		t.Fatal("cached measurement was mutated")
	}
}

func TestSealingKey(t *testing.T) {
	f := newFake(t, true)
	// The request SealingKey must send: VCEK root (0), fields MEASUREMENT |
	// FAMILY_ID | IMAGE_ID | POLICY (0b1111), VMPL 0, no SVN, no TCB.
	req := &labi.SnpDerivedKeyReqABI{RootKeySelect: 0, GuestFieldSelect: 0xf}
	derived := bytes.Repeat([]byte{0x33}, 32)
	f.dev.Keys[sgtest.DerivedKeyRequestToString(req)] = derived
	d := f.ioctlDevice(Options{})
	ctx := context.Background()
	k1, err := d.SealingKey(ctx, "pack-key")
	if err != nil {
		t.Fatal(err)
	}
	info := append([]byte(sealingKeyLabel), 0, 0, 8)
	info = append(info, "pack-key"...)
	want, _ := hkdf.Key(sha256.New, derived, nil, string(info), 32)
	if !bytes.Equal(k1, want) {
		t.Fatal("sealing key is not HKDF over the derived key and label")
	}
	k2, _ := d.SealingKey(ctx, "other")
	if bytes.Equal(k1, k2) {
		t.Fatal("labels share a key")
	}
	// Another workload (another derived key from the AMD-SP) gets another key.
	f.dev.Keys[sgtest.DerivedKeyRequestToString(req)] = bytes.Repeat([]byte{0x34}, 32)
	if k3, _ := d.SealingKey(ctx, "pack-key"); bytes.Equal(k1, k3) {
		t.Fatal("derived key does not reach the sealing key")
	}
	// Another VMPL is another request.
	vmpl := uint(2)
	if _, err := f.ioctlDevice(Options{VMPL: &vmpl}).SealingKey(ctx, "pack-key"); !errors.Is(err, errDevice) {
		t.Fatalf("vmpl 2: %v", err)
	}
	for _, l := range []string{"", string(make([]byte, maxLabelSize+1))} {
		if _, err := d.SealingKey(ctx, l); !errors.Is(err, errBadLabel) {
			t.Errorf("label %d bytes: %v", len(l), err)
		}
	}
	if _, err := f.configfsDevice(Options{}).SealingKey(ctx, "x"); !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("no key device: %v", err)
	}
}

func TestOpen(t *testing.T) {
	vmpl := uint(4)
	for name, o := range map[string]Options{
		"transport": {Transport: "tdx"},
		"vmpl":      {VMPL: &vmpl},
		"cert":      {EndorsementCert: []byte{1, 2}},
	} {
		if _, err := Open(o); !errors.Is(err, errBadOptions) {
			t.Errorf("%s: %v, want ErrBadOptions", name, err)
		}
	}
	d, err := Open(Options{})
	if err == nil {
		// Real SEV-SNP guest: one smoke quote.
		defer d.Close()
		if _, err := d.Quote(context.Background(), reportData(t, 1)); err != nil {
			t.Fatalf("hardware quote: %v", err)
		}
		return
	}
	if !errors.Is(err, enclave.ErrNotAvailable) {
		t.Fatalf("Open = %v, want ErrNotAvailable", err)
	}
}
