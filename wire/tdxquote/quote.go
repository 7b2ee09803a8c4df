// Package tdxquote is a strict, bounds-checked codec for Intel TDX quotes,
// versions 4 and 5, with an ECDSA-256-with-P-256 attestation key and QE
// report certification data (type 6) that carries a PEM PCK certificate
// chain (type 5). A version 5 quote carries a TD 1.0 (type 2) or TD 1.5
// (type 3) report body after a body type and size (docs/spec/platform-tdx.md,
// section 1.1). It is the only place in this module that reads quote bytes.
//
// The package does no cryptography and trusts nothing: it only splits a quote
// into its fields and puts them back. Signature and chain checks belong to
// go-tdx-guest's verify package; Parse exists so that nothing malformed ever
// reaches that library's parser (abi.QuoteToProto panics on some truncated
// inputs) and so that producers can check what a device returned. That
// library does not read version 5; verify/platform checks those signatures
// itself.
//
// Parse is strict: whatever it accepts, Marshal re-encodes to identical bytes.
// It has no device imports and may be used by verifiers.
package tdxquote

import (
	"bytes"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
)

// Format is Evidence.Format for TDX evidence whose Blob is a v4 quote
// (docs/spec/platform-tdx.md). Producers and verifiers both use it.
const Format = "tdx/quote-v4"

// Wire constants of a TDX quote.
const (
	// version4 is the quote version producers write and the one attestation
	// evidence (Format) carries; Parse also reads version 5.
	version4 = 4
	// version5 is the DCAP quote version 5: a body type and size precede
	// the body.
	version5 = 5
	// bodyTypeSGX, bodyTypeTD10 and bodyTypeTD15 are the version 5 body
	// types: an SGX enclave report (refused), a TD 1.0 report body and a
	// TD 1.5 report body.
	bodyTypeSGX  = 1
	bodyTypeTD10 = 2
	bodyTypeTD15 = 3
	// bodyDescSize is the version 5 body type (u16) and size (u32).
	bodyDescSize = 6
	// attestationKeyTypeECDSAP256 is ECDSA-256-with-P-256.
	attestationKeyTypeECDSAP256 = 2
	// teeTypeTDX is the header TEE type of a TDX quote.
	teeTypeTDX = 0x00000081
	// certDataTypeQEReport is certification data of type 6: QE report
	// certification data.
	certDataTypeQEReport = 6
	// certDataTypePCKChain is certification data of type 5: a concatenated
	// PEM PCK certificate chain (leaf, intermediate, root).
	certDataTypePCKChain = 5

	// headerSize is the size of the quote header.
	headerSize = 0x30
	// bodySize is the size of the TD quote body (a TDREPORT 1.0 digest).
	bodySize = 0x248
	// bodySizeTD15 is the size of a TD 1.5 body: TEE_TCB_SVN2 and
	// MRSERVICETD follow the TD 1.0 fields.
	bodySizeTD15 = bodySize + 16 + 48
	// signedSize is the size of the bytes the attestation key signs in a
	// version 4 quote: header || body.
	signedSize = headerSize + bodySize
	// qeReportSize is the size of the SGX report of the quoting enclave.
	qeReportSize = 0x180

	// maxSize bounds any input handed to this package, raw device output
	// included (the TDX guest driver's buffer is 16 KiB).
	maxSize = 64 << 10

	signedDataLenOff = signedSize                      // u32 length of the signed data
	signedDataOff    = signedDataLenOff + 4            // signature starts here
	certDataOff      = signedDataOff + 64 + 64         // after signature and attestation key
	qeReportOff      = certDataOff + 6                 // after u16 type || u32 size
	qeAuthLenOff     = qeReportOff + qeReportSize + 64 // after QE report and its signature
	// minSize is the smallest well-formed quote: version 4, empty QE auth
	// data and an empty PCK chain.
	minSize = qeAuthLenOff + 2 + 6
	// tailMinSize is what follows header || body in the smallest quote.
	tailMinSize = minSize - signedSize
)

