package platform

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// Trustee's Azure vTPM evidence (confidential-containers/trustee,
// az-snp-vtpm and az-tdx-vtpm): JSON in the versions
// docs/spec/platform-azure.md, section 5, lists.

// maxTrusteeEvidence bounds Trustee JSON evidence (version 0 writes bytes
// as arrays of numbers: about five times the binary size).
const maxTrusteeEvidence = 256 << 10

// Trustee formats, as packctl platform verify --format names them.
const (
	trusteeAzureSNP = "az-snp-vtpm"
	trusteeAzureTDX = "az-tdx-vtpm"
)

// verifyTrusteeAzure verifies Trustee's Azure vTPM evidence (format
// trusteeAzureSNP or trusteeAzureTDX) offline. With a nonce the TPM
// quote's qualifying data must equal it and, from version 2 on, the
// runtime claims' user data must be it zero-padded to 64 bytes; without
// one (nil) neither is compared. Errors are as Verify's.
func verifyTrusteeAzure(format string, data, nonce []byte, opts Options) (*Result, error) {
	if opts.Now == nil {
		return nil, badOptions("options: Now is required")
	}
	if len(nonce) > userDataSize {
		return nil, badOptions("nonce is %d bytes, limit %d", len(nonce), userDataSize)
	}
	var in *azureInput
	var version int
	err := guard(checkParse, func() error {
		var err error
		in, version, err = parseTrustee(format, data)
		return err
	})
	if err != nil {
		return nil, err
	}
	want := azureWant{nonce: nonce}
	if nonce != nil && version >= 2 {
		var ud [userDataSize]byte
		copy(ud[:], nonce)
		want.userData = &ud
	}
	var res *Result
	err = guard(checkParse, func() error {
		var err error
		res, err = verifyAzure(in, want, opts.Now(), &opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Azure.TrusteeVersion = version
	return res, nil
}

// parseTrustee reads the evidence strictly: every member known, none
// missing, bytes in the encoding of the version.
func parseTrustee(format string, data []byte) (*azureInput, int, error) {
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxTrusteeEvidence})
	if err != nil {
		return nil, 0, rejected(checkParse, err)
	}
	var r jsonobj.Reader
	in := &azureInput{}
	version := 0
	switch format {
	case trusteeAzureSNP:
		in.platform = evidence.PlatformAzureSNP
		if root.Has("version") {
			version = int(r.Int(root.Get("version"), "$.version", 0, 1<<31-1))
			if r.Err() == nil && version != 1 && version != 2 {
				return nil, 0, cannotCheck(checkFormat, fmt.Errorf("%w: %s evidence version %d", errUnsupported, format, version))
			}
			m := r.Object(root, jsonobj.Root, map[string]bool{"version": true, "tpm_quote": true, "hcl_report": true, "vcek": true})
			trusteeQuote(&r, m["tpm_quote"], "$.tpm_quote", in, hexField)
			in.hcl = b64Field(&r, m["hcl_report"], "$.hcl_report")
			in.vcek = b64Field(&r, m["vcek"], "$.vcek")
		} else {
			m := r.Object(root, jsonobj.Root, map[string]bool{"quote": true, "report": true, "vcek": true})
			trusteeQuote(&r, m["quote"], "$.quote", in, byteArray)
			in.hcl = byteArray(&r, m["report"], "$.report")
			in.vcek = pemCert(&r, m["vcek"], "$.vcek")
		}
	case trusteeAzureTDX:
		in.platform = evidence.PlatformAzureTDX
		m := r.Object(root, jsonobj.Root, map[string]bool{"tpm_quote": true, "hcl_report": true, "td_quote": true})
		trusteeQuote(&r, m["tpm_quote"], "$.tpm_quote", in, byteArray)
		in.hcl = byteArray(&r, m["hcl_report"], "$.hcl_report")
		in.tdQuote = byteArray(&r, m["td_quote"], "$.td_quote")
	default:
		return nil, 0, cannotCheck(checkFormat, fmt.Errorf("%w: trustee format", errUnsupported))
	}
	if err := r.Err(); err != nil {
		return nil, 0, rejected(checkParse, err)
	}
	return in, version, nil
}

type bytesField func(r *jsonobj.Reader, v *pohjson.Value, path string) []byte

// trusteeQuote reads {signature, message, pcrs[24]}: the PCR values of
// the quoted selection are kept, in index order.
func trusteeQuote(r *jsonobj.Reader, v *pohjson.Value, path string, in *azureInput, field bytesField) {
	m := r.Object(v, path, map[string]bool{"signature": true, "message": true, "pcrs": true})
	in.sig = field(r, m["signature"], jsonobj.Key(path, "signature"))
	in.attest = field(r, m["message"], jsonobj.Key(path, "message"))
	pcrs := r.Array(m["pcrs"], jsonobj.Key(path, "pcrs"), tpmquote.NumPCRs, tpmquote.NumPCRs)
	if r.Err() != nil {
		return
	}
	all := make([][]byte, len(pcrs))
	for i, p := range pcrs {
		pp := jsonobj.Index(jsonobj.Key(path, "pcrs"), i)
		if all[i] = field(r, p, pp); r.Err() == nil && len(all[i]) != 32 {
			r.Failf(pp, jsonobj.ErrWrongType, "pcr value is %d bytes, want 32", len(all[i]))
		}
	}
	if r.Err() != nil {
		return
	}
	// The selection is the signed quote's; unselected values are dropped.
	att, err := tpmquote.ParseAttest(in.attest)
	if err != nil {
		return // verifyAzureQuote reports it after the signature check
	}
	for _, i := range att.PCRs {
		var p tpmquote.PCR
		p.Index = i
		copy(p.Value[:], all[i])
		in.pcrs = append(in.pcrs, p)
	}
}

func hexField(r *jsonobj.Reader, v *pohjson.Value, path string) []byte {
	s, ok := r.Str(v, path)
	if !ok {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		r.Failf(path, jsonobj.ErrWrongType, "not hex")
	}
	return b
}

// b64Field reads padded base64url (serde_with's Base64<UrlSafe>).
func b64Field(r *jsonobj.Reader, v *pohjson.Value, path string) []byte {
	s, ok := r.Str(v, path)
	if !ok {
		return nil
	}
	b, err := base64.URLEncoding.Strict().DecodeString(s)
	if err != nil {
		r.Failf(path, jsonobj.ErrWrongType, "not padded base64url")
	}
	return b
}

// byteArray reads an array of numbers 0..255 (serde's Vec<u8>).
func byteArray(r *jsonobj.Reader, v *pohjson.Value, path string) []byte {
	es := r.Array(v, path, 0, maxTrusteeEvidence)
	out := make([]byte, 0, len(es))
	for i, e := range es {
		out = append(out, byte(r.Int(e, jsonobj.Index(path, i), 0, 255)))
	}
	return out
}

// pemCert reads a string holding exactly one PEM CERTIFICATE.
func pemCert(r *jsonobj.Reader, v *pohjson.Value, path string) []byte {
	s, ok := r.Str(v, path)
	if !ok {
		return nil
	}
	der, ok := onePEMCert([]byte(s))
	if !ok {
		r.Failf(path, jsonobj.ErrWrongType, "not one pem certificate")
	}
	return der
}
