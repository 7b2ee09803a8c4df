package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/x509"
	_ "embed"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/nvspdm"
	"github.com/clawea/attester/wire/simroots"
)

// nvidiaRootSHA256 pins the NVIDIA Device Identity CA certificate (DER),
// the root of every NVIDIA GPU device certificate chain. The certificate is
// the last one of the chain NVIDIA's H100 returns (the nvidia-hopper
// conformance samples) and the root Trustee's NVIDIA verifier embeds.
const nvidiaRootSHA256 = "102bf659d5419614c9d8e6aecebc80454eb26b1df6a769ac720b9a690b167b48"

//go:embed nvidia_device_identity_ca.pem
var nvidiaRootPEM []byte

// Root identifiers of NVIDIA GPU evidence.
const (
	rootIDNVIDIA    = "nvidia-device-identity-ca"
	rootIDSimNVIDIA = "sim-nvidia-device-identity-ca"
)

// oidFWID is the TCG DICE FWID extension (2.23.133.5.4.1) of the GPU's
// signing certificate; its last element is SEQUENCE { hash OID, OCTET
// STRING fwid }.
var (
	oidFWID   = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}
	oidSHA384 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
)

// gpuMaxCerts bounds a device certificate chain.
const gpuMaxCerts = 8

// NVIDIA opaque data types read into GPUClaims.
const (
	opaqueDriverVersion = 3
	opaqueVBIOSVersion  = 6
)

// errGPUChainShort: the chain is the root alone (class ErrRejected).
var errGPUChainShort = errors.New("platform: the gpu certificate chain holds no device certificate (root only)")

// GPUClaims are the verified fields of NVIDIA GPU evidence.
type GPUClaims struct {
	// Nonce is the verified requester nonce of the report.
	Nonce [32]byte
	// FWID is the firmware id, equal in the report and in the signing
	// certificate's FWID extension.
	FWID []byte
	// Measurements are the measurement values by block index.
	Measurements map[int][]byte
	// DriverVersion and VBIOSVersion are from the signed opaque data.
	DriverVersion, VBIOSVersion string
	// Device is the signing certificate's subject.
	Device string
}

type gpuRoots struct {
	real, sim *x509.Certificate
}

var nvidiaRoots = sync.OnceValues(func() (*gpuRoots, error) {
	real, err := pinnedRoot("nvidia", nvidiaRootPEM, nvidiaRootSHA256)
	if err != nil {
		return nil, err
	}
	sim, err := simroots.NVIDIAGPURoot()
	if err != nil {
		return nil, err
	}
	return &gpuRoots{real: real, sim: sim}, nil
})

// verifyNVIDIAGPU verifies GPU evidence whose requester nonce must be
// rd.GPUNonce().
func verifyNVIDIAGPU(ev *evidence.Evidence, rd evidence.ReportData, now time.Time, opts *Options) (*Result, error) {
	if rd.IsZero() {
		return nil, badOptions("gpu evidence needs report data built by evidence.NewReportData")
	}
	if err := refuseUnallowedSimulated(ev, opts); err != nil {
		return nil, err
	}
	if ev.Format != nvspdm.Format {
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: format %q for platform %s", errUnsupported, ev.Format, ev.Platform))
	}
	if len(ev.Signature) != 0 || len(ev.Aux) != 0 {
		return nil, rejected(checkParse, errors.New("gpu evidence carries no detached signature and no aux data"))
	}
	nonce := rd.GPUNonce()
	res, err := verifyGPUReport(ev.Blob, ev.CertChain, nonce[:], now, ev.Simulated, opts.AllowUncheckedRevocation || opts.AllowUncheckedGPURevocation)
	if err != nil {
		return nil, err
	}
	res.ReportData = rd.Bytes()
	return res, nil
}

