package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/clawea/attester/wire/tpmquote"
	tdxabi "github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/pcs"
	tdxpb "github.com/google/go-tdx-guest/proto/tdx"
	tdxverify "github.com/google/go-tdx-guest/verify"
)

// tdxFormat is Evidence.Format for TDX evidence (docs/spec/platform-tdx.md).
const tdxFormat = tdxquote.Format

// tdxFormatV5 is the format raw verification gives a DCAP version 5
// quote (docs/spec/verify-platform.md, "Raw evidence"). Attestation
// evidence carries version 4 only (TDXFormat).
const tdxFormatV5 = "tdx/quote-v5"

// fakeQEMarker starts the header user data of every simulated quote
// (docs/spec/platform-tdx.md, section 4).
const fakeQEMarker = "TEST ONLY FAKE QE"

// TDXClaims are the verified TD quote fields not in Result itself.
type TDXClaims struct {
	// Body is the signed TD quote body (MRTD, RTMRs, MRCONFIGID, MROWNER,
	// TD_ATTRIBUTES, XFAM, TEE_TCB_SVN, MRSEAM, ...).
	Body tdxquote.Body
	// QEVendorID is the quote header's QE vendor ID.
	QEVendorID [16]byte
	// QESVN is the quoting enclave's ISVSVN from the PCK-signed QE report.
	QESVN uint16
	// BodyType is the body type of a version 5 quote: 2 (TD 1.0) or 3
	// (TD 1.5, whose Body has TEE_TCB_SVN2 and MRSERVICETD). It is zero for
	// a version 4 quote.
	BodyType uint16
}

