// Package hclreport parses and builds the HCL report of an Azure
// confidential VM (docs/spec/platform-azure.md): the report the paravisor
// (HCL) writes into the vTPM's NV index 0x01400001, holding the hardware
// report (an SEV-SNP ATTESTATION_REPORT or a TDX TDREPORT) and the runtime
// claims, a JSON document whose SHA-256 is the first 32 bytes of the
// hardware report's REPORT_DATA.
//
// It is pure: the producer's fake paravisor builds reports with it and the
// verifier parses them with it. It checks structure only; signatures and
// the REPORT_DATA binding are the verifier's.
package hclreport

import (
	"bytes"
	"crypto/rsa"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxquote"
)

// Layout (little-endian): a 32-byte header, the hardware report area, the
// 20-byte IGVM request data header, the runtime claims, zero padding.
const (
	signature      = 0x414c4348 // "HCLA"
	headerSize     = 32
	hwAreaSize     = 1184 // the larger of the SNP report and the TD report
	igvmHeaderSize = 20
	claimsOffset   = headerSize + hwAreaSize + igvmHeaderSize
	requestType    = 2 // the only request type seen: a hardware report
	igvmVersion    = 1
	hashSHA256     = 1

	// snpReportSize and tdReportSize are the hardware report sizes.
	snpReportSize = 1184
	tdReportSize  = 1024
)

// maxReportSize bounds a whole HCL report (the NV index is 2600 bytes on
// Azure; a margin for other sizes).
const maxReportSize = 8 << 10

// Format is Evidence.Format for Azure confidential-VM evidence: Blob is the
// vTPM quote's TPMS_ATTEST, Signature the attestation key's raw
// RSASSA-PKCS1-v1_5 SHA-256 signature over it, CertChain the VCEK (SEV-SNP,
// DER), Aux AuxReport, "pcr_values" and, for TDX, AuxTDQuote.
const Format = "azure/hcl-vtpm-v1"

// Evidence.Aux names of Azure evidence.
const (
	AuxReport  = "hcl_report"
	AuxTDQuote = "td_quote"
)

// Report types (IGVM request data report_type).
const (
	typeSNP = 2
	typeTDX = 4
)

// akKeyID is the JWK key id of the vTPM attestation key in the claims.
const akKeyID = "HCLAkPub"

// userDataSize is the size of the user data the guest writes to NV index
// 0x01400002 and the claims carry as hex.
const userDataSize = 64

// errMalformed is wrapped by every parse error.
var errMalformed = errors.New("hclreport: malformed hcl report")