// Errors. Every error returned by this package wraps exactly one of them.
var (
	// ErrMalformed reports bytes that are not a well-formed quote.
	ErrMalformed = errors.New("tdxquote: malformed quote")
	// ErrUnsupported reports a well-framed quote of a kind this package
	// refuses: another version, TEE type, key type or certification data type.
	ErrUnsupported = errors.New("tdxquote: unsupported quote")
	// ErrTooLarge reports input over 64 KiB (the TDX guest driver's buffer
	// is 16 KiB).
	ErrTooLarge = errors.New("tdxquote: input too large")
)

// Header is the quote header. Header, Body and QEReport declare the wire
// layout: their fields in order, little-endian, nothing between them
// (encoding/binary reads and writes them).
type Header struct {
	Version            uint16
	AttestationKeyType uint16
	TeeType            uint32
	// PCESVN and QESVN follow go-tdx-guest's naming of header bytes 8..11;
	// Intel's v4 layout marks them reserved and real quotes carry zero.
	PCESVN     [2]byte
	QESVN      [2]byte
	QEVendorID [16]byte
	UserData   [20]byte
}

// NewHeader returns the header of a version 4 TDX quote with an ECDSA-256
// P-256 attestation key from the quoting enclave of vendor qeVendorID; the
// caller sets the user data.
func NewHeader(qeVendorID [16]byte) Header {
	return Header{Version: version4, AttestationKeyType: attestationKeyTypeECDSAP256, TeeType: teeTypeTDX, QEVendorID: qeVendorID}
}

// Body is the TD quote body.
type Body struct {
	TeeTcbSvn      [16]byte
	MRSEAM         [48]byte
	MRSignerSEAM   [48]byte
	SEAMAttributes [8]byte
	TDAttributes   [8]byte
	XFAM           [8]byte
	MRTD           [48]byte
	MRConfigID     [48]byte
	MROwner        [48]byte
	MROwnerConfig  [48]byte
	RTMR           [4][48]byte
	ReportData     [64]byte
	// TeeTcbSvn2 and MRServiceTD are the TD 1.5 fields (a version 5 quote
	// with body type 3); zero in any other quote.
	TeeTcbSvn2  [16]byte
	MRServiceTD [48]byte
}

// tdAttributesDebug is bit 0 of TD_ATTRIBUTES (TUD.DEBUG): the TD is
// debuggable and its memory is readable by the host.
const tdAttributesDebug = 1 << 0

// Debug reports whether the TD was launched with the DEBUG attribute.
func (b *Body) Debug() bool { return b.TDAttributes[0]&tdAttributesDebug != 0 }

// QEReport is the SGX report of the quoting enclave (384 bytes).
type QEReport struct {
	CPUSVN     [16]byte
	MiscSelect uint32
	Reserved1  [28]byte
	Attributes [16]byte
	MREnclave  [32]byte
	Reserved2  [32]byte
	MRSigner   [32]byte
	Reserved3  [96]byte
	ISVProdID  uint16
	ISVSVN     uint16
	Reserved4  [60]byte
	ReportData [64]byte
}

