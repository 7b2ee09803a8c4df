// Package tpm is the TPM 2.0 backend of enclave: quotes signed by an
// attestation key (AK) in the endorsement hierarchy, the EK certificate, a
// PCR-digest launch measurement and PCR-policy sealing.
//
// Evidence format and verifier rules: docs/spec/platform-tpm.md. The pure
// parser and verifier live in wire/tpmquote.
package tpm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// Defaults.
const (
	defaultDevice       = "/dev/tpmrm0"
	defaultEventLogPath = "/sys/kernel/security/tpm0/binary_bios_measurements"

	// EK certificate NV indices (TCG EK Credential Profile 2.0, low range).
	nvIndexRSAEKCert uint32 = 0x01c00002
	nvIndexECCEKCert uint32 = 0x01c0000a
	// GCE's certified AK (ECC P-256): its template and its certificate
	// (docs/spec/platform-tpm.md section 2.5; go-tpm-tools' client/handles.go).
	nvIndexGCEAKTemplateECC uint32 = 0x01c10003
	nvIndexGCEAKCertECC     uint32 = 0x01c10002

	// akUniqueLabel seeds the unique field of the AK template, so the AK is
	// this project's own primary key, stable across restarts of one TPM.
	akUniqueLabel = "clawea.dev/attester/v1/tpm-ak"

	// quoteAttempts bounds retries when a PCR changes between the quote and
	// the PCR read that follows it.
	quoteAttempts = 3
	nvChunk       = 512
)

// defaultPCRs is the default SHA-256 PCR selection: PCRs 0-7.
func defaultPCRs() []int { return []int{0, 1, 2, 3, 4, 5, 6, 7} }

// Errors.
var (
	errClosed        = errors.New("tpm: closed")
	errOptions       = errors.New("tpm: invalid options")
	errPCRRace       = errors.New("tpm: pcrs kept changing during the quote")
	errUnexpectedTPM = errors.New("tpm: unexpected tpm response")
)

// Options selects the TPM and the PCRs. The zero value opens /dev/tpmrm0
// and quotes SHA-256 PCRs 0-7.
type Options struct {
	// Device is the TPM character device. Default defaultDevice. Use the
	// kernel resource manager (/dev/tpmrm0), not /dev/tpm0.
	Device string
	// Address is the host:port of a swtpm "--server type=tcp" data socket
	// (raw TPM 2.0 commands, TPM already started). It excludes Device.
	// Evidence from such a TPM is marked Simulated.
	Address string
	// PCRs is the SHA-256 PCR selection for Quote, LaunchMeasurement and
	// SealPCR: distinct indices in 0..23. Default defaultPCRs().
	PCRs []int
	// EventLogPath is read into Aux "event_log" when readable. Default
	// defaultEventLogPath for a device; none for Address.
	EventLogPath string
	// GCEAK uses the vTPM's certified AK instead of this package's: the
	// primary key the ECC template at NV 0x01c10003 makes in the
	// endorsement hierarchy, whose certificate (NV 0x01c10002) Quote
	// carries in Aux "ak_cert". Open fails when either index is missing.
	GCEAK bool
	// AzureIMDS is the base URL of the Azure instance metadata service
	// (OpenAzure only). Default http://169.254.169.254.
	AzureIMDS string
}

// TPM is an open TPM with a loaded attestation key. Its methods are safe for
// concurrent use; TPM commands are serialized.
type TPM struct {
	mu        sync.Mutex
	tp        transport.TPMCloser
	tcp       *tcpTransport // nil for a device
	simulated bool
	pcrs      []int
	eventLog  string
	gceAK     bool

	ak       tpm2.NamedHandle
	akPublic []byte // TPMT_PUBLIC as returned by the TPM
	ekCert   []byte // DER, nil when absent
	akCert   []byte // DER, GCEAK only
	closed   bool
}

