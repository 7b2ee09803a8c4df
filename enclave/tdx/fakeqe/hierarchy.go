// Package fakeqe is a fake Intel TDX quoting enclave for tests and simulated
// platforms. It signs real TDX v4 quotes over caller-chosen report data under
// a throwaway, TEST ONLY PCK hierarchy, so that go-tdx-guest's real verifier
// runs against them: with the pinned simulation root (package tdxsimroots)
// as the trusted root the quotes verify; with Intel's root they do not.
//
// Every key is derived from a fixed, public seed: nothing here is secret and
// nothing here may be trusted outside tests and explicitly allowed
// simulation. Quotes are marked in-band: the header user data starts with
// "TEST ONLY FAKE QE".
package fakeqe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tdxsimroots"
)

// Subject common names go-tdx-guest's verifier requires of a PCK chain.
const (
	rootCN         = "Intel SGX Root CA"
	intermediateCN = "Intel SGX PCK Platform CA"
	pckCN          = "Intel SGX PCK Certificate"
)

// seedPrefix domain-separates every seed this package derives a key from.
const seedPrefix = "clawea.dev/attester/v1/tdx-sim/TEST-ONLY/"

// pinnedSeed names the hierarchy whose root is tdxsimroots.Root().
const pinnedSeed = "pinned"

// FMSPC and PCEID are the platform identifiers in every fake PCK
// certificate. No Intel collateral exists for this FMSPC.
var (
	fmspc = [6]byte{0xc1, 0xa3, 0xea, 0x00, 0x00, 0x00}
	pceID = [2]byte{0x00, 0x00}
)

// Validity of every fake certificate.
var (
	notBefore = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2075, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// SGX PCK certificate extension OIDs (Intel SGX PCK Certificate and CRL
// Profile).
var (
	oidSGXExtension = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1}
	oidPPID         = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1, 1}
	oidTCB          = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1, 2}
	oidPCEID        = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1, 3}
	oidFMSPC        = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1, 4}
	oidSGXType      = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1, 5}
)

// errSeed is returned when a seed does not yield a valid P-256 scalar (the
// chance is about 2^-32 per seed).
var errSeed = errors.New("fakeqe: seed does not yield a p-256 key")

// Hierarchy is a TEST ONLY PCK hierarchy: root CA -> PCK Platform CA -> PCK
// leaf, plus the quoting enclave's attestation key.
type Hierarchy struct {
	root     *x509.Certificate
	pckKey   *ecdsa.PrivateKey
	akKey    *ecdsa.PrivateKey
	chainDER [][]byte // leaf, intermediate, root
	cpuSVN   [16]byte
	pceSVN   uint16
	// seed, rootKey and interKey sign TEST ONLY PCS collateral
	// (collateral.go).
	seed     string
	rootKey  *ecdsa.PrivateKey
	interKey *ecdsa.PrivateKey
}

// seedKey derives the P-256 key named label under seed. It is exported so
// that tests can check the pinned root against its seed.
func seedKey(seed, label string) (*ecdsa.PrivateKey, error) {
	d := sha256.Sum256([]byte(seedPrefix + seed + "/" + label))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %q/%q", errSeed, seed, label)
	}
	return k, nil
}

func serial(seed, label string) *big.Int {
	d := sha256.Sum256([]byte(seedPrefix + seed + "/serial/" + label))
	d[0] &= 0x7f
	d[0] |= 0x01
	return new(big.Int).SetBytes(d[:16])
}

func testOnlyName(cn string) pkix.Name {
	return pkix.Name{
		CommonName:         cn,
		Organization:       []string{"TEST ONLY clawea simulated TDX, not Intel"},
		OrganizationalUnit: []string{"TEST ONLY"},
	}
}

// pinnedHierarchy returns the hierarchy under the pinned simulation root
// (tdxsimroots.Root()). Only the intermediate and leaf signatures are made
// at run time; every key is fixed.
func pinnedHierarchy() (*Hierarchy, error) {
	root, err := tdxsimroots.Root()
	if err != nil {
		return nil, err
	}
	rootKey, err := seedKey(pinnedSeed, "root-ca")
	if err != nil {
		return nil, err
	}
	if !rootKey.PublicKey.Equal(root.PublicKey) {
		return nil, errors.New("fakeqe: pinned root does not match its seed")
	}
	return build(pinnedSeed, root, rootKey)
}

// NewHierarchy returns a hierarchy under a fresh TEST ONLY root for seed
// (which must differ from pinnedSeed). Its root is self-signed at run time;
// tests use it for "chain to another root".
func NewHierarchy(seed string) (*Hierarchy, error) {
	if seed == pinnedSeed {
		return nil, errors.New("fakeqe: the pinned seed is the default hierarchy (nil Options.Hierarchy)")
	}
	rootKey, err := seedKey(seed, "root-ca")
	if err != nil {
		return nil, err
	}
	der, err := rootCertificateDER(seed, rootKey)
	if err != nil {
		return nil, err
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: parse root: %w", err)
	}
	return build(seed, root, rootKey)
}

