package fakeqe

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"github.com/clawea/attester/wire/tdxquote"
)

// userDataMarker starts the header user data of every fake quote.
const userDataMarker = "TEST ONLY FAKE QE"

// intelQEVendorID is the QE vendor ID of Intel's quoting enclave. Fake quotes
// carry it so that policies written for real quotes see the same header;
// what marks them fake is the PCK root (and userDataMarker).
var intelQEVendorID = [16]byte{0x93, 0x9a, 0x72, 0x33, 0xf7, 0x9c, 0x4c, 0xa9, 0x94, 0x0a, 0x0d, 0xb3, 0x95, 0x7f, 0x06, 0x07}

// DefaultTD returns the quote body of a plausible, non-debug TD: TEE_TCB_SVN
// 03.01.02, XFAM x87|SSE|AVX|AVX-512 state, TD_ATTRIBUTES zero, and MRSEAM,
// MRTD and RTMRs derived from fixed labels. Its REPORT_DATA is zero: every
// quote carries the caller's.
func DefaultTD() tdxquote.Body {
	var td tdxquote.Body
	td.TeeTcbSvn = [16]byte{0x03, 0x01, 0x02}
	td.XFAM = [8]byte{0xe7}
	label48 := func(label string) (out [48]byte) {
		a := sha256.Sum256([]byte(seedPrefix + "td/" + label + "/0"))
		b := sha256.Sum256([]byte(seedPrefix + "td/" + label + "/1"))
		copy(out[:32], a[:])
		copy(out[32:], b[:16])
		return out
	}
	td.MRSEAM = label48("mrseam")
	td.MRTD = label48("mrtd")
	for i := range td.RTMR {
		td.RTMR[i] = label48(fmt.Sprintf("rtmr%d", i))
	}
	return td
}

// Options configures a fake quoting enclave.
type Options struct {
	// Hierarchy signs the quotes; nil means the hierarchy under the pinned
	// simulation root (wire/tdxsimroots).
	Hierarchy *Hierarchy
	// TD is the reported TD quote body (a TD 1.0 body: its TD 1.5 fields
	// stay zero); its ReportData is ignored. Nil means DefaultTD.
	TD *tdxquote.Body
	// EventLog is the CC event log (CCEL) the simulated platform reports
	// beside its quotes (tdx.Simulated); nil means none. Its replay should
	// give TD.RTMR: nothing here checks that, the verifier does.
	EventLog []byte
}

// QE is a fake TDX quoting enclave. It is safe for concurrent use.
type QE struct {
	h         *Hierarchy
	td        tdxquote.Body
	header    tdxquote.Header
	qeReport  tdxquote.QEReport
	qeSig     [64]byte
	authData  []byte
	akPublic  [64]byte
	chainPEM  []byte
	akPrivate *ecdsa.PrivateKey
}

// New returns a fake QE. The QE report, which binds the attestation key, is
// signed once here with the PCK key.
func New(opts Options) (*QE, error) {
	h := opts.Hierarchy
	if h == nil {
		var err error
		if h, err = pinnedHierarchy(); err != nil {
			return nil, err
		}
	}
	td := DefaultTD()
	if opts.TD != nil {
		td = *opts.TD
		td.ReportData = [64]byte{}
	}
	q := &QE{h: h, td: td, akPrivate: h.akKey, chainPEM: h.chainPEM()}

	pub, err := h.akKey.PublicKey.Bytes() // 0x04 || x || y
	if err != nil || len(pub) != 65 {
		return nil, fmt.Errorf("fakeqe: attestation key: %v", err)
	}
	copy(q.akPublic[:], pub[1:])

	q.header = tdxquote.NewHeader(intelQEVendorID)
	copy(q.header.UserData[:], userDataMarker)

	q.authData = []byte(seedPrefix + "qe-auth-data")
	r := &q.qeReport
	r.CPUSVN = h.cpuSVN
	r.Attributes = [16]byte{0x11, 0, 0, 0, 0, 0, 0, 0, 0xe7}
	mre := sha256.Sum256([]byte(seedPrefix + "qe/mrenclave"))
	r.MREnclave = mre
	mrs := sha256.Sum256([]byte(seedPrefix + "qe/mrsigner"))
	r.MRSigner = mrs
	r.ISVProdID = 2
	r.ISVSVN = 4
	// QE REPORT_DATA = SHA-256(attestation key || QE auth data) || 32 zero bytes.
	bind := sha256.Sum256(append(append([]byte(nil), q.akPublic[:]...), q.authData...))
	copy(r.ReportData[:32], bind[:])

	sig, err := sign(h.pckKey, r.Marshal())
	if err != nil {
		return nil, err
	}
	q.qeSig = sig
	return q, nil
}

// sign returns the raw r || s ECDSA-P256-SHA256 signature over msg.
func sign(k *ecdsa.PrivateKey, msg []byte) ([64]byte, error) {
	var out [64]byte
	d := sha256.Sum256(msg)
	r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
	if err != nil {
		return out, fmt.Errorf("fakeqe: sign: %w", err)
	}
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out, nil
}

// TD returns the TD quote body this QE reports, with a zero REPORT_DATA.
func (q *QE) TD() tdxquote.Body { return q.td }

// quote returns the parsed form of a fresh quote over reportData.
func (q *QE) quote(reportData [64]byte) (*tdxquote.Quote, error) {
	body := q.td
	body.ReportData = reportData
	qt := &tdxquote.Quote{
		Header:            q.header,
		Body:              body,
		AttestationKey:    q.akPublic,
		QEReport:          q.qeReport,
		QEReportSignature: q.qeSig,
		QEAuthData:        append([]byte(nil), q.authData...),
		PCKChain:          append([]byte(nil), q.chainPEM...),
	}
	sig, err := sign(q.akPrivate, qt.SignedBytes())
	if err != nil {
		return nil, err
	}
	qt.Signature = sig
	return qt, nil
}

// GetRawQuote returns a fresh raw quote over reportData. With IsSupported it
// makes QE a go-tdx-guest client.QuoteProvider.
func (q *QE) GetRawQuote(reportData [64]byte) ([]byte, error) {
	qt, err := q.quote(reportData)
	if err != nil {
		return nil, err
	}
	return qt.Marshal()
}

// IsSupported always succeeds: the fake QE is always there.
func (q *QE) IsSupported() error { return nil }