var (
	_ enclave.Quoter   = (*TPM)(nil)
	_ enclave.Namer    = (*TPM)(nil)
	_ enclave.Measurer = (*TPM)(nil)
	_ pcrSealer        = (*TPM)(nil)
)

// pcrSealer is the optional capability of sealing secrets to PCR values.
type pcrSealer interface {
	SealPCR(ctx context.Context, label string, secret []byte) ([]byte, error)
	UnsealPCR(ctx context.Context, label string, blob []byte, dst []byte) (int, error)
}

// Open connects to the TPM, starts it if needed, creates the attestation
// key and reads the EK certificate. It returns an error wrapping
// enclave.ErrNotAvailable when there is no TPM at the device path or address.
func Open(ctx context.Context, opts Options) (*TPM, error) {
	t, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := t.init(ctx); err != nil {
		t.tp.Close()
		return nil, err
	}
	return t, nil
}

// connect opens the device or the TCP address of opts, without starting
// the TPM or creating a key.
func connect(ctx context.Context, opts Options) (*TPM, error) {
	pcrs, err := checkPCRs(opts.PCRs)
	if err != nil {
		return nil, err
	}
	t := &TPM{pcrs: pcrs, eventLog: opts.EventLogPath, gceAK: opts.GCEAK}
	switch {
	case opts.Address != "" && opts.Device != "":
		return nil, fmt.Errorf("%w: both device and address set", errOptions)
	case opts.Address != "":
		tcp, err := dialTCP(ctx, opts.Address)
		if err != nil {
			return nil, fmt.Errorf("%w: tpm at %s: %v", enclave.ErrNotAvailable, opts.Address, err)
		}
		t.tp, t.tcp, t.simulated = tcp, tcp, true
	default:
		dev := opts.Device
		if dev == "" {
			dev = defaultDevice
		}
		if t.tp, err = openDevice(dev); err != nil {
			return nil, err
		}
		if t.eventLog == "" {
			t.eventLog = defaultEventLogPath
		}
	}
	return t, nil
}

func checkPCRs(in []int) ([]int, error) {
	if len(in) == 0 {
		return defaultPCRs(), nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	for i, p := range out {
		if p < 0 || p >= tpmquote.NumPCRs {
			return nil, fmt.Errorf("%w: pcr %d out of range", errOptions, p)
		}
		if i > 0 && out[i-1] == p {
			return nil, fmt.Errorf("%w: pcr %d repeated", errOptions, p)
		}
	}
	return out, nil
}

func (t *TPM) init(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.bind(ctx)()
	if err := t.startup(); err != nil {
		return err
	}
	if err := t.createAK(); err != nil {
		return err
	}
	cert, err := t.readEKCert()
	if err != nil {
		t.flush(t.ak.Handle)
		return err
	}
	t.ekCert = cert
	return nil
}

// bind ties ctx to the TCP transport's I/O for the duration of one operation.
func (t *TPM) bind(ctx context.Context) func() {
	if t.tcp == nil {
		return func() {}
	}
	return t.tcp.bind(ctx)
}

// lock takes the TPM for one operation and binds ctx to its I/O.
func (t *TPM) lock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	stop := t.bind(ctx)
	return func() { stop(); t.mu.Unlock() }, nil
}

// startup sends TPM2_Startup(CLEAR) if the TPM reports it has not been
// started (a freshly powered simulator).
func (t *TPM) startup() error {
	_, err := tpm2.GetRandom{BytesRequested: 8}.Execute(t.tp)
	if errors.Is(err, tpm2.TPMRCInitialize) {
		if _, err := (tpm2.Startup{StartupType: tpm2.TPMSUClear}).Execute(t.tp); err != nil {
			return fmt.Errorf("tpm: startup: %w", err)
		}
		_, err = tpm2.GetRandom{BytesRequested: 8}.Execute(t.tp)
	}
	if err != nil {
		return fmt.Errorf("tpm: probe: %w", err)
	}
	return nil
}