// rootCertificateDER self-signs a TEST ONLY root CA certificate for key.
// ECDSA signatures are randomized, so each call yields different bytes; the
// pinned root in tdxsimroots was made by one call and committed.
func rootCertificateDER(seed string, key *ecdsa.PrivateKey) ([]byte, error) {
	tmpl := certTemplate(seed, "root-ca", rootCN, x509.KeyUsageCertSign|x509.KeyUsageCRLSign)
	tmpl.IsCA, tmpl.MaxPathLen = true, 1
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: create root: %w", err)
	}
	return der, nil
}

// certTemplate is what every certificate of the hierarchy shares: a serial
// from seed and label, a TEST ONLY subject, the fixed validity, key usage.
func certTemplate(seed, label, cn string, usage x509.KeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          serial(seed, label),
		Subject:               testOnlyName(cn),
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              usage,
		BasicConstraintsValid: true,
	}
}

func build(seed string, root *x509.Certificate, rootKey *ecdsa.PrivateKey) (*Hierarchy, error) {
	interKey, err := seedKey(seed, "pck-platform-ca")
	if err != nil {
		return nil, err
	}
	pckKey, err := seedKey(seed, "pck-leaf")
	if err != nil {
		return nil, err
	}
	akKey, err := seedKey(seed, "attestation-key")
	if err != nil {
		return nil, err
	}
	interTmpl := certTemplate(seed, "pck-platform-ca", intermediateCN, x509.KeyUsageCertSign|x509.KeyUsageCRLSign)
	interTmpl.IsCA, interTmpl.MaxPathLenZero = true, true
	interDER, err := x509.CreateCertificate(rand.Reader, interTmpl, root, &interKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: create intermediate: %w", err)
	}
	inter, err := x509.ParseCertificate(interDER)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: parse intermediate: %w", err)
	}

	h := &Hierarchy{root: root, pckKey: pckKey, akKey: akKey, pceSVN: 13, seed: seed, rootKey: rootKey, interKey: interKey}
	for i := range h.cpuSVN {
		h.cpuSVN[i] = byte(i%4 + 1)
	}
	sgx, err := sgxExtension(seed, h.cpuSVN, h.pceSVN)
	if err != nil {
		return nil, err
	}
	pckPub, err := pckKey.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("fakeqe: pck key: %w", err)
	}
	skid := sha256.Sum256(pckPub)
	leafTmpl := certTemplate(seed, "pck-leaf", pckCN, x509.KeyUsageDigitalSignature|x509.KeyUsageContentCommitment)
	leafTmpl.SubjectKeyId = skid[:20]
	leafTmpl.CRLDistributionPoints = []string{"https://tdx-sim.invalid/TEST-ONLY/pckcrl?ca=platform&encoding=der"}
	leafTmpl.ExtraExtensions = []pkix.Extension{{Id: oidSGXExtension, Value: sgx}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, inter, &pckKey.PublicKey, interKey)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: create pck leaf: %w", err)
	}
	h.chainDER = [][]byte{leafDER, interDER, root.Raw}
	return h, nil
}

type oidBytes struct {
	ID    asn1.ObjectIdentifier
	Value []byte
}

type oidInt struct {
	ID    asn1.ObjectIdentifier
	Value int
}

type oidEnum struct {
	ID    asn1.ObjectIdentifier
	Value asn1.Enumerated
}

type oidSeq struct {
	ID    asn1.ObjectIdentifier
	Value []asn1.RawValue
}

func raw(v any) (asn1.RawValue, error) {
	b, err := asn1.Marshal(v)
	if err != nil {
		return asn1.RawValue{}, fmt.Errorf("fakeqe: asn1: %w", err)
	}
	return asn1.RawValue{FullBytes: b}, nil
}

// sgxExtension builds the value of the SGX extension of a PCK certificate:
// PPID, TCB (16 SGX TCB component SVNs, PCESVN, CPUSVN), PCE-ID, FMSPC and
// SGX type.
func sgxExtension(seed string, cpuSVN [16]byte, pceSVN uint16) ([]byte, error) {
	ppid := sha256.Sum256([]byte(seedPrefix + seed + "/ppid"))
	var tcb []asn1.RawValue
	for i := range cpuSVN {
		oid := append(append(asn1.ObjectIdentifier{}, oidTCB...), i+1)
		v, err := raw(oidInt{oid, int(cpuSVN[i])})
		if err != nil {
			return nil, err
		}
		tcb = append(tcb, v)
	}
	v, err := raw(oidInt{append(append(asn1.ObjectIdentifier{}, oidTCB...), 17), int(pceSVN)})
	if err != nil {
		return nil, err
	}
	tcb = append(tcb, v)
	v, err = raw(oidBytes{append(append(asn1.ObjectIdentifier{}, oidTCB...), 18), cpuSVN[:]})
	if err != nil {
		return nil, err
	}
	tcb = append(tcb, v)

	var items []asn1.RawValue
	for _, it := range []any{
		oidBytes{oidPPID, ppid[:16]},
		oidSeq{oidTCB, tcb},
		oidBytes{oidPCEID, pceID[:]},
		oidBytes{oidFMSPC, fmspc[:]},
		oidEnum{oidSGXType, 1},
	} {
		v, err := raw(it)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
	b, err := asn1.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: asn1: %w", err)
	}
	return b, nil
}

// chainPEM is the type-5 certification data of quotes under h.
func (h *Hierarchy) chainPEM() []byte { return tdxquote.EncodePCKChain(h.chainDER) }
