package tpm

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/tpmquote"
)

// Azure confidential VMs (docs/spec/platform-azure.md): the paravisor's
// vTPM holds the HCL report and the attestation key; the instance metadata
// service (IMDS) serves the VCEK and turns TD reports into TD quotes.
const (
	nvIndexHCLReport uint32 = 0x01400001
	nvIndexUserData  uint32 = 0x01400002
	azureAKHandle    uint32 = 0x81000003

	defaultIMDS     = "http://169.254.169.254"
	imdsTDQuotePath = "/acc/tdquote"
	imdsVCEKPath    = "/metadata/THIM/amd/certification"
	imdsTimeout     = 30 * time.Second
	maxIMDSResponse = 64 << 10
	// maxHCLReport bounds the HCL report index (2600 bytes on Azure).
	maxHCLReport = 8 << 10
)

// azurePCRs are the PCRs an Azure quote covers: all 24, as the paravisor's
// own tooling quotes them.
func azurePCRs() []int {
	out := make([]int, tpmquote.NumPCRs)
	for i := range out {
		out[i] = i
	}
	return out
}

// azure is the vTPM of an Azure confidential VM (platform azure-snp or
// azure-tdx), as OpenAzure returns it. Its methods are safe for concurrent
// use.
type azure struct {
	t        *TPM
	platform string
	ak       tpm2.NamedHandle
	imds     string
	client   *http.Client
	vcek     []byte // azure-snp: cached after the first fetch
}

var (
	_ enclave.Quoter = (*azure)(nil)
	_ enclave.Namer  = (*azure)(nil)
)

// OpenAzure opens the vTPM of opts (Device or Address; PCRs must be unset:
// all 24 are quoted) and checks that it is an Azure paravisor's: the HCL
// report NV index and the attestation key exist. want is
// evidence.PlatformAzureSNP, evidence.PlatformAzureTDX, or "" for either;
// the HCL report says which it is. opts.AzureIMDS is the metadata service's
// base URL (default http://169.254.169.254). Without the NV index the error
// wraps enclave.ErrNotAvailable.
func OpenAzure(ctx context.Context, want string, opts Options) (*azure, error) {
	if len(opts.PCRs) != 0 {
		return nil, fmt.Errorf("%w: an azure quote covers all pcrs", errOptions)
	}
	opts.PCRs = azurePCRs()
	t, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	a := &azure{t: t, imds: strings.TrimSuffix(opts.AzureIMDS, "/"), client: &http.Client{Timeout: imdsTimeout, Transport: &http.Transport{Proxy: nil}}}
	if a.imds == "" {
		a.imds = defaultIMDS
	}
	if err := a.init(ctx, want); err != nil {
		t.tp.Close()
		return nil, err
	}
	return a, nil
}

func (a *azure) init(ctx context.Context, want string) error {
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.bind(ctx)()
	if err := t.startup(); err != nil {
		return err
	}
	report, err := t.readNV(tpm2.TPMHandle(nvIndexHCLReport), maxHCLReport)
	if errors.Is(err, tpm2.TPMRCHandle) {
		return fmt.Errorf("%w: no hcl report in nv index 0x%08x (not an azure confidential vm)", enclave.ErrNotAvailable, nvIndexHCLReport)
	}
	if err != nil {
		return fmt.Errorf("tpm: azure: read hcl report: %w", err)
	}
	hcl, err := hclreport.Parse(report)
	if err != nil {
		return fmt.Errorf("tpm: azure: %w", err)
	}
	a.platform = hcl.Platform()
	if want != "" && want != a.platform {
		return fmt.Errorf("%w: the hcl report is %s, not %s", errOptions, a.platform, want)
	}
	rsp, err := tpm2.ReadPublic{ObjectHandle: tpm2.TPMHandle(azureAKHandle)}.Execute(t.tp)
	if err != nil {
		return fmt.Errorf("tpm: azure: attestation key 0x%08x: %w", azureAKHandle, err)
	}
	a.ak = tpm2.NamedHandle{Handle: tpm2.TPMHandle(azureAKHandle), Name: rsp.Name}
	return nil
}

// Platform implements enclave.Namer.
func (a *azure) Platform() string { return a.platform }

// Close closes the connection; the paravisor's key stays.
func (a *azure) Close() error {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	if a.t.closed {
		return nil
	}
	a.t.closed = true
	return a.t.tp.Close()
}

// Quote implements enclave.Quoter (docs/spec/platform-azure.md, section
// 3): rd into the HCL user data, the refreshed HCL report, the AK's quote
// with qualifying data rd.QualifyingData(), and the VCEK or the TD quote.
func (a *azure) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	if rd.IsZero() {
		return nil, evidence.ErrZeroReportData
	}
	hcl, attest, sig, pcrs, err := a.tpmPart(ctx, rd)
	if err != nil {
		return nil, err
	}
	ev := &evidence.Evidence{
		Platform:  a.platform,
		Simulated: a.t.simulated,
		Format:    hclreport.Format,
		Blob:      attest,
		Signature: sig,
		Aux:       map[string][]byte{hclreport.AuxReport: hcl, tpmquote.AuxPCRValues: pcrs.Marshal()},
	}
	switch a.platform {
	case evidence.PlatformAzureSNP:
		vcek, err := a.fetchVCEK(ctx)
		if err != nil {
			return nil, err
		}
		ev.CertChain = [][]byte{vcek}
	default:
		r, err := hclreport.Parse(hcl)
		if err != nil {
			return nil, fmt.Errorf("tpm: azure: %w", err)
		}
		q, err := a.tdQuote(ctx, r.HW)
		if err != nil {
			return nil, err
		}
		ev.Aux[hclreport.AuxTDQuote] = q
	}
	return ev, nil
}