// akTemplate is the AK: a restricted ECC P-256 ECDSA-SHA256 signing key,
// primary in the endorsement hierarchy, with an empty auth value.
func akTemplate() tpm2.TPMTPublic {
	unique := sha256.Sum256([]byte(akUniqueLabel))
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgECC,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM:            true,
			FixedParent:         true,
			SensitiveDataOrigin: true,
			UserWithAuth:        true,
			NoDA:                true,
			Restricted:          true,
			SignEncrypt:         true,
		},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTECCScheme{
				Scheme:  tpm2.TPMAlgECDSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256}),
			},
			CurveID: tpm2.TPMECCNistP256,
			KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
			X: tpm2.TPM2BECCParameter{Buffer: unique[:]},
			Y: tpm2.TPM2BECCParameter{Buffer: []byte{}},
		}),
	}
}

func (t *TPM) createAK() error {
	tmpl := akTemplate()
	if t.gceAK {
		var err error
		if tmpl, t.akCert, err = t.readGCEAK(); err != nil {
			return err
		}
	}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tmpl),
	}.Execute(t.tp)
	if err != nil {
		return fmt.Errorf("tpm: create ak: %w", err)
	}
	t.ak = tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name}
	pub := slices.Clone(rsp.OutPublic.Bytes())
	// The AK must be one the verifier accepts, and its Name must be the one
	// the TPM computed.
	parsed, err := tpmquote.ParsePublic(pub)
	if err == nil && !bytes.Equal(parsed.Name(), rsp.Name.Buffer) {
		err = errors.New("name mismatch")
	}
	if err != nil {
		t.flush(t.ak.Handle)
		return fmt.Errorf("%w: ak public: %v", errUnexpectedTPM, err)
	}
	t.akPublic = pub
	return nil
}

// readGCEAK reads the template and the certificate of the vTPM's
// certified AK from NV.
func (t *TPM) readGCEAK() (tpm2.TPMTPublic, []byte, error) {
	raw, err := t.readNV(tpm2.TPMHandle(nvIndexGCEAKTemplateECC), tpmquote.MaxCertSize)
	if err != nil {
		return tpm2.TPMTPublic{}, nil, fmt.Errorf("tpm: read gce ak template at 0x%08x: %w", nvIndexGCEAKTemplateECC, err)
	}
	tmpl, err := tpm2.Unmarshal[tpm2.TPMTPublic](raw)
	if err != nil {
		return tpm2.TPMTPublic{}, nil, fmt.Errorf("%w: gce ak template: %v", errUnexpectedTPM, err)
	}
	cert, err := t.readNV(tpm2.TPMHandle(nvIndexGCEAKCertECC), tpmquote.MaxCertSize)
	if err != nil {
		return tpm2.TPMTPublic{}, nil, fmt.Errorf("tpm: read gce ak certificate at 0x%08x: %w", nvIndexGCEAKCertECC, err)
	}
	return *tmpl, trimDER(cert), nil
}

func (t *TPM) flush(h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(t.tp)
}

// readEKCert returns the first EK certificate found in NV (RSA, then ECC),
// trimmed to its DER length, or nil when there is none.
func (t *TPM) readEKCert() ([]byte, error) {
	for _, idx := range []uint32{nvIndexRSAEKCert, nvIndexECCEKCert} {
		cert, err := t.readNV(tpm2.TPMHandle(idx), tpmquote.MaxCertSize)
		if errors.Is(err, tpm2.TPMRCHandle) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tpm: read ek certificate at 0x%08x: %w", idx, err)
		}
		return trimDER(cert), nil
	}
	return nil, nil
}