// verifyNVIDIAReport verifies a raw NVIDIA GPU attestation report (binary
// SPDM request and response) with its certificate chain (DER, leaf first,
// the root optional) against the NVIDIA Device Identity CA at now (VerifyRaw
// format nvidia-gpu). nonce, when not nil, must
// equal the report's requester nonce; when nil the nonce is not checked and
// Result.GPU.Nonce says what the report carries. Revocation is not checked
// (Result.Revocation is StatusSkipped).
func verifyNVIDIAReport(report []byte, chain [][]byte, nonce []byte, now time.Time) (*Result, error) {
	if nonce != nil && len(nonce) != 32 {
		return nil, badOptions("gpu nonce is %d bytes, want 32", len(nonce))
	}
	return verifyGPUReport(report, chain, nonce, now, false, true)
}

func verifyGPUReport(blob []byte, chain [][]byte, nonce []byte, now time.Time, sim, allowUnrevoked bool) (*Result, error) {
	rep, err := nvspdm.Parse(blob)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	leaf, rootID, err := verifyGPUChain(chain, now, sim)
	if err != nil {
		return nil, err
	}
	if err := checkGPUFWID(leaf, rep.FWID()); err != nil {
		return nil, err
	}
	if err := checkGPUSignature(leaf, rep); err != nil {
		return nil, err
	}
	if nonce != nil && subtle.ConstantTimeCompare(nonce, rep.Nonce[:]) != 1 {
		return nil, rejected(CheckReportData, fmt.Errorf("%w: gpu report nonce %x is not the expected nonce", ErrReportData, rep.Nonce))
	}
	if !allowUnrevoked {
		return nil, cannotCheck(checkRevocation, fmt.Errorf("%w: no revocation data for the gpu certificate chain (allow unchecked gpu revocation)", errMissingCollateral))
	}
	digest, err := rep.MeasurementDigest()
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	c := &GPUClaims{Nonce: rep.Nonce, FWID: rep.FWID(), Measurements: map[int][]byte{}, Device: leaf.Subject.String()}
	for _, m := range rep.Measurements {
		c.Measurements[int(m.Index)] = clone(m.Value)
	}
	for _, it := range rep.Opaque {
		switch it.Type {
		case opaqueDriverVersion:
			c.DriverVersion = strings.TrimRight(string(it.Value), "\x00")
		case opaqueVBIOSVersion:
			c.VBIOSVersion = vbiosVersion(it.Value)
		}
	}
	return &Result{
		Platform:    evidence.PlatformNVIDIAGPU,
		Format:      nvspdm.Format,
		Simulated:   sim,
		Measurement: digest,
		TCB:         "vbios " + c.VBIOSVersion + " driver " + c.DriverVersion,
		RootID:      rootID,
		Revocation:  StatusSkipped,
		Collateral:  statusNotApplicable,
		GPU:         c,
	}, nil
}

// vbiosVersion formats the opaque VBIOS version as NVIDIA's tools do: the
// first half of the bytes reversed, then the first byte of the second half,
// in hex, dot-separated (e.g. 96.00.9f.00.01).
func vbiosVersion(b []byte) string {
	if len(b) < 2 {
		return hex.EncodeToString(b)
	}
	var parts []string
	for i := len(b)/2 - 1; i >= 0; i-- {
		parts = append(parts, hex.EncodeToString(b[i:i+1]))
	}
	return strings.Join(append(parts, hex.EncodeToString(b[len(b)/2:len(b)/2+1])), ".")
}