func verifyTDX(ev *evidence.Evidence, want [64]byte, now time.Time, opts *Options) (*Result, error) {
	if ev.Format != tdxFormat && (ev.Format != tdxFormatV5 || !opts.allowQuoteV5) {
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: tdx format %q", errUnsupported, safetext.Clip(ev.Format, 32)))
	}
	if err := refuseUnallowedSimulated(ev, opts); err != nil {
		return nil, err
	}
	if err := checkTDXExtras(ev); err != nil {
		return nil, err
	}
	parse := tdxquote.ParseEvidence
	if ev.Format == tdxFormatV5 {
		parse = tdxquote.Parse
	}
	q, err := parse(ev.Blob)
	if errors.Is(err, tdxquote.ErrUnsupported) {
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: %w", errUnsupported, err))
	}
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	if ev.Format == tdxFormatV5 && q.BodyType == 0 {
		return nil, rejected(checkParse, fmt.Errorf("%s evidence carries a version %d quote", ev.Format, q.Header.Version))
	}
	chain, err := tdxChain(ev, q)
	if err != nil {
		return nil, err
	}

	// Trust anchor by the Simulated flag only.
	rs, err := rootsOrErr()
	if err != nil {
		return nil, err
	}
	pool, anchor, rootID := rs.intelPool, rs.intel, rootIDIntel
	if ev.Simulated {
		pool, anchor, rootID = rs.simPool, rs.simIntel, rootIDSimIntel
	}
	if !ev.Simulated {
		if tdxsimroots.IsRoot(chain[2]) {
			return nil, rejected(checkRoot, fmt.Errorf("%w: quote chains to the simulation root but is not marked simulated", ErrUntrustedRoot))
		}
		if bytes.HasPrefix(q.Header.UserData[:], []byte(fakeQEMarker)) {
			return nil, rejected(checkRoot, fmt.Errorf("%w: quote is from the fake quoting enclave but is not marked simulated", ErrUntrustedRoot))
		}
	}
	if !bytes.Equal(chain[2], anchor.Raw) {
		return nil, rejected(checkRoot, fmt.Errorf("%w: pck chain root is not %s", ErrUntrustedRoot, rootID))
	}

	ts := &tdxverify.TimeSet{PckCertChain: now, TcbInfo: now, QeIdentity: now, PckCrl: now, RootCaCrl: now}
	var pq *tdxpb.QuoteV4
	if ev.Format == tdxFormatV5 {
		// go-tdx-guest reads version 4 only: steps 2-5 by hand.
		if err := checkTDXCertification(q, chain, pool, now); err != nil {
			return nil, err
		}
		if err := checkTDXQuoteSignature(q); err != nil {
			return nil, err
		}
	} else if pq, err = verifyTDXV4(ev.Blob, q, chain, pool, now, ts); err != nil {
		return nil, err
	}

	if err := checkReportData(q.Body.ReportData[:], want, opts); err != nil {
		return nil, err
	}
	boot, err := tdxBootChain(ev, &q.Body)
	if err != nil {
		return nil, err
	}

	res := &Result{
		Platform:    evidence.PlatformTDX,
		Format:      ev.Format,
		Simulated:   ev.Simulated,
		ReportData:  q.Body.ReportData,
		Measurement: clone(q.Body.MRTD[:]),
		TCB:         fmt.Sprintf("%x", q.Body.TeeTcbSvn[:]),
		Debug:       q.Body.Debug(),
		RootID:      rootID,
		Revocation:  StatusSkipped,
		Collateral:  StatusSkipped,
		TDX:         &TDXClaims{Body: q.Body, QEVendorID: q.Header.QEVendorID, QESVN: q.QEReport.ISVSVN, BodyType: q.BodyType},
		Boot:        boot,
	}

	c := opts.Collateral
	switch {
	case pq == nil && c.tdxAny():
		return nil, cannotCheck(checkCollateral, fmt.Errorf("%w: tdx collateral for a version 5 quote", errUnsupported))
	case c.tdxHasCollateral():
		if err := c.tdxCheckInputs(); err != nil {
			return nil, err
		}
		tcb, err := verifyTDXCollateral(pq, c, pool, ts)
		if err != nil {
			return nil, err
		}
		res.Collateral, res.TCBStatus, res.QETCBStatus, res.TCBAdvisoryIDs = StatusChecked, tcb.status, tcb.qeStatus, tcb.advisories
		if c.tdxHasCRLs() {
			res.Revocation = StatusChecked
		}
	case c.tdxAny():
		return nil, cannotCheck(checkCollateral, fmt.Errorf("%w: tdx collateral needs tcb info and qe identity with their issuer chains", errMissingCollateral))
	}
	if res.Collateral == StatusSkipped && !opts.AllowUncheckedCollateral {
		return nil, cannotCheck(checkCollateral, fmt.Errorf("%w: no tdx tcb info and qe identity supplied", errMissingCollateral))
	}
	if res.Revocation == StatusSkipped && !opts.AllowUncheckedRevocation {
		return nil, cannotCheck(checkRevocation, fmt.Errorf("%w: no pck and root ca crls supplied", errMissingCollateral))
	}
	return res, nil
}

