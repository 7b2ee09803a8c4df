// Package fakeparavisor is a test Azure paravisor (docs/spec/platform-azure.md)
// in front of a real swtpm: a TPM command proxy that, whenever the guest
// writes the HCL user-data NV index 0x01400002, regenerates the HCL report
// in NV index 0x01400001 (a simulated SEV-SNP report or TD report whose
// REPORT_DATA starts with SHA-256 of fresh runtime claims carrying the user
// data and the AK, signed by the simulated AMD or Intel roots), and a fake
// instance metadata service serving the VCEK and TD quotes. The AK at
// 0x81000003 and every quote are swtpm's own, so the run binding is really
// exercised end to end. Everything it makes is simulated evidence.
package fakeparavisor

import (
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/snpevidence"
)

const (
	nvHCLReport uint32 = 0x01400001
	nvUserData  uint32 = 0x01400002
	akHandle    uint32 = 0x81000003
	// hclNVSize is the HCL report index size: libtpms allows 2048 bytes
	// per index (Azure's is 2600); the report is zero-padded to it.
	hclNVSize = 2048
	nvChunk   = 512

	ccNVWrite      = 0x00000137
	tpmHeaderSize  = 10
	maxCommandSize = 8 << 10
	tdReportSize   = 1024
	tdReportData   = 128
	tdInfoOffset   = 512
)

// paravisor is a running fake paravisor (Start returns it; callers use its
// exported fields).
type paravisor struct {
	// TPMAddr is the host:port the guest's TPM code connects to (raw TPM
	// 2.0 commands, as swtpm's data socket).
	TPMAddr string
	// IMDS is the base URL of the fake metadata service.
	IMDS string

	platform string
	up       *upstream
	ln       net.Listener
	http     *http.Server
	snp      *sim.Simulator
	vcek     []byte
	qe       *fakeqe.QE
	// Regenerations counts HCL report refreshes after the first (user-data
	// writes seen).
	Regenerations atomic.Int64
}

// Start starts swtpm and a fake paravisor for platform
// (evidence.PlatformAzureSNP or PlatformAzureTDX), stopped when tb ends.
func Start(tb testing.TB, platform string) *paravisor {
	tb.Helper()
	in := swtpmtest.StartForTest(tb)
	p, err := start(in.Addr, platform)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.close)
	return p
}

func start(swtpmAddr, platform string) (*paravisor, error) {
	conn, err := net.Dial("tcp", swtpmAddr)
	if err != nil {
		return nil, err
	}
	p := &paravisor{platform: platform, up: &upstream{conn: conn, TPM: transport.FromReadWriter(conn)}}
	switch platform {
	case evidence.PlatformAzureSNP:
		if p.snp, err = sim.New(sim.Options{Seed: []byte("fakeparavisor")}); err != nil {
			return nil, err
		}
	case evidence.PlatformAzureTDX:
		if p.qe, err = fakeqe.New(fakeqe.Options{}); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("fakeparavisor: platform %q", platform)
	}
	if err := p.provision(); err != nil {
		conn.Close()
		return nil, err
	}
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		conn.Close()
		return nil, err
	}
	p.TPMAddr = p.ln.Addr().String()
	go p.serveTPM()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.close()
		return nil, err
	}
	p.IMDS = "http://" + hl.Addr().String()
	p.http = &http.Server{Handler: http.HandlerFunc(p.serveIMDS)}
	go func() { _ = p.http.Serve(hl) }()
	return p, nil
}

func (p *paravisor) close() {
	if p.ln != nil {
		p.ln.Close()
	}
	if p.http != nil {
		p.http.Close()
	}
	p.up.conn.Close()
}

// provision creates the AK (RSA 2048, restricted, RSASSA-SHA256, like
// Azure's) at 0x81000003, defines the HCL report index and writes the first
// report (user data zero).
func (p *paravisor) provision() error {
	up := p.up
	up.mu.Lock()
	defer up.mu.Unlock()
	owner := tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(akTemplate()),
	}.Execute(up)
	if err != nil {
		return fmt.Errorf("fakeparavisor: create ak: %w", err)
	}
	if _, err := (tpm2.EvictControl{
		Auth:             owner,
		ObjectHandle:     &tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name},
		PersistentHandle: tpm2.TPMHandle(akHandle),
	}).Execute(up); err != nil {
		return fmt.Errorf("fakeparavisor: persist ak: %w", err)
	}
	_, _ = tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(up)
	if _, err := (tpm2.NVDefineSpace{
		AuthHandle: owner,
		PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
			NVIndex:    tpm2.TPMHandle(nvHCLReport),
			NameAlg:    tpm2.TPMAlgSHA256,
			Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthRead: true, NoDA: true, NT: tpm2.TPMNTOrdinary},
			DataSize:   hclNVSize,
		}),
	}).Execute(up); err != nil {
		return fmt.Errorf("fakeparavisor: define hcl report index: %w", err)
	}
	return p.regenerate([64]byte{})
}

