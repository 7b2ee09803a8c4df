package tpmcred

import (
	"cmp"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/cryptobyte"

	"github.com/clawea/attester/wire/tpmquote"
)

// Certification is the record a successful activation leaves: the AK, the
// EK certificate it was certified through (with the intermediates needed to
// reach a TPM manufacturer root), when and by whom. It is not signed: it
// states what its author checked, and is trusted as far as the channel that
// delivered it (an operator-reviewed policy file). VerifyCertification
// re-checks everything in it that can be re-checked offline.
type Certification struct {
	AKPublic        []byte    // TPMT_PUBLIC
	EKCert          []byte    // DER
	EKIntermediates [][]byte  // DER, leaf side first, at most maxIntermediates
	ActivatedAt     time.Time // whole seconds, UTC, after 1970
	// ActivatedBy names who ran the activation (1..255 bytes of printable
	// UTF-8, no control characters). Informational.
	ActivatedBy string
}

// NewCertification makes the record for c, activated at now by by.
func NewCertification(c *Certified, intermediates [][]byte, now time.Time, by string) (*Certification, error) {
	if c == nil || c.EKCert == nil {
		return nil, fmt.Errorf("%w: no ek certificate: the activation was not made from one", ErrOptions)
	}
	rec := &Certification{
		AKPublic:    slices.Clone(c.AKPublic),
		EKCert:      slices.Clone(c.EKCert),
		ActivatedAt: now.UTC().Truncate(time.Second),
		ActivatedBy: by,
	}
	for _, der := range intermediates {
		rec.EKIntermediates = append(rec.EKIntermediates, slices.Clone(der))
	}
	if _, err := ParseCertification(rec.Marshal()); err != nil {
		return nil, err
	}
	return rec, nil
}

// Marshal encodes c (spec section 2.2).
func (c *Certification) Marshal() []byte {
	b := append([]byte(CertificationLabel), 0)
	b = put2b(b, c.AKPublic)
	b = put2b(b, c.EKCert)
	b = append(b, byte(len(c.EKIntermediates)))
	for _, der := range c.EKIntermediates {
		b = put2b(b, der)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(c.ActivatedAt.Unix()))
	b = append(b, byte(len(c.ActivatedBy)))
	return append(b, c.ActivatedBy...)
}

// ParseCertification parses a record strictly. It checks the encoding only;
// VerifyCertification checks the contents.
func ParseCertification(b []byte) (*Certification, error) {
	if len(b) > maxCertificationSize {
		return nil, fmt.Errorf("%w: certification is %d bytes", ErrMalformed, len(b))
	}
	s := cryptobyte.String(b)
	if !readLabel(&s, CertificationLabel) {
		return nil, malformed("version label")
	}
	var ak, ek, by cryptobyte.String
	var n uint8
	if !s.ReadUint16LengthPrefixed(&ak) || !s.ReadUint16LengthPrefixed(&ek) || !s.ReadUint8(&n) {
		return nil, malformed("certification truncated")
	}
	if int(n) > maxIntermediates {
		return nil, malformed("%d intermediates, limit %d", n, maxIntermediates)
	}
	inters := make([]cryptobyte.String, n)
	for i := range inters {
		if !s.ReadUint16LengthPrefixed(&inters[i]) {
			return nil, malformed("certification truncated")
		}
	}
	var secs uint64
	if !s.ReadUint64(&secs) || !s.ReadUint8LengthPrefixed(&by) {
		return nil, malformed("certification truncated")
	}
	if !s.Empty() {
		return nil, malformed("%d trailing bytes", len(s))
	}
	if err := cmp.Or(checkField(ak, tpmquote.MaxPublicSize, "ak public"),
		checkField(ek, tpmquote.MaxCertSize, "ek certificate")); err != nil {
		return nil, err
	}
	c := &Certification{AKPublic: slices.Clone(ak), EKCert: slices.Clone(ek)}
	for _, der := range inters {
		if err := checkField(der, tpmquote.MaxCertSize, "intermediate"); err != nil {
			return nil, err
		}
		c.EKIntermediates = append(c.EKIntermediates, slices.Clone(der))
	}
	if secs == 0 || secs > 1<<40 {
		return nil, malformed("activated at %d", secs)
	}
	c.ActivatedAt = time.Unix(int64(secs), 0).UTC()
	if !printable(string(by)) {
		return nil, malformed("activated by: empty or not printable utf-8")
	}
	c.ActivatedBy = string(by)
	return c, nil
}

func printable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return false
		}
	}
	return true
}

// VerifyOpts are the trust inputs of VerifyCertification. There is no
// default root: Roots is required, as is Now.
type VerifyOpts struct {
	// Roots are the TPM manufacturer root certificates the EK certificate
	// must chain to.
	Roots *x509.CertPool
	// Now is the time at which the EK certificate chain must be valid.
	Now time.Time
}

// CertifiedAK is what VerifyCertification established.
type CertifiedAK struct {
	AKPublic *tpmquote.Public
	AKName   []byte
	// EKCert is the parsed EK certificate, EKName the Name of its default
	// template EK, and Root the trusted root its chain ended at.
	EKCert *x509.Certificate
	EKName []byte
	Root   *x509.Certificate
	// TPM is the identity in the EK certificate's subject alternative name,
	// nil when it has none in the TCG form.
	TPM *TPMIdentity
	// ActivatedAt and ActivatedBy are copied from the record, unverified.
	ActivatedAt time.Time
	ActivatedBy string
}

