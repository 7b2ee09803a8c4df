package tpmquote

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// TPM 2.0 constants used by the wire formats (TPM 2.0 Library, Part 2).
const (
	tpmGenerated     uint32 = 0xff544347 // TPM_GENERATED_VALUE
	tpmSTAttestQuote uint16 = 0x8018     // TPM_ST_ATTEST_QUOTE

	algRSA    uint16 = 0x0001 // TPM_ALG_RSA
	algSHA256 uint16 = 0x000B // TPM_ALG_SHA256
	algNull   uint16 = 0x0010 // TPM_ALG_NULL
	algRSASSA uint16 = 0x0014 // TPM_ALG_RSASSA
	algECDSA  uint16 = 0x0018 // TPM_ALG_ECDSA
	AlgECC    uint16 = 0x0023 // TPM_ALG_ECC

	curveNISTP256 uint16 = 0x0003 // TPM_ECC_NIST_P256

	// handleEndorsement is TPM_RH_ENDORSEMENT, the parent of a primary
	// attestation key in the endorsement hierarchy.
	handleEndorsement uint32 = 0x4000000B
)

// TPMA_OBJECT bits.
const (
	attrFixedTPM            uint32 = 1 << 1
	attrSTClear             uint32 = 1 << 2
	attrFixedParent         uint32 = 1 << 4
	attrSensitiveDataOrigin uint32 = 1 << 5
	AttrUserWithAuth        uint32 = 1 << 6
	attrAdminWithPolicy     uint32 = 1 << 7
	AttrNoDA                uint32 = 1 << 10
	attrEncryptedDup        uint32 = 1 << 11
	attrRestricted          uint32 = 1 << 16
	attrDecrypt             uint32 = 1 << 17
	attrSign                uint32 = 1 << 18

	// AKRequiredAttributes must all be set on an attestation key.
	AKRequiredAttributes = attrFixedTPM | attrFixedParent | attrSensitiveDataOrigin | attrRestricted | attrSign
)

// Wire limits. Everything a verifier parses is bounded before parsing.
const (
	maxAttestSize    = 1024
	maxSignatureSize = 1024
	MaxPublicSize    = 1024
	maxPCRValuesSize = 3 + NumPCRs*(1+sha256.Size)
	MaxCertSize      = 16 << 10
	maxCertChain     = 4
	MaxEventLogSize  = 4 << 20

	// NumPCRs is the number of PCRs a selection may name (0..23).
	NumPCRs = 24
	// pcrSelectSize is sizeofSelect for 24 PCRs.
	pcrSelectSize = 3
	maxDigest     = 64
	maxName       = 2 + maxDigest
)

// reader is a strict big-endian cursor: every read past the end sets err and
// returns zero values, so parsers check err once at the end of a structure.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s truncated", what)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8(what string) uint8 {
	b := r.take(1, what)
	if b == nil {
		return 0
	}
	return b[0]
}