// Quote is a parsed TDX quote, version 4 or 5.
type Quote struct {
	Header Header
	// BodyType is the version 5 body type: 2 (TD 1.0) or 3 (TD 1.5). It is
	// zero in a version 4 quote, whose body is always TD 1.0.
	BodyType uint16
	Body     Body
	// Signature is r || s (big-endian, 32 bytes each) by the attestation key
	// over SHA-256(header || body).
	Signature [64]byte
	// AttestationKey is the raw P-256 point x || y.
	AttestationKey [64]byte
	QEReport       QEReport
	// QEReportSignature is r || s by the PCK key over the QE report.
	QEReportSignature [64]byte
	// QEAuthData is bound into QEReport.ReportData together with the
	// attestation key.
	QEAuthData []byte
	// PCKChain is the type-5 certification data exactly as carried: PEM
	// certificates, leaf first, possibly followed by one NUL byte.
	PCKChain []byte
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// layout reads the version (and, in version 5, the body type and size) at
// the start of b and returns the size of the signed bytes (header, body
// descriptor, body) and the body type (0 in version 4). It refuses every
// other version and body type by name, and a body size that is not the
// size of its type.
func layout(b []byte) (signed int, bodyType uint16, err error) {
	if len(b) < headerSize+bodyDescSize {
		return 0, 0, malformed("%d bytes, shorter than a header", len(b))
	}
	switch v := binary.LittleEndian.Uint16(b); v {
	case version4:
		return signedSize, 0, nil
	case version5:
	default:
		return 0, 0, unsupported("version %d", v)
	}
	bodyType = binary.LittleEndian.Uint16(b[headerSize:])
	size := binary.LittleEndian.Uint32(b[headerSize+2:])
	var want uint32
	switch bodyType {
	case bodyTypeTD10:
		want = bodySize
	case bodyTypeTD15:
		want = bodySizeTD15
	case bodyTypeSGX:
		return 0, 0, unsupported("version 5 body type 1 (sgx enclave report)")
	default:
		return 0, 0, unsupported("version 5 body type %d", bodyType)
	}
	if size != want {
		return 0, 0, malformed("version 5 body type %d declares %d bytes, want %d", bodyType, size, want)
	}
	return headerSize + bodyDescSize + int(want), bodyType, nil
}

// Length returns the length of the quote at the start of b, read from its
// framing. Devices may return a buffer with bytes after the quote; those are
// covered by no signature and producers drop them with b[:n]. Length checks
// the framing only; Parse the result.
func Length(b []byte) (int, error) {
	if len(b) > maxSize {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), maxSize)
	}
	signed, _, err := layout(b)
	if err != nil {
		return 0, err
	}
	if len(b) < signed+4 {
		return 0, malformed("%d bytes, shorter than header and body", len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b[signed:]))
	end := uint64(signed+4) + n
	if end > uint64(len(b)) {
		return 0, malformed("signed data length %d exceeds the %d bytes present", n, len(b)-signed-4)
	}
	return int(end), nil
}

// Parse parses exactly one quote. It rejects trailing bytes, any length
// field that disagrees with the bytes present, and every version, body
// type, TEE type, key type or certification data type other than the ones
// this package names. On error it returns nil.
func Parse(b []byte) (*Quote, error) {
	if len(b) > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), maxSize)
	}
	if len(b) < minSize {
		return nil, malformed("%d bytes, minimum %d", len(b), minSize)
	}
	signed, bodyType, err := layout(b)
	if err != nil {
		return nil, err
	}
	if len(b) < signed+tailMinSize {
		return nil, malformed("%d bytes, minimum %d", len(b), signed+tailMinSize)
	}
	q := &Quote{BodyType: bodyType}
	r := reader{b: b}

	h := &q.Header
	r.decode(h)
	if h.AttestationKeyType != attestationKeyTypeECDSAP256 {
		return nil, unsupported("attestation key type %d", h.AttestationKeyType)
	}
	if h.TeeType != teeTypeTDX {
		return nil, unsupported("tee type %#x", h.TeeType)
	}
	if h.Version == version5 {
		r.off += bodyDescSize // checked by layout
	}
	r.body(&q.Body, bodyType == bodyTypeTD15)

	sigDataOff := signed + 4
	signedLen := r.u32()
	if uint64(signedLen) != uint64(len(b)-sigDataOff) {
		return nil, malformed("signed data length %d, %d bytes present", signedLen, len(b)-sigDataOff)
	}
	r.copy(q.Signature[:])
	r.copy(q.AttestationKey[:])

	if err := r.certData(certDataTypeQEReport, "certification data"); err != nil {
		return nil, err
	}
	r.decode(&q.QEReport)
	r.copy(q.QEReportSignature[:])

	authLen := int(r.u16())
	if authLen > r.left()-6 {
		return nil, malformed("qe auth data length %d exceeds the %d bytes present", authLen, r.left()-6)
	}
	q.QEAuthData = r.take(authLen)

	if err := r.certData(certDataTypePCKChain, "pck certification data"); err != nil {
		return nil, err
	}
	q.PCKChain = r.take(r.left())
	return q, nil
}

