package fakeqe

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// TEST ONLY Intel PCS collateral for quotes of a fake QE: TCB info, QE
// identity, PCK CRL and root CA CRL in Intel's formats, signed under the
// fake hierarchy's root exactly as Intel signs them under its root, so that
// go-tdx-guest's real collateral checks run against them (and refuse them
// under Intel's root).

// intelRootCRLURL is the CRL distribution point of Intel's SGX Root CA.
const intelRootCRLURL = "https://certificates.trustedservices.intel.com/IntelSGXRootCA.der"

// tcbSigningCN is the subject common name go-tdx-guest requires of the TCB
// info and QE identity signing certificate.
const tcbSigningCN = "Intel SGX TCB Signing"

// TCBLevel is one TD TCB level of generated TCB info, listed highest first.
type TCBLevel struct {
	// Status is the level's tcbStatus ("UpToDate", "OutOfDate", ...).
	Status string
	// AdvisoryIDs are the level's advisoryIDs.
	AdvisoryIDs []string
	// AboveQuote makes the level require a higher TDX module SVN than the
	// QE's TD reports, so that the quote does not match it.
	AboveQuote bool
}

// PCSOptions shapes generated collateral.
type PCSOptions struct {
	// Issued is issueDate / thisUpdate; required.
	Issued time.Time
	// Validity is nextUpdate - Issued (0: 30 days; negative: already
	// expired at Issued).
	Validity time.Duration
	// TCBLevels are the TD TCB levels; nil means one UpToDate level that
	// matches the QE.
	TCBLevels []TCBLevel
	// QEStatus is the QE identity level's status ("" means UpToDate) and
	// QEAdvisoryIDs its advisoryIDs.
	QEStatus      string
	QEAdvisoryIDs []string
	// RevokePCK lists the PCK leaf on the PCK CRL.
	RevokePCK bool
}

// pcsCollateral is what Intel PCS serves for a platform: response bodies and
// the PEM issuer chains it sends in headers.
type pcsCollateral struct {
	TCBInfo, TCBInfoIssuerChain       []byte
	QEIdentity, QEIdentityIssuerChain []byte
	PCKCRL, PCKCRLIssuerChain         []byte
	RootCRL                           []byte
}

// Header returns the PCS header carrying chain (URL-encoded PEM).
func Header(name string, chain []byte) map[string][]string {
	return map[string][]string{name: {url.QueryEscape(string(chain))}}
}

type tcbComponent struct {
	SVN byte `json:"svn"`
}

type tcb struct {
	SGX    []tcbComponent `json:"sgxtcbcomponents,omitempty"`
	PCESVN uint16         `json:"pcesvn,omitempty"`
	TDX    []tcbComponent `json:"tdxtcbcomponents,omitempty"`
	ISVSVN uint32         `json:"isvsvn"`
}

type tcbLevel struct {
	TCB         tcb       `json:"tcb"`
	TCBDate     time.Time `json:"tcbDate"`
	TCBStatus   string    `json:"tcbStatus"`
	AdvisoryIDs []string  `json:"advisoryIDs,omitempty"`
}

type tdxModule struct {
	ID             string     `json:"id,omitempty"`
	MRSigner       string     `json:"mrsigner"`
	Attributes     string     `json:"attributes"`
	AttributesMask string     `json:"attributesMask"`
	TCBLevels      []tcbLevel `json:"tcbLevels,omitempty"`
}

type tcbInfo struct {
	ID                      string      `json:"id"`
	Version                 int         `json:"version"`
	IssueDate               time.Time   `json:"issueDate"`
	NextUpdate              time.Time   `json:"nextUpdate"`
	FMSPC                   string      `json:"fmspc"`
	PCEID                   string      `json:"pceId"`
	TCBType                 int         `json:"tcbType"`
	TCBEvaluationDataNumber int         `json:"tcbEvaluationDataNumber"`
	TDXModule               tdxModule   `json:"tdxModule"`
	TDXModuleIdentities     []tdxModule `json:"tdxModuleIdentities"`
	TCBLevels               []tcbLevel  `json:"tcbLevels"`
}

type enclaveIdentity struct {
	ID                      string     `json:"id"`
	Version                 int        `json:"version"`
	IssueDate               time.Time  `json:"issueDate"`
	NextUpdate              time.Time  `json:"nextUpdate"`
	TCBEvaluationDataNumber int        `json:"tcbEvaluationDataNumber"`
	MiscSelect              string     `json:"miscselect"`
	MiscSelectMask          string     `json:"miscselectMask"`
	Attributes              string     `json:"attributes"`
	AttributesMask          string     `json:"attributesMask"`
	MRSigner                string     `json:"mrsigner"`
	ISVProdID               uint16     `json:"isvprodid"`
	TCBLevels               []tcbLevel `json:"tcbLevels"`
}