func (r *reader) u16(what string) uint16 {
	b := r.take(2, what)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func (r *reader) u32(what string) uint32 {
	b := r.take(4, what)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) u64(what string) uint64 {
	b := r.take(8, what)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// tpm2b reads a TPM2B (u16 size then bytes) of at most max bytes and returns
// a copy.
func (r *reader) tpm2b(max int, what string) []byte {
	n := int(r.u16(what + " size"))
	if r.err != nil {
		return nil
	}
	if n > max {
		r.fail("%s is %d bytes, limit %d", what, n, max)
		return nil
	}
	b := r.take(n, what)
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

func (r *reader) end(what string) {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes after %s", len(r.b), what)
	}
}

func put16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func put32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func put64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func put2b(b, v []byte) []byte        { return append(put16(b, uint16(len(v))), v...) }

// Attest is a parsed TPMS_ATTEST of type TPM_ST_ATTEST_QUOTE whose PCR
// selection is a single SHA-256 bank of 24 PCRs (the only shape accepted).
type Attest struct {
	QualifiedSigner []byte // TPM2B_NAME contents
	ExtraData       []byte // TPM2B_DATA contents: the qualifying data
	Clock           uint64
	ResetCount      uint32
	RestartCount    uint32
	Safe            bool
	FirmwareVersion uint64
	PCRs            []int  // selected PCR indices, ascending
	PCRDigest       []byte // TPM2B_DIGEST contents
}

// ParseAttest parses TPMS_ATTEST bytes. It rejects anything that is not a
// quote over exactly one SHA-256 bank with a 3-byte selection, and any
// trailing bytes; whatever it accepts, Marshal re-encodes to the same bytes.
func ParseAttest(b []byte) (*Attest, error) {
	if len(b) > maxAttestSize {
		return nil, fmt.Errorf("%w: attest is %d bytes, limit %d", errTooLarge, len(b), maxAttestSize)
	}
	r := &reader{b: b}
	if m := r.u32("magic"); r.err == nil && m != tpmGenerated {
		return nil, fmt.Errorf("%w: attest magic 0x%08x is not TPM_GENERATED_VALUE", ErrMalformed, m)
	}
	if t := r.u16("type"); r.err == nil && t != tpmSTAttestQuote {
		return nil, fmt.Errorf("%w: attest type 0x%04x is not a quote", ErrUnsupported, t)
	}
	a := &Attest{}
	a.QualifiedSigner = r.tpm2b(maxName, "qualified signer")
	a.ExtraData = r.tpm2b(maxDigest, "extra data")
	a.Clock = r.u64("clock")
	a.ResetCount = r.u32("reset count")
	a.RestartCount = r.u32("restart count")
	switch safe := r.u8("safe"); safe {
	case 0:
	case 1:
		a.Safe = true
	default:
		r.fail("safe is %d, want 0 or 1", safe)
	}
	a.FirmwareVersion = r.u64("firmware version")
	if r.err != nil {
		return nil, r.err
	}
	pcrs, err := parseSelection(r)
	if err != nil {
		return nil, err
	}
	a.PCRs = pcrs
	a.PCRDigest = r.tpm2b(maxDigest, "pcr digest")
	r.end("attest")
	if r.err != nil {
		return nil, r.err
	}
	return a, nil
}

// parseSelection reads a TPML_PCR_SELECTION holding exactly one SHA-256 bank
// with sizeofSelect 3 and at least one PCR selected.
func parseSelection(r *reader) ([]int, error) {
	count := r.u32("pcr selection count")
	if r.err != nil {
		return nil, r.err
	}
	if count != 1 {
		return nil, fmt.Errorf("%w: %d pcr banks selected, want 1", ErrUnsupported, count)
	}
	hash := r.u16("pcr bank hash")
	size := r.u8("pcr select size")
	if r.err != nil {
		return nil, r.err
	}
	if hash != algSHA256 {
		return nil, fmt.Errorf("%w: pcr bank 0x%04x is not sha256", ErrUnsupported, hash)
	}
	if size != pcrSelectSize {
		return nil, fmt.Errorf("%w: pcr select size %d, want %d", ErrUnsupported, size, pcrSelectSize)
	}
	bits := r.take(pcrSelectSize, "pcr select")
	if r.err != nil {
		return nil, r.err
	}
	var pcrs []int
	for i := range NumPCRs {
		if bits[i/8]&(1<<(i%8)) != 0 {
			pcrs = append(pcrs, i)
		}
	}
	if len(pcrs) == 0 {
		return nil, fmt.Errorf("%w: empty pcr selection", ErrUnsupported)
	}
	return pcrs, nil
}

// appendSelection appends the TPML_PCR_SELECTION for pcrs (one SHA-256 bank).
func appendSelection(b []byte, pcrs []int) []byte {
	b = put32(b, 1)
	b = put16(b, algSHA256)
	b = append(b, pcrSelectSize)
	var bits [pcrSelectSize]byte
	for _, i := range pcrs {
		if i >= 0 && i < NumPCRs {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	return append(b, bits[:]...)
}

// marshal encodes a as TPMS_ATTEST.
func (a *Attest) marshal() []byte {
	b := put32(nil, tpmGenerated)
	b = put16(b, tpmSTAttestQuote)
	b = put2b(b, a.QualifiedSigner)
	b = put2b(b, a.ExtraData)
	b = put64(b, a.Clock)
	b = put32(b, a.ResetCount)
	b = put32(b, a.RestartCount)
	if a.Safe {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = put64(b, a.FirmwareVersion)
	b = appendSelection(b, a.PCRs)
	return put2b(b, a.PCRDigest)
}

// Public is a parsed TPMT_PUBLIC of a signing key: ECC NIST P-256 with
// ECDSA-SHA256, or RSA (2048, 3072 or 4096 bits) with RSASSA-SHA256. No other
// key type, scheme, symmetric algorithm or KDF is accepted.
type Public struct {
	Type       uint16 // AlgECC or algRSA
	Attributes uint32 // TPMA_OBJECT
	AuthPolicy []byte
	// ECC
	X, Y []byte
	// RSA
	KeyBits  uint16
	Exponent uint32 // 0 means 65537
	N        []byte
}

// ParseAK parses an attestation key's TPMT_PUBLIC bytes (ParsePublic) and
// checks that it is one: every attribute of AKRequiredAttributes set and
// decrypt clear, or ErrAKAttributes. The quote verifier and the credential
// activation both apply this rule.
func ParseAK(b []byte) (*Public, error) {
	ak, err := ParsePublic(b)
	if err != nil {
		return nil, err
	}
	if ak.Attributes&AKRequiredAttributes != AKRequiredAttributes || ak.Attributes&attrDecrypt != 0 {
		return nil, fmt.Errorf("%w: attributes 0x%08x", ErrAKAttributes, ak.Attributes)
	}
	return ak, nil
}

// ParsePublic parses TPMT_PUBLIC bytes (name algorithm SHA-256). Whatever it
// accepts, Marshal re-encodes to the same bytes.
func ParsePublic(b []byte) (*Public, error) {
	if len(b) > MaxPublicSize {
		return nil, fmt.Errorf("%w: public area is %d bytes, limit %d", errTooLarge, len(b), MaxPublicSize)
	}
	r := &reader{b: b}
	p := &Public{Type: r.u16("type")}
	nameAlg := r.u16("name alg")
	p.Attributes = r.u32("attributes")
	p.AuthPolicy = r.tpm2b(maxDigest, "auth policy")
	sym := r.u16("symmetric")
	scheme := r.u16("scheme")
	if r.err != nil {
		return nil, r.err
	}
	if nameAlg != algSHA256 {
		return nil, fmt.Errorf("%w: name alg 0x%04x is not sha256", ErrUnsupported, nameAlg)
	}
	if sym != algNull {
		return nil, fmt.Errorf("%w: signing key has symmetric alg 0x%04x", ErrUnsupported, sym)
	}
	hash := r.u16("scheme hash")
	if r.err != nil {
		return nil, r.err
	}
	if hash != algSHA256 {
		return nil, fmt.Errorf("%w: scheme hash 0x%04x is not sha256", ErrUnsupported, hash)
	}
	switch p.Type {
	case AlgECC:
		if scheme != algECDSA {
			return nil, fmt.Errorf("%w: ecc scheme 0x%04x is not ecdsa", ErrUnsupported, scheme)
		}
		curve := r.u16("curve")
		kdf := r.u16("kdf")
		if r.err != nil {
			return nil, r.err
		}
		if curve != curveNISTP256 {
			return nil, fmt.Errorf("%w: curve 0x%04x is not nist p-256", ErrUnsupported, curve)
		}
		if kdf != algNull {
			return nil, fmt.Errorf("%w: kdf 0x%04x is not null", ErrUnsupported, kdf)
		}
		p.X = r.tpm2b(32, "ecc x")
		p.Y = r.tpm2b(32, "ecc y")
		if r.err == nil && (len(p.X) != 32 || len(p.Y) != 32) {
			r.fail("ecc point coordinates are not 32 bytes")
		}
	case algRSA:
		if scheme != algRSASSA {
			return nil, fmt.Errorf("%w: rsa scheme 0x%04x is not rsassa", ErrUnsupported, scheme)
		}
		p.KeyBits = r.u16("rsa key bits")
		p.Exponent = r.u32("rsa exponent")
		if r.err != nil {
			return nil, r.err
		}
		switch p.KeyBits {
		case 2048, 3072, 4096:
		default:
			return nil, fmt.Errorf("%w: rsa key size %d", ErrUnsupported, p.KeyBits)
		}
		if p.Exponent != 0 && p.Exponent != 65537 {
			return nil, fmt.Errorf("%w: rsa exponent %d", ErrUnsupported, p.Exponent)
		}
		p.N = r.tpm2b(512, "rsa modulus")
		if r.err == nil && (len(p.N) != int(p.KeyBits)/8 || p.N[0]&0x80 == 0) {
			r.fail("rsa modulus does not have %d bits", p.KeyBits)
		}
	default:
		return nil, fmt.Errorf("%w: key type 0x%04x", ErrUnsupported, p.Type)
	}
	r.end("public area")
	if r.err != nil {
		return nil, r.err
	}
	return p, nil
}

// Marshal encodes p as TPMT_PUBLIC.
func (p *Public) Marshal() []byte {
	b := put16(nil, p.Type)
	b = put16(b, algSHA256)
	b = put32(b, p.Attributes)
	b = put2b(b, p.AuthPolicy)
	b = put16(b, algNull)
	switch p.Type {
	case AlgECC:
		b = put16(b, algECDSA)
		b = put16(b, algSHA256)
		b = put16(b, curveNISTP256)
		b = put16(b, algNull)
		b = put2b(b, p.X)
		b = put2b(b, p.Y)
	case algRSA:
		b = put16(b, algRSASSA)
		b = put16(b, algSHA256)
		b = put16(b, p.KeyBits)
		b = put32(b, p.Exponent)
		b = put2b(b, p.N)
	}
	return b
}

// Name returns the TPM Name of the key: nameAlg (SHA-256) || SHA-256(TPMT_PUBLIC).
func (p *Public) Name() []byte {
	d := sha256.Sum256(p.Marshal())
	return append(put16(nil, algSHA256), d[:]...)
}

// primaryQualifiedName returns the Qualified Name of a primary object with
// Name name in the hierarchy whose handle is hierarchy:
// nameAlg || SHA-256(u32be(hierarchy) || name).
func primaryQualifiedName(hierarchy uint32, name []byte) []byte {
	h := sha256.New()
	h.Write(put32(nil, hierarchy))
	h.Write(name)
	return h.Sum(put16(nil, algSHA256))
}

// signature is a parsed TPMT_SIGNATURE: ECDSA-SHA256 (R, S) or
// RSASSA-SHA256 (Sig).
type signature struct {
	Alg  uint16 // algECDSA or algRSASSA
	R, S []byte
	Sig  []byte
}

// parseSignature parses TPMT_SIGNATURE bytes. Whatever it accepts, marshal
// re-encodes to the same bytes.
func parseSignature(b []byte) (*signature, error) {
	if len(b) > maxSignatureSize {
		return nil, fmt.Errorf("%w: signature is %d bytes, limit %d", errTooLarge, len(b), maxSignatureSize)
	}
	r := &reader{b: b}
	s := &signature{Alg: r.u16("signature alg")}
	hash := r.u16("signature hash")
	if r.err != nil {
		return nil, r.err
	}
	if hash != algSHA256 {
		return nil, fmt.Errorf("%w: signature hash 0x%04x is not sha256", ErrUnsupported, hash)
	}
	switch s.Alg {
	case algECDSA:
		s.R = r.tpm2b(32, "ecdsa r")
		s.S = r.tpm2b(32, "ecdsa s")
		if r.err == nil && (len(s.R) == 0 || len(s.S) == 0) {
			r.fail("empty ecdsa signature component")
		}
	case algRSASSA:
		s.Sig = r.tpm2b(512, "rsassa signature")
		if r.err == nil && len(s.Sig) == 0 {
			r.fail("empty rsassa signature")
		}
	default:
		return nil, fmt.Errorf("%w: signature alg 0x%04x", ErrUnsupported, s.Alg)
	}
	r.end("signature")
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// marshal encodes s as TPMT_SIGNATURE.
func (s *signature) marshal() []byte {
	b := put16(nil, s.Alg)
	b = put16(b, algSHA256)
	if s.Alg == algECDSA {
		b = put2b(b, s.R)
		return put2b(b, s.S)
	}
	return put2b(b, s.Sig)
}

// PCR is one SHA-256 PCR value.
type PCR struct {
	Index int
	Value [sha256.Size]byte
}

// PCRValues is the "pcr_values" encoding (docs/spec/platform-tpm.md):
//
//	u16be hashAlg (0x000B, SHA-256) || u8 n (1..24) ||
//	n × ( u8 index (0..23, strictly ascending) || 32-byte value )
type PCRValues []PCR

// ParsePCRValues parses the "pcr_values" encoding. Whatever it accepts,
// Marshal re-encodes to the same bytes.
func ParsePCRValues(b []byte) (PCRValues, error) {
	if len(b) > maxPCRValuesSize {
		return nil, fmt.Errorf("%w: pcr values are %d bytes, limit %d", errTooLarge, len(b), maxPCRValuesSize)
	}
	r := &reader{b: b}
	hash := r.u16("pcr values hash")
	n := int(r.u8("pcr values count"))
	if r.err != nil {
		return nil, r.err
	}
	if hash != algSHA256 {
		return nil, fmt.Errorf("%w: pcr values hash 0x%04x is not sha256", ErrUnsupported, hash)
	}
	if n == 0 || n > NumPCRs {
		return nil, fmt.Errorf("%w: %d pcr values", ErrMalformed, n)
	}
	out := make(PCRValues, n)
	for i := range out {
		idx := int(r.u8("pcr index"))
		v := r.take(sha256.Size, "pcr value")
		if r.err != nil {
			return nil, r.err
		}
		if idx >= NumPCRs || (i > 0 && idx <= out[i-1].Index) {
			return nil, fmt.Errorf("%w: pcr index %d out of order or range", ErrMalformed, idx)
		}
		out[i].Index = idx
		copy(out[i].Value[:], v)
	}
	r.end("pcr values")
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// Marshal encodes v in the "pcr_values" encoding.
func (v PCRValues) Marshal() []byte {
	b := put16(nil, algSHA256)
	b = append(b, byte(len(v)))
	for _, p := range v {
		b = append(b, byte(p.Index))
		b = append(b, p.Value[:]...)
	}
	return b
}

// Indices returns the PCR indices in order.
func (v PCRValues) Indices() []int {
	out := make([]int, len(v))
	for i, p := range v {
		out[i] = p.Index
	}
	return out
}

// Digest returns the TPM's pcrDigest for these values: SHA-256 over the
// values concatenated in ascending index order.
func (v PCRValues) Digest() [sha256.Size]byte {
	h := sha256.New()
	for _, p := range v {
		h.Write(p.Value[:])
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