// ParseEvidence parses the blob of Format evidence: exactly one version 4
// quote, as Parse reads it. A version 5 quote is ErrUnsupported: producers
// emit, and attestation evidence carries, version 4 only
// (docs/spec/platform-tdx.md, section 1.1).
func ParseEvidence(b []byte) (*Quote, error) {
	q, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if q.BodyType != 0 {
		return nil, unsupported("version %d quote in %s evidence", q.Header.Version, Format)
	}
	return q, nil
}

// Marshal encodes q. It fails when the version and body type disagree
// (version 4 has body type 0; version 5 has 2 or 3), when TD 1.5 fields are
// set in a TD 1.0 body, when a variable-length field does not fit its
// length prefix, or when the result would exceed maxSize.
func (q *Quote) Marshal() ([]byte, error) {
	switch {
	case q.Header.Version == version4 && q.BodyType == 0:
	case q.Header.Version == version5 && (q.BodyType == bodyTypeTD10 || q.BodyType == bodyTypeTD15):
	default:
		return nil, unsupported("version %d with body type %d", q.Header.Version, q.BodyType)
	}
	if q.BodyType != bodyTypeTD15 && (q.Body.TeeTcbSvn2 != [16]byte{} || q.Body.MRServiceTD != [48]byte{}) {
		return nil, malformed("td 1.5 fields in a td 1.0 body")
	}
	if len(q.QEAuthData) > 0xffff {
		return nil, malformed("qe auth data is %d bytes, limit 65535", len(q.QEAuthData))
	}
	signed := q.SignedBytes()
	total := len(signed) + tailMinSize + len(q.QEAuthData) + len(q.PCKChain)
	if total > maxSize {
		return nil, fmt.Errorf("%w: quote would be %d bytes, limit %d", ErrTooLarge, total, maxSize)
	}
	w := make([]byte, 0, total)
	w = append(w, signed...)
	w = binary.LittleEndian.AppendUint32(w, uint32(total-len(signed)-4))
	w = append(w, q.Signature[:]...)
	w = append(w, q.AttestationKey[:]...)
	w = binary.LittleEndian.AppendUint16(w, certDataTypeQEReport)
	w = binary.LittleEndian.AppendUint32(w, uint32(total-len(w)-4))
	w = append(w, q.QEReport.Marshal()...)
	w = append(w, q.QEReportSignature[:]...)
	w = binary.LittleEndian.AppendUint16(w, uint16(len(q.QEAuthData)))
	w = append(w, q.QEAuthData...)
	w = binary.LittleEndian.AppendUint16(w, certDataTypePCKChain)
	w = binary.LittleEndian.AppendUint32(w, uint32(len(q.PCKChain)))
	w = append(w, q.PCKChain...)
	return w, nil
}

// SignedBytes returns the bytes the attestation key signs: header || body
// in version 4; header || body type || body size || body in version 5,
// where body type 3 adds the TD 1.5 fields.
func (q *Quote) SignedBytes() []byte {
	h := &q.Header
	td15 := h.Version == version5 && q.BodyType == bodyTypeTD15
	w := appendFixed(make([]byte, 0, headerSize+bodyDescSize+bodySizeTD15), h)
	if h.Version == version5 {
		size := uint32(bodySize)
		if td15 {
			size = bodySizeTD15
		}
		w = binary.LittleEndian.AppendUint16(w, q.BodyType)
		w = binary.LittleEndian.AppendUint32(w, size)
	}
	w = appendFixed(w, &q.Body)
	if !td15 {
		// A TD 1.0 body ends before the TD 1.5 fields.
		w = w[:len(w)-(bodySizeTD15-bodySize)]
	}
	return w
}

// Marshal encodes the QE report: the bytes the PCK key signs.
func (e *QEReport) Marshal() []byte {
	return appendFixed(make([]byte, 0, qeReportSize), e)
}

// appendFixed appends the wire layout of v: a *Header, *Body or *QEReport.
func appendFixed(w []byte, v any) []byte {
	w, err := binary.Append(w, binary.LittleEndian, v)
	if err != nil {
		panic("tdxquote: not a fixed-layout type: " + err.Error())
	}
	return w
}