// verifyTDXV4 runs steps 2-5 of docs/spec/platform-tdx.md on a version 4
// quote with go-tdx-guest: chain, QE report, key binding, quote signature.
// No collateral, no network. It returns the library's form of the quote
// for the collateral checks.
func verifyTDXV4(blob []byte, q *tdxquote.Quote, chain [][]byte, pool *x509.CertPool, now time.Time, ts *tdxverify.TimeSet) (*tdxpb.QuoteV4, error) {
	var pq *tdxpb.QuoteV4
	err := guard(checkParse, func() error {
		a, err := tdxabi.QuoteToProto(blob)
		if err != nil {
			return rejected(checkParse, err)
		}
		v, ok := a.(*tdxpb.QuoteV4)
		if !ok {
			return cannotCheck(checkFormat, fmt.Errorf("%w: quote type %T", errUnsupported, a))
		}
		pq = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	crypto := &tdxverify.Options{TrustedRoots: pool, Now: ts, Getter: &offlineGetter{c: &Collateral{}}}
	if err := guard(checkSignature, func() error { return tdxverify.TdxQuote(pq, crypto) }); err != nil {
		return nil, diagnoseTDX(err, q, chain, pool, now)
	}
	return pq, nil
}

// tdxTCB is the TCB assessment of checked TDX collateral.
type tdxTCB struct {
	status, qeStatus string
	advisories       []string
}

// Prefixes of the errors go-tdx-guest returns when everything it checked
// passed except a TCB status other than UpToDate (verifyTdQuoteBody and
// verifyQeReport, the last steps of TdxQuote).
const (
	tdxStatusFailure = "TDX TCB info reported by Intel PCS failed TCB status check: "
	qeStatusFailure  = "QE Identity reported by Intel PCS failed TCB status check: "
)

// tdxRevokedRE matches go-tdx-guest's revocation errors (PCK leaf,
// intermediate, TCB signing certificate on a CRL).
var tdxRevokedRE = regexp.MustCompile(`^(PCK Leaf certificate in PCK certificate chain|intermediate certificate in PCK certificate chain|tcbInfo response verification failed: signing certificate|QeIdentity response verification failed: signing certificate) was revoked at `)

// verifyTDXCollateral runs go-tdx-guest with the supplied collateral served
// offline and returns the TCB levels' statuses and advisories. go-tdx-guest
// refuses any status but UpToDate; a status is a policy decision
// (CheckPolicy), so such a refusal is turned into a result when it is the
// only failure, after checking the QE identity that go-tdx-guest skipped.
// A Revoked level is always rejected.
func verifyTDXCollateral(pq *tdxpb.QuoteV4, c *Collateral, pool *x509.CertPool, ts *tdxverify.TimeSet) (*tdxTCB, error) {
	g := &offlineGetter{c: c}
	o := &tdxverify.Options{GetCollateral: true, CheckRevocations: c.tdxHasCRLs(), Getter: g, TrustedRoots: pool, Now: ts}
	err := guard(checkCollateral, func() error { return tdxverify.TdxQuote(pq, o) })
	if errors.Is(err, errInternal) {
		return nil, err
	}
	if len(g.missing) > 0 {
		return nil, cannotCheck(checkCollateral, fmt.Errorf("%w: %d items", errMissingCollateral, len(g.missing)))
	}
	var td, qe pcs.TcbLevel
	lerr := guard(checkCollateral, func() error {
		var err error
		td, qe, err = tdxverify.SupportedTcbLevelsFromCollateral(pq, o)
		return err
	})
	if err != nil && lerr == nil {
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, tdxStatusFailure) && td.TcbStatus != pcs.TcbComponentStatusUpToDate:
			// TdxQuote stopped before matching the QE report to the QE
			// identity: do that here, without the status.
			if qerr := checkQEIdentity(pq, c.TDXQEIdentity); qerr != nil {
				return nil, rejected(checkCollateral, qerr)
			}
			err = nil
		case strings.HasPrefix(msg, qeStatusFailure) && td.TcbStatus == pcs.TcbComponentStatusUpToDate &&
			qe.TcbStatus != pcs.TcbComponentStatusUpToDate:
			err = nil
		}
	}
	if err != nil && lerr == nil && tdxRevokedRE.MatchString(err.Error()) {
		// go-tdx-guest reports a certificate on a (verified) CRL only in
		// text: "... certificate ... was revoked at <time>".
		return nil, rejected(checkRevocation, fmt.Errorf("%w: %s", ErrRevoked, safetext.Clip(err.Error(), 160)))
	}
	if err != nil {
		for _, expired := range []error{tdxverify.ErrTcbInfoExpired, tdxverify.ErrQeIdentityExpired,
			tdxverify.ErrPCKCrlExpired, tdxverify.ErrRootCaCrlExpired, tdxverify.ErrTcbInfoSigningCertExpired,
			tdxverify.ErrTcbInfoRootCertExpired, tdxverify.ErrQeIdentitySigningCertExpired,
			tdxverify.ErrQeIdentityRootCertExpired, tdxverify.ErrPCKCrlSigningCertExpired, tdxverify.ErrPCKCrlRootCertExpired} {
			if errors.Is(lerr, expired) {
				return nil, rejected(checkCollateral, fmt.Errorf("%w: %w", errCollateralExpired, expired))
			}
		}
		return nil, rejected(checkCollateral, err)
	}
	if lerr != nil {
		return nil, rejected(checkCollateral, lerr)
	}
	for _, l := range []pcs.TcbLevel{td, qe} {
		if l.TcbStatus == tcbStatusRevoked {
			return nil, rejected(checkCollateral, fmt.Errorf("%w: the matching tcb level is Revoked", ErrRevoked))
		}
		if !slices.Contains(knownTCBStatuses, string(l.TcbStatus)) {
			return nil, rejected(checkCollateral, fmt.Errorf("unknown tcb status %q", safetext.Clip(string(l.TcbStatus), 48)))
		}
	}
	var adv []string
	for _, a := range append(slices.Clone(td.AdvisoryIDs), qe.AdvisoryIDs...) {
		a = safetext.Clip(a, 64)
		if !slices.Contains(adv, a) {
			adv = append(adv, a)
		}
	}
	slices.Sort(adv)
	return &tdxTCB{status: string(td.TcbStatus), qeStatus: string(qe.TcbStatus), advisories: adv}, nil
}