func (t *TPM) readNV(idx tpm2.TPMHandle, limit int) ([]byte, error) {
	pubRsp, err := tpm2.NVReadPublic{NVIndex: idx}.Execute(t.tp)
	if err != nil {
		return nil, err
	}
	pub, err := pubRsp.NVPublic.Contents()
	if err != nil {
		return nil, fmt.Errorf("%w: nv public: %v", errUnexpectedTPM, err)
	}
	size := int(pub.DataSize)
	if size == 0 || size > limit {
		return nil, fmt.Errorf("%w: nv index holds %d bytes", errUnexpectedTPM, size)
	}
	auth := tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	if !pub.Attributes.OwnerRead && pub.Attributes.AuthRead {
		auth = tpm2.AuthHandle{Handle: idx, Name: pubRsp.NVName, Auth: tpm2.PasswordAuth(nil)}
	}
	out := make([]byte, 0, size)
	for len(out) < size {
		n := min(nvChunk, size-len(out))
		rsp, err := tpm2.NVRead{
			AuthHandle: auth,
			NVIndex:    tpm2.NamedHandle{Handle: idx, Name: pubRsp.NVName},
			Size:       uint16(n),
			Offset:     uint16(len(out)),
		}.Execute(t.tp)
		if err != nil {
			return nil, err
		}
		if len(rsp.Data.Buffer) != n {
			return nil, fmt.Errorf("%w: nv read returned %d bytes, want %d", errUnexpectedTPM, len(rsp.Data.Buffer), n)
		}
		out = append(out, rsp.Data.Buffer...)
	}
	return out, nil
}

// trimDER cuts NV padding after a DER SEQUENCE; it returns b unchanged when
// b does not start with a definite-length SEQUENCE that fits.
func trimDER(b []byte) []byte {
	if len(b) < 2 || b[0] != 0x30 {
		return b
	}
	n, hdr := int(b[1]), 2
	if n&0x80 != 0 {
		k := n & 0x7f
		if k == 0 || k > 3 || len(b) < 2+k {
			return b
		}
		n = 0
		for _, c := range b[2 : 2+k] {
			n = n<<8 | int(c)
		}
		hdr = 2 + k
	}
	if hdr+n > len(b) {
		return b
	}
	return b[:hdr+n]
}

// Close flushes the AK and closes the connection.
func (t *TPM) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	stop := t.bind(context.Background())
	t.flush(t.ak.Handle)
	stop()
	return t.tp.Close()
}

// Platform implements enclave.Namer.
func (t *TPM) Platform() string { return evidence.PlatformTPM }

// AKPublic returns the AK's TPMT_PUBLIC bytes.
func (t *TPM) AKPublic() []byte { return slices.Clone(t.akPublic) }

// EKCertificate returns the EK certificate DER, or nil when the TPM has none.
func (t *TPM) EKCertificate() []byte { return slices.Clone(t.ekCert) }

func selection(pcrs []int) tpm2.TPMLPCRSelection {
	var bits [3]byte
	for _, p := range pcrs {
		bits[p/8] |= 1 << (p % 8)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash:      tpm2.TPMAlgSHA256,
		PCRSelect: bits[:],
	}}}
}

// readPCRs reads the SHA-256 values of pcrs (ascending); TPM2_PCR_Read returns
// at most 8 per call, so it loops over what is left.
func (t *TPM) readPCRs(pcrs []int) (tpmquote.PCRValues, error) {
	vals := make(map[int][]byte, len(pcrs))
	remaining := slices.Clone(pcrs)
	for len(remaining) > 0 {
		rsp, err := tpm2.PCRRead{PCRSelectionIn: selection(remaining)}.Execute(t.tp)
		if err != nil {
			return nil, fmt.Errorf("tpm: pcr read: %w", err)
		}
		sels := rsp.PCRSelectionOut.PCRSelections
		if len(sels) != 1 || sels[0].Hash != tpm2.TPMAlgSHA256 {
			return nil, fmt.Errorf("%w: pcr read returned no sha256 bank", errUnexpectedTPM)
		}
		var got []int
		for i := range tpmquote.NumPCRs {
			if i/8 < len(sels[0].PCRSelect) && sels[0].PCRSelect[i/8]&(1<<(i%8)) != 0 {
				got = append(got, i)
			}
		}
		if len(got) == 0 || len(got) != len(rsp.PCRValues.Digests) {
			return nil, fmt.Errorf("%w: pcr read returned %d values for %d pcrs", errUnexpectedTPM, len(rsp.PCRValues.Digests), len(got))
		}
		for i, p := range got {
			d := rsp.PCRValues.Digests[i].Buffer
			if !slices.Contains(remaining, p) || len(d) != sha256.Size {
				return nil, fmt.Errorf("%w: pcr read returned pcr %d", errUnexpectedTPM, p)
			}
			vals[p] = d
			remaining = slices.DeleteFunc(remaining, func(x int) bool { return x == p })
		}
	}
	out := make(tpmquote.PCRValues, len(pcrs))
	for i, p := range pcrs {
		out[i].Index = p
		copy(out[i].Value[:], vals[p])
	}
	return out, nil
}