// Report is a parsed HCL report. Marshal re-encodes it to the exact bytes
// it was parsed from.
type Report struct {
	// Version is the header version (1 or 2).
	Version uint32
	// Type is the report type: 2 (SEV-SNP) or 4 (TDX).
	Type uint32
	// HW is the hardware report: SNPReportSize or TDReportSize bytes.
	HW []byte
	// Claims are the runtime claims bytes, exactly as carried.
	Claims []byte
	// Padding is the number of zero bytes after the claims.
	Padding int
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// Parse parses an HCL report. It refuses a header other than "HCLA" version
// 1 or 2 with a hardware-report request and status 0, a report type other
// than SNP or TDX, a claims hash other than SHA-256, sizes that disagree,
// and any non-zero byte outside the hardware report and the claims. On
// error it returns nil.
func Parse(b []byte) (*Report, error) {
	if len(b) > maxReportSize {
		return nil, malformed("%d bytes, limit %d", len(b), maxReportSize)
	}
	if len(b) < claimsOffset {
		return nil, malformed("%d bytes, shorter than the headers", len(b))
	}
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	if u32(0) != signature {
		return nil, malformed("signature %08x is not HCLA", u32(0))
	}
	r := &Report{Version: u32(4), Type: u32(headerSize + hwAreaSize + 8)}
	if r.Version != 1 && r.Version != 2 {
		return nil, malformed("unknown version %d", r.Version)
	}
	if u32(12) != requestType || u32(16) != 0 || !allZero(b[20:32]) {
		return nil, malformed("request type %d status %d", u32(12), u32(16))
	}
	igvm := headerSize + hwAreaSize
	dataSize, claimsSize := uint64(u32(igvm)), uint64(u32(igvm+16))
	if u32(igvm+4) != igvmVersion || u32(igvm+12) != hashSHA256 {
		return nil, malformed("request data version %d hash type %d", u32(igvm+4), u32(igvm+12))
	}
	if dataSize != igvmHeaderSize+claimsSize || uint64(u32(8)) != headerSize+hwAreaSize+dataSize {
		return nil, malformed("sizes disagree (report %d, data %d, claims %d)", u32(8), dataSize, claimsSize)
	}
	if claimsSize > uint64(len(b)-claimsOffset) {
		return nil, malformed("claims of %d bytes exceed the %d bytes present", claimsSize, len(b)-claimsOffset)
	}
	var hwSize int
	switch r.Type {
	case typeSNP:
		hwSize = snpReportSize
	case typeTDX:
		hwSize = tdReportSize
	default:
		return nil, malformed("unknown report type %d", r.Type)
	}
	if !allZero(b[headerSize+hwSize : igvm]) {
		return nil, malformed("bytes after the hardware report are not zero")
	}
	end := claimsOffset + int(claimsSize)
	if !allZero(b[end:]) {
		return nil, malformed("bytes after the claims are not zero")
	}
	r.HW = bytes.Clone(b[headerSize : headerSize+hwSize])
	r.Claims = bytes.Clone(b[claimsOffset:end])
	r.Padding = len(b) - end
	return r, nil
}

// Platform is the evidence platform of the report type:
// evidence.PlatformAzureSNP or evidence.PlatformAzureTDX.
func (r *Report) Platform() string {
	if r.Type == typeTDX {
		return evidence.PlatformAzureTDX
	}
	return evidence.PlatformAzureSNP
}

// Marshal encodes r.
func (r *Report) Marshal() []byte {
	b := make([]byte, claimsOffset+len(r.Claims)+r.Padding)
	put := func(off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
	dataSize := uint32(igvmHeaderSize + len(r.Claims))
	put(0, signature)
	put(4, r.Version)
	put(8, headerSize+hwAreaSize+dataSize)
	put(12, requestType)
	copy(b[headerSize:], r.HW)
	igvm := headerSize + hwAreaSize
	put(igvm, dataSize)
	put(igvm+4, igvmVersion)
	put(igvm+8, r.Type)
	put(igvm+12, hashSHA256)
	put(igvm+16, uint32(len(r.Claims)))
	copy(b[claimsOffset:], r.Claims)
	return b
}

// Hardware returns the hardware evidence an Azure HCL report stands on, as
// evidence of platform sev-snp (r's SEV-SNP report with vcek, the VCEK DER)
// or tdx (tdQuote, the TD quote for r's TD report, with the PCK chain it
// carries; zero bytes after its framing are dropped, any other trailing
// byte is refused). Errors wrap snpevidence's and tdxquote's.
func (r *Report) Hardware(simulated bool, vcek, tdQuote []byte) (*evidence.Evidence, error) {
	if r.Type == typeSNP {
		return snpevidence.Build(r.HW, nil, vcek, simulated)
	}
	n, err := tdxquote.Length(tdQuote)
	if err != nil {
		return nil, err
	}
	if !allZero(tdQuote[n:]) {
		return nil, malformed("non-zero bytes after the td quote")
	}
	q, err := tdxquote.ParseEvidence(tdQuote[:n])
	if err != nil {
		return nil, err
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, err
	}
	return &evidence.Evidence{Platform: evidence.PlatformTDX, Format: tdxquote.Format, Simulated: simulated,
		Blob: bytes.Clone(tdQuote[:n]), CertChain: chain}, nil
}

// runtimeClaims are the runtime claims this project reads (ParseClaims
// returns them). Other members (the VM configuration, the EK) are not
// interpreted.
type runtimeClaims struct {
	// AK is the vTPM attestation key (JWK with kid HCLAkPub, kty RSA).
	AK *rsa.PublicKey
	// UserData is the 64 bytes the guest last wrote to NV index
	// 0x01400002 (hex in the claims).
	UserData [userDataSize]byte
}

// Limits on the claims.
const (
	maxKeys     = 16
	maxRSABits  = 4096
	minRSABits  = 2048
	maxClaimLen = maxReportSize
)

// ParseClaims reads the runtime claims strictly (RFC 8259, no duplicate
// keys): exactly one key with kid HCLAkPub, an RSA key of 2048 to 4096 bits
// with exponent 65537 or another odd exponent below 2^31, and user-data of
// exactly 128 hex digits.
func ParseClaims(b []byte) (*runtimeClaims, error) {
	root, err := jsonobj.ParseObject(b, pohjson.ParseOptions{MaxBytes: maxClaimLen})
	if err != nil {
		return nil, fmt.Errorf("%w: claims: %w", errMalformed, err)
	}
	var rd jsonobj.Reader
	keys := rd.Array(root.Get("keys"), "$.keys", 1, maxKeys)
	var ak *pohjson.Value
	for i, k := range keys {
		p := jsonobj.Index("$.keys", i)
		if k.Kind() != pohjson.Object {
			rd.Failf(p, jsonobj.ErrWrongType, "not an object")
			continue
		}
		if kid, _ := k.GetString("kid"); kid == akKeyID {
			if ak != nil {
				rd.Failf(p, jsonobj.ErrWrongType, "a second %s key", akKeyID)
			}
			ak = k
		}
	}
	ud, _ := rd.Str(root.Get("user-data"), "$.user-data")
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", errMalformed, err)
	}
	if ak == nil {
		return nil, malformed("claims carry no %s key", akKeyID)
	}
	c := &runtimeClaims{}
	if c.AK, err = rsaJWK(ak); err != nil {
		return nil, err
	}
	if len(ud) != 2*userDataSize {
		return nil, malformed("user-data is %d hex digits, want %d", len(ud), 2*userDataSize)
	}
	if _, err := hex.Decode(c.UserData[:], []byte(ud)); err != nil {
		return nil, malformed("user-data is not hex")
	}
	return c, nil
}

func rsaJWK(k *pohjson.Value) (*rsa.PublicKey, error) {
	var rd jsonobj.Reader
	kty, _ := rd.Str(k.Get("kty"), "$.kty")
	n := rd.B64u(k.Get("n"), "$.n", 0)
	e := rd.B64u(k.Get("e"), "$.e", 0)
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s key: %w", errMalformed, akKeyID, err)
	}
	if kty != "RSA" {
		return nil, malformed("%s key type %q is not RSA", akKeyID, safetext.Clip(kty, 16))
	}
	if len(n) == 0 || n[0] == 0 || len(n)*8 < minRSABits || len(n)*8 > maxRSABits {
		return nil, malformed("%s modulus of %d bytes", akKeyID, len(n))
	}
	if len(e) == 0 || len(e) > 4 || e[0] == 0 {
		return nil, malformed("%s exponent of %d bytes", akKeyID, len(e))
	}
	ev := new(big.Int).SetBytes(e)
	if !ev.IsInt64() || ev.Int64() < 3 || ev.Int64() >= 1<<31 || ev.Bit(0) == 0 {
		return nil, malformed("%s exponent is not an odd value from 3 to 2^31-1", akKeyID)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(ev.Int64())}, nil
}

// NewClaims encodes runtime claims carrying ak as the HCLAkPub key and
// userData, in the form the paravisor writes (used by the fake paravisor).
func NewClaims(ak *rsa.PublicKey, userData [userDataSize]byte) []byte {
	e := big.NewInt(int64(ak.E)).Bytes()
	return fmt.Appendf(nil, `{"keys":[{"kid":%q,"key_ops":["sign"],"kty":"RSA","e":%q,"n":%q}],"vm-configuration":{"console-enabled":false,"secure-boot":true,"tpm-enabled":true},"user-data":%q}`,
		akKeyID, b64u.Encode(e), b64u.Encode(ak.N.Bytes()), fmt.Sprintf("%X", userData[:]))
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