// tpmPart writes rd to the user-data index, reads the refreshed HCL report
// and quotes. It returns the raw RSASSA signature.
func (a *azure) tpmPart(ctx context.Context, rd evidence.ReportData) (hcl, attest, sig []byte, pcrs tpmquote.PCRValues, err error) {
	t := a.t
	unlock, err := t.lock(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer unlock()
	b := rd.Bytes()
	if err := t.writeUserData(b[:]); err != nil {
		return nil, nil, nil, nil, err
	}
	if hcl, err = t.readNV(tpm2.TPMHandle(nvIndexHCLReport), maxHCLReport); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("tpm: azure: read hcl report: %w", err)
	}
	qd := rd.QualifyingData()
	attest, s, pcrs, err := t.quotePCRs(a.ak, qd[:])
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if s.SigAlg != tpm2.TPMAlgRSASSA {
		return nil, nil, nil, nil, fmt.Errorf("%w: azure attestation key signs with 0x%04x, not rsassa", errUnexpectedTPM, s.SigAlg)
	}
	rsa, err := s.Signature.RSASSA()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: quote signature: %v", errUnexpectedTPM, err)
	}
	return hcl, attest, slices.Clone(rsa.Sig.Buffer), pcrs, nil
}

// writeUserData writes the 64 bytes to the HCL user-data index, defining
// it first when absent (owner authorization, as Azure's tooling does).
func (t *TPM) writeUserData(data []byte) error {
	idx := tpm2.TPMHandle(nvIndexUserData)
	owner := tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	pub, err := tpm2.NVReadPublic{NVIndex: idx}.Execute(t.tp)
	if errors.Is(err, tpm2.TPMRCHandle) {
		_, err = tpm2.NVDefineSpace{
			AuthHandle: owner,
			PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
				NVIndex:    idx,
				NameAlg:    tpm2.TPMAlgSHA256,
				Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthWrite: true, AuthRead: true, NoDA: true, NT: tpm2.TPMNTOrdinary},
				DataSize:   uint16(len(data)),
			}),
		}.Execute(t.tp)
		if err == nil {
			pub, err = tpm2.NVReadPublic{NVIndex: idx}.Execute(t.tp)
		}
	}
	if err != nil {
		return fmt.Errorf("tpm: azure: user data index: %w", err)
	}
	_, err = tpm2.NVWrite{
		AuthHandle: owner,
		NVIndex:    tpm2.NamedHandle{Handle: idx, Name: pub.NVName},
		Data:       tpm2.TPM2BMaxNVBuffer{Buffer: data},
	}.Execute(t.tp)
	if err != nil {
		return fmt.Errorf("tpm: azure: write user data: %w", err)
	}
	return nil
}

// fetchVCEK returns the VCEK from the metadata service (cached).
func (a *azure) fetchVCEK(ctx context.Context) ([]byte, error) {
	a.t.mu.Lock()
	cached := a.vcek
	a.t.mu.Unlock()
	if cached != nil {
		return slices.Clone(cached), nil
	}
	s, err := a.imdsString(ctx, http.MethodGet, imdsVCEKPath, nil, "vcek", "vcekCert")
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode([]byte(s))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("tpm: azure: vcek response has no vcekCert certificate")
	}
	a.t.mu.Lock()
	a.vcek = blk.Bytes
	a.t.mu.Unlock()
	return slices.Clone(blk.Bytes), nil
}

// imdsString calls the metadata service and returns the string member name
// of its JSON answer ("" when absent or not a string); what names the
// answer in errors.
func (a *azure) imdsString(ctx context.Context, method, path string, req []byte, what, name string) (string, error) {
	body, err := a.imdsCall(ctx, method, path, req)
	if err != nil {
		return "", err
	}
	v, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: maxIMDSResponse})
	if err != nil {
		return "", fmt.Errorf("tpm: azure: %s response: %w", what, err)
	}
	s, _ := v.GetString(name)
	return s, nil
}

// tdQuote asks the metadata service for the TD quote of tdReport.
func (a *azure) tdQuote(ctx context.Context, tdReport []byte) ([]byte, error) {
	req := []byte(`{"report":"` + b64u.Encode(tdReport) + `"}`)
	s, err := a.imdsString(ctx, http.MethodPost, imdsTDQuotePath, req, "td quote", "quote")
	if err != nil {
		return nil, err
	}
	q, err := b64u.Decode(strings.TrimRight(s, "="))
	if err != nil || len(q) == 0 {
		return nil, errors.New("tpm: azure: td quote response has no base64url quote")
	}
	return q, nil
}

func (a *azure) imdsCall(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.imds+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("tpm: azure: %w", err)
	}
	req.Header.Set("Metadata", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rsp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tpm: azure: metadata service %s: %w", path, err)
	}
	defer rsp.Body.Close()
	b, err := bounded.Read(rsp.Body, maxIMDSResponse, "metadata service response")
	if err != nil {
		return nil, fmt.Errorf("tpm: azure: %w", err)
	}
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tpm: azure: metadata service %s: status %d", path, rsp.StatusCode)
	}
	return b, nil
}