// pckChainLen is the number of certificates a PCK chain carries.
const pckChainLen = 3

// maxPCKChainSize bounds the PEM PCK chain.
const maxPCKChainSize = 16 << 10

// ParsePCKChain decodes a type-5 PCK chain: exactly three PEM CERTIFICATE
// blocks without headers, leaf first, each a parseable X.509 certificate,
// nothing before or between them, optionally followed by a single NUL byte.
// The PEM must be canonical (64-column base64, "\n" line ends: what Intel's
// QE and EncodePCKChain emit), so EncodePCKChain of the result reproduces the
// input up to the optional NUL. It returns the DER certificates leaf first.
// It checks no signatures.
func ParsePCKChain(chain []byte) ([][]byte, error) {
	if len(chain) > maxPCKChainSize {
		return nil, fmt.Errorf("%w: pck chain is %d bytes, limit %d", ErrTooLarge, len(chain), maxPCKChainSize)
	}
	rest := chain
	var out [][]byte
	for i := 0; i < pckChainLen; i++ {
		// pem.Decode skips any text before a block; refuse that here.
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, malformed("pck chain: certificate %d does not start a pem block", i)
		}
		blk, r := pem.Decode(rest)
		if blk == nil {
			return nil, malformed("pck chain: certificate %d is not pem", i)
		}
		if blk.Type != "CERTIFICATE" || len(blk.Headers) != 0 {
			return nil, malformed("pck chain: block %d is not a bare certificate", i)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, malformed("pck chain: certificate %d: %v", i, err)
		}
		out = append(out, blk.Bytes)
		rest = r
	}
	if len(rest) != 0 && !bytes.Equal(rest, []byte{0}) {
		return nil, malformed("pck chain: %d trailing bytes", len(rest))
	}
	if !bytes.Equal(EncodePCKChain(out), chain[:len(chain)-len(rest)]) {
		return nil, malformed("pck chain: pem is not canonical")
	}
	return out, nil
}

// EncodePCKChain encodes DER certificates as a type-5 PEM chain.
func EncodePCKChain(der [][]byte) []byte {
	var buf bytes.Buffer
	for _, d := range der {
		// pem.Encode on a bytes.Buffer cannot fail.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: d})
	}
	return buf.Bytes()
}

// reader reads fixed fields. Parse checks lengths before reading, so its
// methods never run past the end: the minimum size covers every fixed field
// and variable fields are checked against left() first.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) take(n int) []byte {
	v := bytes.Clone(r.b[r.off : r.off+n])
	if v == nil {
		v = []byte{}
	}
	r.off += n
	return v
}

func (r *reader) copy(dst []byte) {
	copy(dst, r.b[r.off:r.off+len(dst)])
	r.off += len(dst)
}

// decode reads the wire layout of v: a *Header or *QEReport.
func (r *reader) decode(v any) {
	n, err := binary.Decode(r.b[r.off:], binary.LittleEndian, v)
	if err != nil {
		panic("tdxquote: fixed field past the checked length: " + err.Error())
	}
	r.off += n
}

// body reads a TD 1.0 body, or with td15 a TD 1.5 body, into d; a TD 1.0
// body leaves the TD 1.5 fields zero.
func (r *reader) body(d *Body, td15 bool) {
	n := bodySize
	if td15 {
		n = bodySizeTD15
	}
	var full [bodySizeTD15]byte
	copy(full[:], r.b[r.off:r.off+n])
	r.off += n
	if _, err := binary.Decode(full[:], binary.LittleEndian, d); err != nil {
		panic("tdxquote: body layout: " + err.Error())
	}
}

// certData reads a certification data header (u16 type, u32 size): the
// type must be want and the size the rest of the quote.
func (r *reader) certData(want uint16, what string) error {
	typ, size := r.u16(), r.u32()
	if typ != want {
		return unsupported("%s type %d", what, typ)
	}
	if uint64(size) != uint64(r.left()) {
		return malformed("%s length %d, %d bytes present", what, size, r.left())
	}
	return nil
}

func (r *reader) u16() uint16 {
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}