// checkQEIdentity matches the QE report against the (already verified) QE
// identity the way go-tdx-guest's verifyQeReport does, except for the TCB
// status: MISCSELECT and ATTRIBUTES under their masks, MRSIGNER, ISVPRODID.
func checkQEIdentity(pq *tdxpb.QuoteV4, raw []byte) error {
	var qi pcs.QeIdentity
	if err := json.Unmarshal(raw, &qi); err != nil {
		return fmt.Errorf("qe identity: %v", err)
	}
	id := qi.EnclaveIdentity
	rep := pq.GetSignedData().GetCertificationData().GetQeReportCertificationData().GetQeReport()
	if rep == nil {
		return errors.New("quote has no qe report")
	}
	if len(id.Miscselect.Bytes) != 4 || len(id.MiscselectMask.Bytes) != 4 {
		return errors.New("qe identity miscselect is not 4 bytes")
	}
	if rep.GetMiscSelect()&binary.LittleEndian.Uint32(id.MiscselectMask.Bytes) != binary.LittleEndian.Uint32(id.Miscselect.Bytes) {
		return errors.New("qe report miscselect does not match the qe identity")
	}
	attrs := rep.GetAttributes()
	if len(id.AttributesMask.Bytes) != len(attrs) || len(id.Attributes.Bytes) != len(attrs) {
		return errors.New("qe identity attributes have the wrong size")
	}
	for i := range attrs {
		if attrs[i]&id.AttributesMask.Bytes[i] != id.Attributes.Bytes[i] {
			return errors.New("qe report attributes do not match the qe identity")
		}
	}
	if !bytes.Equal(id.Mrsigner.Bytes, rep.GetMrSigner()) {
		return errors.New("qe report mrsigner does not match the qe identity")
	}
	if rep.GetIsvProdId() != uint32(id.IsvProdID) {
		return errors.New("qe report isvprodid does not match the qe identity")
	}
	return nil
}

// diagnoseTDX names the check that made go-tdx-guest refuse a quote that
// parsed and whose chain ends in the pinned root: the PCK chain, the QE
// report signature, the attestation key binding, else the quote signature.
func diagnoseTDX(libErr error, q *tdxquote.Quote, chain [][]byte, pool *x509.CertPool, now time.Time) error {
	if errors.Is(libErr, errInternal) {
		return libErr
	}
	if errors.Is(libErr, tdxverify.ErrHashVerificationFail) {
		return rejected(checkSignature, libErr)
	}
	if err := checkTDXCertification(q, chain, pool, now); err != nil {
		return err
	}
	return rejected(checkChain, libErr)
}