// PCSCollateral returns TEST ONLY collateral for this QE's quotes.
func (q *QE) PCSCollateral(o PCSOptions) (*pcsCollateral, error) {
	if o.Issued.IsZero() {
		return nil, fmt.Errorf("fakeqe: PCSOptions.Issued is required")
	}
	issued, next := pcsWindow(o)
	signKey, chain, err := q.h.tcbSigningChain()
	if err != nil {
		return nil, err
	}
	c := &pcsCollateral{TCBInfoIssuerChain: chain, QEIdentityIssuerChain: chain}
	if c.TCBInfo, err = signedBody(signKey, "tcbInfo", q.tdxTCBInfo(o, issued, next)); err != nil {
		return nil, err
	}
	if c.QEIdentity, err = signedBody(signKey, "enclaveIdentity", q.qeIdentity(o, issued, next)); err != nil {
		return nil, err
	}
	if err := q.h.crls(c, o.RevokePCK, issued, next); err != nil {
		return nil, err
	}
	return c, nil
}

// pcsDate is the TCB date of every TCB level.
var pcsDate = time.Date(2025, time.June, 1, 0, 0, 0, 0, time.UTC)

// pcsWindow returns the issue and next-update times of the collateral: a
// negative Validity gives collateral that expired one validity ago.
func pcsWindow(o PCSOptions) (issued, next time.Time) {
	issued = o.Issued.UTC().Truncate(time.Second)
	validity := o.Validity
	if validity == 0 {
		validity = 30 * 24 * time.Hour
	}
	next = issued.Add(validity)
	if validity < 0 {
		issued, next = issued.Add(2*validity), issued.Add(validity)
	}
	return issued, next
}

// tcbSigningChain issues the TCB signing certificate and returns its key
// and the PEM issuer chain of the TCB info and QE identity.
func (h *Hierarchy) tcbSigningChain() (*ecdsa.PrivateKey, []byte, error) {
	signKey, err := seedKey(h.seed, "tcb-signing")
	if err != nil {
		return nil, nil, err
	}
	signTmpl := &x509.Certificate{
		SerialNumber: serial(h.seed, "tcb-signing"),
		Subject:      testOnlyName(tcbSigningCN),
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment,
	}
	signDER, err := x509.CreateCertificate(rand.Reader, signTmpl, h.root, &signKey.PublicKey, h.rootKey)
	if err != nil {
		return nil, nil, fmt.Errorf("fakeqe: tcb signing certificate: %w", err)
	}
	// go-tdx-guest finds the root CA CRL through the CRL distribution point
	// of the root certificate in the QE identity's issuer chain. The pinned
	// simulation root has none, so the issuer chains carry the same root
	// (same name, same key, same key identifier) re-issued with Intel's
	// distribution point, where the offline verifier looks the CRL up.
	dpRootTmpl := &x509.Certificate{
		SerialNumber:          serial(h.seed, "root-ca-with-crl-dp"),
		RawSubject:            h.root.RawSubject,
		NotBefore:             h.root.NotBefore,
		NotAfter:              h.root.NotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
		SubjectKeyId:          h.root.SubjectKeyId,
		CRLDistributionPoints: []string{intelRootCRLURL},
	}
	dpRootDER, err := x509.CreateCertificate(rand.Reader, dpRootTmpl, dpRootTmpl, &h.rootKey.PublicKey, h.rootKey)
	if err != nil {
		return nil, nil, fmt.Errorf("fakeqe: root with crl distribution point: %w", err)
	}
	return signKey, pemCerts(signDER, dpRootDER), nil
}

// pemCerts returns DER certificates as concatenated PEM blocks.
func pemCerts(ders ...[]byte) []byte {
	var out []byte
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
	}
	return out
}

// signedBody returns the PCS form {name: v, "signature": hex} signed by
// signKey.
func signedBody(signKey *ecdsa.PrivateKey, name string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("fakeqe: %s: %w", name, err)
	}
	sig, err := sign(signKey, raw)
	if err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf(`{%q:%s,"signature":%q}`, name, raw, hex.EncodeToString(sig[:]))), nil
}