// Quote implements enclave.Quoter: TPM2_Quote by the AK over the configured
// PCRs with qualifying data rd.QualifyingData(), then the PCR values read
// right after it (retried when a PCR changed in between).
func (t *TPM) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, err
	}
	qd := rd.QualifyingData()
	attest, sig, pcrs, err := t.quotePCRs(t.ak, qd[:])
	unlock()
	if err != nil {
		return nil, err
	}

	ev := &evidence.Evidence{
		Platform:  evidence.PlatformTPM,
		Simulated: t.simulated,
		Format:    tpmquote.Format,
		Blob:      attest,
		Signature: tpm2.Marshal(*sig),
		Aux: map[string][]byte{
			tpmquote.AuxAKPublic:  slices.Clone(t.akPublic),
			tpmquote.AuxPCRValues: pcrs.Marshal(),
		},
	}
	if t.ekCert != nil {
		ev.CertChain = [][]byte{slices.Clone(t.ekCert)}
	}
	log, err := enclave.ReadEventLog(t.eventLog)
	if err != nil {
		return nil, err
	}
	if log != nil {
		ev.Aux[tpmquote.AuxEventLog] = log
	}
	if t.akCert != nil {
		ev.Aux[tpmquote.AuxAKCert] = slices.Clone(t.akCert)
	}
	return ev, nil
}

// quotePCRs runs TPM2_Quote by key over t.pcrs with qualifying data qd
// and reads the PCR values right after it, retried when a PCR changed in
// between. The caller holds the lock.
func (t *TPM) quotePCRs(key tpm2.NamedHandle, qd []byte) ([]byte, *tpm2.TPMTSignature, tpmquote.PCRValues, error) {
	for range quoteAttempts {
		rsp, err := tpm2.Quote{
			SignHandle:     tpm2.AuthHandle{Handle: key.Handle, Name: key.Name, Auth: tpm2.PasswordAuth(nil)},
			QualifyingData: tpm2.TPM2BData{Buffer: qd},
			InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
			PCRSelect:      selection(t.pcrs),
		}.Execute(t.tp)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("tpm: quote: %w", err)
		}
		attest := slices.Clone(rsp.Quoted.Bytes())
		pcrs, err := t.readPCRs(t.pcrs)
		if err != nil {
			return nil, nil, nil, err
		}
		parsed, err := tpmquote.ParseAttest(attest)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: quote: %v", errUnexpectedTPM, err)
		}
		if d := pcrs.Digest(); bytes.Equal(parsed.PCRDigest, d[:]) {
			return attest, &rsp.Signature, pcrs, nil
		}
	}
	return nil, nil, nil, errPCRRace
}

// LaunchMeasurement implements enclave.Measurer: the SHA-256 PCR digest of
// the configured PCRs (the pcrDigest a quote over them carries).
func (t *TPM) LaunchMeasurement(ctx context.Context) ([]byte, error) {
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	pcrs, err := t.readPCRs(t.pcrs)
	if err != nil {
		return nil, err
	}
	d := pcrs.Digest()
	return d[:], nil
}
