package nvgpu

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/clawea/attester/enclave/nvgpu/internal/simkeys"
	"github.com/clawea/attester/wire/nvspdm"
	"github.com/clawea/attester/wire/simroots"
)

// The fake device's firmware: its FWID and measurement blocks are fixed, so
// a policy can pin them.
const (
	fakeDriver       = "clawea-sim-1.0"
	fakeMeasurements = 8
)

var (
	oidFWID   = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}
	oidSHA384 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
)

// fwidExtension is the FWID extension as NVIDIA's device certificates
// carry it: a sequence whose last element is the hash algorithm and FWID.
type fwidExtension struct {
	Version int
	FWID    fwidDigest
}

type fwidDigest struct {
	Alg    asn1.ObjectIdentifier
	Digest []byte
}

// fakeDevice is a TEST ONLY GPU: it signs real SPDM reports with a device
// key certified by the simulated NVIDIA root, so the real verifier runs.
type fakeDevice struct {
	cc       bool
	key      *ecdsa.PrivateKey
	chainPEM []byte
	fwid     []byte
}

// NewSimulated returns a GPU backed by the fake device, whose evidence is
// marked simulated and verifies only against the simulated NVIDIA root.
func NewSimulated() (*GPU, error) {
	d, err := newFakeDevice(true, "")
	if err != nil {
		return nil, err
	}
	return newGPU(d, true)
}

// newFakeDevice makes a fake whose confidential-computing mode is cc;
// certFWIDLabel, when set, puts another FWID in the certificate than in the
// reports (for tests of the verifier's binding check).
func newFakeDevice(cc bool, certFWIDLabel string) (*fakeDevice, error) {
	rootKey, err := simkeys.Key("root-ca")
	if err != nil {
		return nil, err
	}
	root, err := simroots.NVIDIAGPURoot()
	if err != nil {
		return nil, err
	}
	if !rootKey.PublicKey.Equal(root.PublicKey) {
		return nil, errors.New("nvgpu: the pinned simulated root does not match its seed")
	}
	key, err := simkeys.Key("device")
	if err != nil {
		return nil, err
	}
	fwid := sha512.Sum384([]byte("clawea simulated gpu firmware"))
	certFWID := fwid
	if certFWIDLabel != "" {
		certFWID = sha512.Sum384([]byte(certFWIDLabel))
	}
	ext, err := asn1.Marshal(fwidExtension{Version: 1, FWID: fwidDigest{Alg: oidSHA384, Digest: certFWID[:]}})
	if err != nil {
		return nil, err
	}
	tmpl := simkeys.Template(2, "TEST ONLY clawea simulated GPU device")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtraExtensions = []pkix.Extension{{Id: oidFWID, Value: ext}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, &key.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("nvgpu: fake device certificate: %w", err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})...)
	return &fakeDevice{cc: cc, key: key, chainPEM: chain, fwid: fwid[:]}, nil
}

func (f *fakeDevice) ccEnabled() (bool, error) { return f.cc, nil }

// attest signs a report for nonce like a Hopper GPU: all measurement blocks
// (fixed values), a fresh responder nonce, opaque data with a driver and
// VBIOS version and the FWID, and an ECDSA P-384 signature over SHA-384 of
// the request and response.
func (f *fakeDevice) attest(nonce [32]byte) ([]byte, []byte, error) {
	rep := &nvspdm.Report{Nonce: nonce}
	for i := 1; i <= fakeMeasurements; i++ {
		v := sha512.Sum384([]byte(fmt.Sprintf("clawea simulated gpu measurement %d", i)))
		rep.Measurements = append(rep.Measurements, nvspdm.Measurement{Index: uint8(i), Type: 1, Value: v[:]})
	}
	if _, err := rand.Read(rep.ResponderNonce[:]); err != nil {
		return nil, nil, err
	}
	rep.Opaque = []nvspdm.OpaqueItem{
		{Type: 3, Value: append([]byte(fakeDriver), 0)},
		{Type: 6, Value: []byte{0x00, 0x01, 0x00, 0x96, 0x01, 0, 0, 0}},
		{Type: nvspdm.OpaqueFWID, Value: f.fwid},
	}
	signed, err := rep.SignedPart()
	if err != nil {
		return nil, nil, err
	}
	sum := sha512.Sum384(signed)
	r, s, err := ecdsa.Sign(rand.Reader, f.key, sum[:])
	if err != nil {
		return nil, nil, err
	}
	rep.Signature = make([]byte, 96)
	r.FillBytes(rep.Signature[:48])
	s.FillBytes(rep.Signature[48:])
	out, err := rep.Marshal()
	if err != nil {
		return nil, nil, err
	}
	return out, append([]byte(nil), f.chainPEM...), nil
}