// tdxTCBInfo returns the TDX TCB info with a TCB level for each of
// o.TCBLevels (default: one UpToDate level at the quote's TCB).
func (q *QE) tdxTCBInfo(o PCSOptions, issued, next time.Time) tcbInfo {
	h, td := q.h, q.td
	levels := o.TCBLevels
	if levels == nil {
		levels = []TCBLevel{{Status: "UpToDate"}}
	}
	var main, module []tcbLevel
	for _, l := range levels {
		sgx := make([]tcbComponent, 16)
		for i := range sgx {
			sgx[i].SVN = h.cpuSVN[i]
		}
		tdx := make([]tcbComponent, 16)
		for i := range tdx {
			tdx[i].SVN = td.TeeTcbSvn[i]
		}
		isv := uint32(td.TeeTcbSvn[0])
		if l.AboveQuote {
			tdx[0].SVN++
			isv++
		}
		main = append(main, tcbLevel{TCB: tcb{SGX: sgx, PCESVN: h.pceSVN, TDX: tdx}, TCBDate: pcsDate, TCBStatus: l.Status, AdvisoryIDs: l.AdvisoryIDs})
		module = append(module, tcbLevel{TCB: tcb{ISVSVN: isv}, TCBDate: pcsDate, TCBStatus: l.Status, AdvisoryIDs: l.AdvisoryIDs})
	}
	mod := tdxModule{MRSigner: hex.EncodeToString(td.MRSignerSEAM[:]), Attributes: hex.EncodeToString(td.SEAMAttributes[:]), AttributesMask: "ffffffffffffffff"}
	modID := mod
	modID.ID = fmt.Sprintf("TDX_%02x", td.TeeTcbSvn[1])
	modID.TCBLevels = module
	return tcbInfo{
		ID: "TDX", Version: 3, IssueDate: issued, NextUpdate: next,
		FMSPC: hex.EncodeToString(fmspc[:]), PCEID: hex.EncodeToString(pceID[:]),
		TCBEvaluationDataNumber: 17, TDXModule: mod, TDXModuleIdentities: []tdxModule{modID}, TCBLevels: main,
	}
}

// qeIdentity returns the QE identity of the quoting enclave's report, at
// o.QEStatus (default UpToDate).
func (q *QE) qeIdentity(o PCSOptions, issued, next time.Time) enclaveIdentity {
	r := q.qeReport
	var misc [4]byte
	binary.LittleEndian.PutUint32(misc[:], r.MiscSelect)
	qeStatus := o.QEStatus
	if qeStatus == "" {
		qeStatus = "UpToDate"
	}
	return enclaveIdentity{
		ID: "TD_QE", Version: 2, IssueDate: issued, NextUpdate: next, TCBEvaluationDataNumber: 17,
		MiscSelect: hex.EncodeToString(misc[:]), MiscSelectMask: "ffffffff",
		Attributes: hex.EncodeToString(r.Attributes[:]), AttributesMask: "ffffffffffffffffffffffffffffffff",
		MRSigner: hex.EncodeToString(r.MRSigner[:]), ISVProdID: r.ISVProdID,
		TCBLevels: []tcbLevel{{TCB: tcb{ISVSVN: uint32(r.ISVSVN)}, TCBDate: pcsDate, TCBStatus: qeStatus, AdvisoryIDs: o.QEAdvisoryIDs}},
	}
}

// crls issues the PCK CRL (revoking the PCK leaf with revokePCK) and the
// root CA CRL into c.
func (h *Hierarchy) crls(c *pcsCollateral, revokePCK bool, issued, next time.Time) error {
	inter, err := x509.ParseCertificate(h.chainDER[1])
	if err != nil {
		return fmt.Errorf("fakeqe: intermediate: %w", err)
	}
	leaf, err := x509.ParseCertificate(h.chainDER[0])
	if err != nil {
		return fmt.Errorf("fakeqe: pck leaf: %w", err)
	}
	crl := func(issuer *x509.Certificate, key *ecdsa.PrivateKey, revoked ...*big.Int) ([]byte, error) {
		tmpl := &x509.RevocationList{Number: big.NewInt(issued.Unix()), ThisUpdate: issued, NextUpdate: next}
		for _, s := range revoked {
			tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: issued})
		}
		return x509.CreateRevocationList(rand.Reader, tmpl, issuer, key)
	}
	var revoked []*big.Int
	if revokePCK {
		revoked = append(revoked, leaf.SerialNumber)
	}
	if c.PCKCRL, err = crl(inter, h.interKey, revoked...); err != nil {
		return fmt.Errorf("fakeqe: pck crl: %w", err)
	}
	c.PCKCRLIssuerChain = pemCerts(h.chainDER[1], h.root.Raw)
	if c.RootCRL, err = crl(h.root, h.rootKey); err != nil {
		return fmt.Errorf("fakeqe: root crl: %w", err)
	}
	return nil
}