func akTemplate() tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgRSA,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true,
			UserWithAuth: true, NoDA: true, Restricted: true, SignEncrypt: true,
		},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Scheme: tpm2.TPMTRSAScheme{
				Scheme:  tpm2.TPMAlgRSASSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256}),
			},
			KeyBits: 2048,
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: make([]byte, 256)}),
	}
}

// regenerate builds the HCL report for userData and writes it to NV. The
// caller holds up.mu.
func (p *paravisor) regenerate(userData [64]byte) error {
	ak, err := p.akPublic()
	if err != nil {
		return err
	}
	claims := hclreport.NewClaims(ak, userData)
	digest := sha256.Sum256(claims)
	r := &hclreport.Report{Version: 2, Claims: claims}
	switch p.platform {
	case evidence.PlatformAzureSNP:
		r.Type = 2 // SEV-SNP
		r.HW, err = p.snpReport(digest)
	default:
		r.Type = 4 // TDX
		r.HW = p.tdReport(digest)
	}
	if err != nil {
		return err
	}
	r.Padding = hclNVSize - len(r.Marshal())
	if r.Padding < 0 {
		return fmt.Errorf("fakeparavisor: hcl report exceeds %d bytes", hclNVSize)
	}
	b := r.Marshal()
	idx := tpm2.TPMHandle(nvHCLReport)
	pub, err := tpm2.NVReadPublic{NVIndex: idx}.Execute(p.up)
	if err != nil {
		return err
	}
	for off := 0; off < len(b); off += nvChunk {
		end := min(off+nvChunk, len(b))
		if _, err := (tpm2.NVWrite{
			AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
			NVIndex:    tpm2.NamedHandle{Handle: idx, Name: pub.NVName},
			Data:       tpm2.TPM2BMaxNVBuffer{Buffer: b[off:end]},
			Offset:     uint16(off),
		}).Execute(p.up); err != nil {
			return fmt.Errorf("fakeparavisor: write hcl report: %w", err)
		}
	}
	return nil
}

func (p *paravisor) akPublic() (*rsa.PublicKey, error) {
	rsp, err := tpm2.ReadPublic{ObjectHandle: tpm2.TPMHandle(akHandle)}.Execute(p.up)
	if err != nil {
		return nil, fmt.Errorf("fakeparavisor: read ak: %w", err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		return nil, err
	}
	n, err := pub.Unique.RSA()
	if err != nil {
		return nil, err
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n.Buffer), E: 65537}, nil
}

// snpReport is a simulated SEV-SNP report whose REPORT_DATA starts with
// digest (NewReportData puts its first argument in bytes 0..31; the rest,
// which the HCL leaves undefined, is a fixed identity binding).
func (p *paravisor) snpReport(digest [32]byte) ([]byte, error) {
	id := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	rd, err := evidence.NewReportData(digest, id, nil)
	if err != nil {
		return nil, err
	}
	ev, err := p.snp.Quote(context.Background(), rd)
	if err != nil {
		return nil, err
	}
	if p.vcek == nil {
		parsed, err := snpevidence.Parse(ev)
		if err != nil {
			return nil, err
		}
		p.vcek = parsed.Leaf.Raw
	}
	return ev.Blob, nil
}

// tdReport is a TDREPORT: REPORT_DATA (offset 128) digest and zeros, and
// TDINFO (offset 512) of the fake QE's TD; the MAC is not computed (only
// the fake metadata service reads it).
func (p *paravisor) tdReport(digest [32]byte) []byte {
	b := make([]byte, tdReportSize)
	copy(b[tdReportData:], digest[:])
	td := p.qe.TD()
	info := b[tdInfoOffset:]
	copy(info[0:], td.TDAttributes[:])
	copy(info[8:], td.XFAM[:])
	copy(info[16:], td.MRTD[:])
	copy(info[64:], td.MRConfigID[:])
	copy(info[112:], td.MROwner[:])
	copy(info[160:], td.MROwnerConfig[:])
	for i, r := range td.RTMR {
		copy(info[208+48*i:], r[:])
	}
	return b
}