// checkTDXCertification checks what certifies the attestation key (steps
// 2-4 of docs/spec/platform-tdx.md): the PCK chain to pool at now, the QE
// report's signature by the PCK key, and the QE report's binding of the
// attestation key and QE auth data.
func checkTDXCertification(q *tdxquote.Quote, chain [][]byte, pool *x509.CertPool, now time.Time) error {
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return rejected(checkChain, fmt.Errorf("pck leaf: %w", err))
	}
	inter, err := x509.ParseCertificate(chain[1])
	if err != nil {
		return rejected(checkChain, fmt.Errorf("pck intermediate: %w", err))
	}
	if leaf.Subject.CommonName != "Intel SGX PCK Certificate" ||
		(inter.Subject.CommonName != "Intel SGX PCK Platform CA" && inter.Subject.CommonName != "Intel SGX PCK Processor CA") {
		return rejected(checkChain, fmt.Errorf("pck chain names %q issued by %q, not an intel sgx pck certificate and ca",
			safetext.Clip(leaf.Subject.CommonName, 48), safetext.Clip(inter.Subject.CommonName, 48)))
	}
	for _, c := range []*x509.Certificate{leaf, inter} {
		if c.SignatureAlgorithm != x509.ECDSAWithSHA256 {
			return rejected(checkChain, fmt.Errorf("pck chain certificate %q is signed with %v, not ecdsa with sha-256",
				safetext.Clip(c.Subject.CommonName, 48), c.SignatureAlgorithm))
		}
	}
	ip := x509.NewCertPool()
	ip.AddCert(inter)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: ip, CurrentTime: now}); err != nil {
		return rejected(checkChain, err)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || !verifyP256(pub, q.QEReport.Marshal(), q.QEReportSignature) {
		return rejected(checkQEReport, errors.New("qe report signature does not verify under the pck key"))
	}
	bind := sha256.Sum256(append(append([]byte(nil), q.AttestationKey[:]...), q.QEAuthData...))
	if !bytes.Equal(q.QEReport.ReportData[:32], bind[:]) || !allZero(q.QEReport.ReportData[32:]) {
		return rejected(checkQEReport, errors.New("qe report does not bind the attestation key"))
	}
	return nil
}

// checkTDXQuoteSignature checks the attestation key's signature over the
// quote's signed bytes (step 5 of docs/spec/platform-tdx.md).
func checkTDXQuoteSignature(q *tdxquote.Quote) error {
	ak, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append([]byte{4}, q.AttestationKey[:]...))
	if err != nil {
		return rejected(checkSignature, fmt.Errorf("attestation key: %w", err))
	}
	if !verifyP256(ak, q.SignedBytes(), q.Signature) {
		return rejected(checkSignature, errors.New("quote signature does not verify under the attestation key"))
	}
	return nil
}

func verifyP256(pub *ecdsa.PublicKey, msg []byte, sig [64]byte) bool {
	if pub.Curve != elliptic.P256() {
		return false
	}
	d := sha256.Sum256(msg)
	return ecdsa.Verify(pub, d[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
}

// auxEventLog is the Evidence.Aux key of a TDX CC event log (CCEL), as read
// from the ACPI CCEL table's log area; the same name as the TPM event log.
const auxEventLog = tpmquote.AuxEventLog

// tdxChain returns the quote's PCK chain, which cert_chain must equal.
func tdxChain(ev *evidence.Evidence, q *tdxquote.Quote) ([][]byte, error) {
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	if !slices.EqualFunc(ev.CertChain, chain, bytes.Equal) {
		return nil, rejected(checkParse, errors.New("cert_chain differs from the quote's pck chain"))
	}
	return chain, nil
}

// checkTDXExtras refuses a detached signature and any aux data but the CC
// event log.
func checkTDXExtras(ev *evidence.Evidence) error {
	if len(ev.Signature) != 0 {
		return rejected(checkParse, errors.New("tdx evidence carries a detached signature"))
	}
	for k := range ev.Aux {
		if k != auxEventLog {
			return rejected(checkParse, fmt.Errorf("tdx evidence carries aux %q", safetext.Clip(k, 32)))
		}
	}
	return nil
}

// tdxBootChain replays the evidence's CC event log, if any, against the
// verified RTMRs: RTMR0-2 always, RTMR3 when the log extends it.
func tdxBootChain(ev *evidence.Evidence, b *tdxquote.Body) (*BootChain, error) {
	log, ok := ev.Aux[auxEventLog]
	if !ok {
		return nil, nil
	}
	rtmrs := map[int][]byte{0: b.RTMR[0][:], 1: b.RTMR[1][:], 2: b.RTMR[2][:]}
	if claimed, err := ReplayEventLog(logCCEL, log); err == nil && slices.Contains(claimed.Registers, 3) {
		rtmrs[3] = b.RTMR[3][:]
	}
	return replayBootChain(logCCEL, log, rtmrs)
}