// verifyGPUChain verifies the chain, leaf first, to the pinned NVIDIA root
// (or, for simulated evidence, the simulation root only) at now and returns
// the leaf and the root id. A root at the end of the chain must be the
// pinned one; a chain with no certificate below the root is refused.
func verifyGPUChain(chain [][]byte, now time.Time, sim bool) (*x509.Certificate, string, error) {
	rs, err := nvidiaRoots()
	if err != nil {
		return nil, "", cannotCheck(checkRoot, fmt.Errorf("loading pinned roots: %w", err))
	}
	root, rootID := rs.real, rootIDNVIDIA
	if sim {
		root, rootID = rs.sim, rootIDSimNVIDIA
	}
	if len(chain) == 0 || len(chain) > gpuMaxCerts {
		return nil, "", rejected(checkChain, fmt.Errorf("gpu certificate chain has %d certificates, want 1..%d", len(chain), gpuMaxCerts))
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		if certs[i], err = x509.ParseCertificate(der); err != nil {
			return nil, "", rejected(checkChain, fmt.Errorf("gpu certificate %d: %v", i, err))
		}
	}
	last := certs[len(certs)-1]
	if bytes.Equal(last.Raw, root.Raw) {
		certs = certs[:len(certs)-1]
	} else if bytes.Equal(last.RawIssuer, last.RawSubject) {
		return nil, "", rejected(checkRoot, fmt.Errorf("%w: the gpu chain ends in %q, not the pinned %s", ErrUntrustedRoot, last.Subject.String(), rootID))
	}
	if len(certs) == 0 {
		return nil, "", rejected(checkChain, errGPUChainShort)
	}
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	pool.AddCert(root)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	leaf := certs[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, "", rejected(checkChain, fmt.Errorf("gpu device certificate does not chain to %s at %s: %v", rootID, now.UTC().Format(time.RFC3339), err))
	}
	if leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return nil, "", rejected(checkChain, errors.New("gpu signing certificate lacks the digitalSignature key usage"))
	}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P384() {
		return nil, "", rejected(checkChain, errors.New("gpu signing key is not ECDSA P-384"))
	}
	return leaf, rootID, nil
}

// checkGPUFWID compares the report's FWID with the signing certificate's
// FWID extension.
func checkGPUFWID(leaf *x509.Certificate, fwid []byte) error {
	var val []byte
	for _, e := range leaf.Extensions {
		if e.Id.Equal(oidFWID) {
			if val != nil {
				return rejected(checkBinding, errors.New("gpu signing certificate has two fwid extensions"))
			}
			val = e.Value
		}
	}
	if val == nil {
		return rejected(checkBinding, errors.New("gpu signing certificate has no fwid extension (2.23.133.5.4.1)"))
	}
	certFWID, err := parseFWIDExtension(val)
	if err != nil {
		return rejected(checkBinding, err)
	}
	if !bytes.Equal(certFWID, fwid) {
		return rejected(checkBinding, fmt.Errorf("gpu report fwid %x differs from the signing certificate's %x", fwid, certFWID))
	}
	return nil
}

// parseFWIDExtension returns the SHA-384 digest of the extension's last
// element, SEQUENCE { OID sha384, OCTET STRING (48 bytes) }.
func parseFWIDExtension(val []byte) ([]byte, error) {
	var outer asn1.RawValue
	if rest, err := asn1.Unmarshal(val, &outer); err != nil || len(rest) != 0 || outer.Tag != asn1.TagSequence || !outer.IsCompound {
		return nil, errors.New("gpu fwid extension is not one sequence")
	}
	var last asn1.RawValue
	for rest := outer.Bytes; len(rest) > 0; {
		var err error
		if rest, err = asn1.Unmarshal(rest, &last); err != nil {
			return nil, fmt.Errorf("gpu fwid extension: %v", err)
		}
	}
	var fw struct {
		Alg    asn1.ObjectIdentifier
		Digest []byte
	}
	if rest, err := asn1.Unmarshal(last.FullBytes, &fw); err != nil || len(rest) != 0 {
		return nil, errors.New("gpu fwid extension: last element is not a hash algorithm and digest")
	}
	if !fw.Alg.Equal(oidSHA384) || len(fw.Digest) != 48 {
		return nil, fmt.Errorf("gpu fwid extension: digest %s of %d bytes, want sha-384", fw.Alg, len(fw.Digest))
	}
	return fw.Digest, nil
}

// checkGPUSignature verifies the device key's ECDSA P-384 signature over
// SHA-384 of the request and the response up to the signature.
func checkGPUSignature(leaf *x509.Certificate, rep *nvspdm.Report) error {
	signed, err := rep.SignedPart()
	if err != nil {
		return rejected(checkParse, err)
	}
	pub := leaf.PublicKey.(*ecdsa.PublicKey)
	sum := sha512.Sum384(signed)
	r := new(big.Int).SetBytes(rep.Signature[:48])
	s := new(big.Int).SetBytes(rep.Signature[48:])
	if !ecdsa.Verify(pub, sum[:], r, s) {
		return rejected(checkSignature, errors.New("gpu report signature does not verify under the signing certificate's key"))
	}
	return nil
}