// serveTPM accepts guest connections and proxies their commands.
func (p *paravisor) serveTPM() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.proxy(c)
	}
}

func (p *paravisor) proxy(c net.Conn) {
	defer c.Close()
	for {
		var hdr [tpmHeaderSize]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(hdr[2:6])
		if size < tpmHeaderSize || size > maxCommandSize {
			return
		}
		cmd := make([]byte, size)
		copy(cmd, hdr[:])
		if _, err := io.ReadFull(c, cmd[tpmHeaderSize:]); err != nil {
			return
		}
		rsp, err := p.forward(cmd)
		if err != nil {
			return
		}
		if _, err := c.Write(rsp); err != nil {
			return
		}
	}
}

// forward sends one guest command to swtpm; after a successful write to
// the user-data index it regenerates the HCL report before answering, as
// the paravisor does.
func (p *paravisor) forward(cmd []byte) ([]byte, error) {
	up := p.up
	up.mu.Lock()
	defer up.mu.Unlock()
	rsp, err := up.Send(cmd)
	if err != nil {
		return nil, err
	}
	isUserDataWrite := len(cmd) >= 18 && binary.BigEndian.Uint32(cmd[6:10]) == ccNVWrite &&
		binary.BigEndian.Uint32(cmd[14:18]) == nvUserData
	if !isUserDataWrite || len(rsp) < tpmHeaderSize || binary.BigEndian.Uint32(rsp[6:10]) != 0 {
		return rsp, nil
	}
	ud, err := p.readUserData()
	if err == nil {
		err = p.regenerate(ud)
	}
	if err != nil {
		return nil, err
	}
	p.Regenerations.Add(1)
	return rsp, nil
}

func (p *paravisor) readUserData() ([64]byte, error) {
	var ud [64]byte
	idx := tpm2.TPMHandle(nvUserData)
	pub, err := tpm2.NVReadPublic{NVIndex: idx}.Execute(p.up)
	if err != nil {
		return ud, err
	}
	rsp, err := tpm2.NVRead{
		AuthHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		NVIndex:    tpm2.NamedHandle{Handle: idx, Name: pub.NVName},
		Size:       64,
	}.Execute(p.up)
	if err != nil {
		return ud, err
	}
	copy(ud[:], rsp.Data.Buffer)
	return ud, nil
}

// serveIMDS is the fake metadata service: the VCEK (azure-snp) and TD
// quotes for TD reports (azure-tdx).
func (p *paravisor) serveIMDS(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata") != "true" {
		http.Error(w, "metadata header required", http.StatusBadRequest)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/metadata/THIM/amd/certification" && p.platform == evidence.PlatformAzureSNP:
		p.up.mu.Lock()
		vcek := p.vcek
		p.up.mu.Unlock()
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vcek})
		fmt.Fprintf(w, `{"vcekCert":%q,"tcbm":"","certificateChain":""}`, cert)
	case r.Method == http.MethodPost && r.URL.Path == "/acc/tdquote" && p.platform == evidence.PlatformAzureTDX:
		q, err := p.tdQuote(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"quote":%q}`, b64u.Encode(q))
	default:
		http.NotFound(w, r)
	}
}

func (p *paravisor) tdQuote(r *http.Request) ([]byte, error) {
	body, err := bounded.Read(r.Body, 16<<10, "td quote request")
	if err != nil {
		return nil, err
	}
	v, err := jsonobj.ParseObject(body, pohjson.ParseOptions{})
	if err != nil {
		return nil, err
	}
	s, _ := v.GetString("report")
	report, err := b64u.Decode(strings.TrimRight(s, "="))
	if err != nil || len(report) != tdReportSize {
		return nil, errors.New("report is not a base64url td report")
	}
	td := p.qe.TD()
	if string(report[tdInfoOffset+16:tdInfoOffset+64]) != string(td.MRTD[:]) {
		return nil, errors.New("td report is not from this td")
	}
	var rd [64]byte
	copy(rd[:], report[tdReportData:tdReportData+64])
	return p.qe.GetRawQuote(rd)
}

// upstream is the one connection to swtpm (it serves one client at a
// time); mu serializes guest commands and the paravisor's own.
type upstream struct {
	mu   sync.Mutex
	conn net.Conn
	transport.TPM
}