// VerifyCertification checks a record offline: the AK parses as an
// attestation key (its Name is computed here, never read from the record),
// the EK certificate holds a default-template EK, and its chain through the
// record's intermediates reaches one of opts.Roots at opts.Now. It cannot
// re-check the activation itself (spec section 2.2): that rests on the
// record's author.
func VerifyCertification(c *Certification, opts VerifyOpts) (*CertifiedAK, error) {
	if opts.Roots == nil || opts.Now.IsZero() {
		return nil, fmt.Errorf("%w: roots and now are required", ErrOptions)
	}
	if c == nil {
		return nil, fmt.Errorf("%w: nil certification", ErrMalformed)
	}
	ak, akName, err := checkAK(c.AKPublic)
	if err != nil {
		return nil, err
	}
	ek, err := x509.ParseCertificate(c.EKCert)
	if err != nil {
		return nil, fmt.Errorf("%w: ek certificate: %v", ErrMalformed, err)
	}
	ekPub, err := EKPublic(ek.PublicKey)
	if err != nil {
		return nil, err
	}
	ekName, err := name(ekPub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnsupportedEK, err)
	}
	root, err := VerifyEKChain(ek, c.EKIntermediates, opts.Roots, opts.Now)
	if err != nil {
		return nil, err
	}
	tpmID, _, err := ekSAN(ek)
	if err != nil {
		return nil, err
	}
	return &CertifiedAK{
		AKPublic: ak, AKName: akName,
		EKCert: ek, EKName: ekName, Root: root, TPM: tpmID,
		ActivatedAt: c.ActivatedAt, ActivatedBy: c.ActivatedBy,
	}, nil
}

// VerifyEKChain verifies ek through intermediates (DER) to one of roots at
// now and returns the root reached. EK certificates carry the TCG EK
// certificate extended key usage (2.23.133.8.1), not a web one, so any
// extended key usage is accepted along the chain.
func VerifyEKChain(ek *x509.Certificate, intermediates [][]byte, roots *x509.CertPool, now time.Time) (*x509.Certificate, error) {
	if roots == nil || now.IsZero() {
		return nil, fmt.Errorf("%w: roots and now are required", ErrOptions)
	}
	if len(intermediates) > maxIntermediates {
		return nil, fmt.Errorf("%w: %d intermediates", ErrMalformed, len(intermediates))
	}
	pool := x509.NewCertPool()
	for _, der := range intermediates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%w: intermediate: %v", ErrMalformed, err)
		}
		pool.AddCert(c)
	}
	// The TCG SAN form (a critical directoryName) is checked by ekSAN; any
	// other unhandled critical extension still fails the chain check.
	leaf := *ek
	if _, ok, err := ekSAN(ek); err != nil {
		return nil, err
	} else if ok {
		leaf.UnhandledCriticalExtensions = slices.DeleteFunc(slices.Clone(ek.UnhandledCriticalExtensions), func(o asn1.ObjectIdentifier) bool { return o.Equal(oidSAN) })
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: pool,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEKChain, err)
	}
	ch := chains[0]
	return ch[len(ch)-1], nil
}

// TCG attribute types of the TPM directoryName in an EK certificate's
// subject alternative name (TCG EK Credential Profile 2.0, 3.2.9).
var (
	oidSAN             = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidTPMManufacturer = asn1.ObjectIdentifier{2, 23, 133, 2, 1}
	oidTPMModel        = asn1.ObjectIdentifier{2, 23, 133, 2, 2}
	oidTPMVersion      = asn1.ObjectIdentifier{2, 23, 133, 2, 3}
)

// TPMIdentity is the TPM manufacturer, model and firmware version an EK
// certificate's subject alternative name states.
type TPMIdentity struct {
	Manufacturer, Model, Version string
}

// ekSAN returns the TPM identity in an EK certificate's subject alternative
// name: exactly one directoryName holding only the TCG TPM manufacturer,
// model and version attributes, each once. Go's x509 does not handle a
// critical SAN holding only a directoryName, so the chain check relies on
// this parse instead.
func ekSAN(c *x509.Certificate) (*TPMIdentity, bool, error) {
	var raw []byte
	for _, e := range c.Extensions {
		if e.Id.Equal(oidSAN) {
			raw = e.Value
		}
	}
	if raw == nil {
		return nil, false, nil
	}
	var names []asn1.RawValue
	if rest, err := asn1.Unmarshal(raw, &names); err != nil || len(rest) != 0 {
		return nil, false, fmt.Errorf("%w: ek subject alternative name", ErrMalformed)
	}
	if len(names) != 1 || names[0].Class != asn1.ClassContextSpecific || names[0].Tag != 4 || !names[0].IsCompound {
		return nil, false, nil // not the TCG form: left to x509
	}
	var rdn pkix.RDNSequence
	if rest, err := asn1.Unmarshal(names[0].Bytes, &rdn); err != nil || len(rest) != 0 {
		return nil, false, fmt.Errorf("%w: ek directoryName", ErrMalformed)
	}
	id := &TPMIdentity{}
	seen := map[string]bool{}
	for _, set := range rdn {
		for _, atv := range set {
			s, ok := atv.Value.(string)
			var dst *string
			switch {
			case atv.Type.Equal(oidTPMManufacturer):
				dst = &id.Manufacturer
			case atv.Type.Equal(oidTPMModel):
				dst = &id.Model
			case atv.Type.Equal(oidTPMVersion):
				dst = &id.Version
			}
			if dst == nil || !ok || seen[atv.Type.String()] {
				return nil, false, fmt.Errorf("%w: ek directoryName attribute %s", ErrMalformed, atv.Type)
			}
			seen[atv.Type.String()] = true
			*dst = s
		}
	}
	if len(seen) != 3 {
		return nil, false, fmt.Errorf("%w: ek directoryName lacks tpm manufacturer, model or version", ErrMalformed)
	}
	return id, true, nil
}
