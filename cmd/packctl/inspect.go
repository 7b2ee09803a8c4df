package main

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-tdx-guest/pcs"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/teeclaims"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

const inspectSynopsis = "inspect [--json] FILE\n\n" +
	"Recognises FILE by its content and shows what it says: an attester identity\n" +
	"(GET /v1/identity) or key attestation, an evidence document (compact JWS), an\n" +
	"execution attestation or other PoH envelope, a sealed-pack manifest or envelope,\n" +
	"a plaintext pack (hash-only: nothing secret is shown), a SystemPromptReport, a\n" +
	"disclosure (selectors and sizes only) or a TPM AK certification record.\n" +
	"For evidence it shows the platform, measurement, TCB versions, chip id or PCK\n" +
	"identity, TPM AK Name and PCR digest, and the simulated marking.\n\n" +
	"UNVERIFIED: inspect parses and shows; it decides nothing. Use packctl verify,\n" +
	"packctl policy init or packctl tpm check to verify."

// inspectNotice is printed with every inspection.
const inspectNotice = "UNVERIFIED: parsed and shown only; nothing here is trusted until packctl verify (or policy init, tpm check) checks it"

// inspectView is the hash-only view of a sealed-pack manifest or envelope.
type inspectView struct {
	Kind            string   `json:"kind"`
	Verified        bool     `json:"verified"`
	Notice          string   `json:"notice"`
	Format          string   `json:"format"`
	PackID          string   `json:"pack_id"`
	ReportHashB64u  string   `json:"report_hash_b64u"`
	CiphertextSize  int64    `json:"ciphertext_size,omitempty"`
	CiphertextHash  string   `json:"ciphertext_hash_b64u,omitempty"`
	PlaintextSize   int      `json:"plaintext_size,omitempty"`
	RecipientKeyIDs []string `json:"recipient_key_ids_b64u"`
}

func runInspect(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", inspectSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 1, "FILE") {
		return exitUsage
	}
	raw, err := readArgOrStdin(fs.Arg(0), maxInputBytes+(64<<10))
	if err != nil {
		return fail(stderr, "inspect", exitCannot, err)
	}
	kind := sniff(raw)
	switch kind {
	case kindEnvelope, kindManifest:
		return inspectSealed(raw, kind, fs.Arg(0), *asJSON, stdout, stderr)
	case kindUnknown:
		errorf(stderr, "inspect: %s: not a document packctl knows (identity, key attestation, evidence document, attestation, manifest, envelope, pack, report, disclosure, TPM certification record, event log, verify or admission policy, audit log, EAR, attester configuration)", fs.Arg(0))
		return exitRejected
	}
	v, err := inspectDocument(raw, kind)
	code := exitOK
	if err != nil && kind == kindEvidenceDocument {
		// A broken evidence document is still shown, marked as such, and
		// inspect exits 2.
		if v, err = brokenJWSValue(raw, kind, err); err == nil {
			code = exitRejected
		}
	}
	if err != nil {
		errorf(stderr, "inspect: %s: %s: %v", fs.Arg(0), kind, err)
		return exitRejected
	}
	if *asJSON {
		b, err := pohjson.Stringify(v)
		if err != nil {
			return fail(stderr, "inspect", exitRejected, err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return code
	}
	flatten(stdout, "", v)
	return code
}

// Kinds of files inspect (and the swapped-input checks) recognise.
const (
	kindUnknown          = "unknown"
	kindEnvelope         = "envelope"
	kindManifest         = "manifest"
	kindIdentity         = "identity"
	kindEvidenceDocument = "evidence-document"
	kindAttestation      = "execution-attestation"
	kindPoHEnvelope      = "poh-envelope"
	kindPack             = "pack"
	kindReport           = "report"
	kindDisclosure       = "disclosure"
	kindTPMCert          = "tpm-certification"
	kindPolicy           = "verify-policy"
	kindEventLog         = "event-log"
)

// sniff recognises a file by its content (never by its name). It parses
// only as far as needed to tell the kinds apart; the inspector of the kind
// then parses strictly.
func sniff(raw []byte) string {
	if bytes.HasPrefix(raw, []byte(tpmcred.CertificationLabel+"\x00")) {
		return kindTPMCert
	}
	// A TCG event log's first event (32 bytes of header) is the Spec ID
	// event.
	if len(raw) > 48 && string(raw[32:48]) == "Spec ID Event03\x00" {
		return kindEventLog
	}
	if bytes.HasPrefix(raw, []byte(envelope.FormatVersion+"\n")) {
		return kindEnvelope
	}
	trimmed := bytes.TrimSpace(raw)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		root, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 64})
		if err != nil {
			if k := sniffMore(raw, nil); k != "" {
				return k
			}
			return kindUnknown
		}
		if k := sniffMore(raw, root); k != "" {
			return k
		}
		switch {
		case root.Has("key_attestation") && root.Has("did"):
			return kindIdentity
		case root.Has("envelope_type"):
			if t, _ := root.GetString("envelope_type"); t == "execution_attestation" {
				return kindAttestation
			}
			return kindPoHEnvelope
		case root.Has("pack_version"):
			return kindPack
		case root.Has("report_version"):
			return kindReport
		case root.Has("disclosure_version"):
			return kindDisclosure
		case root.Has("policy_version"):
			return kindPolicy
		case root.Has("ciphertext_hash_b64u") && root.Has("recipient_key_ids_b64u"):
			return kindManifest
		}
		return kindUnknown
	}
	if k := sniffMore(raw, nil); k != "" {
		return k
	}
	if looksLikeJWS(trimmed) {
		return kindEvidenceDocument
	}
	return kindUnknown
}

// looksLikeJWS reports whether b has the shape of a compact JWS: three
// non-empty base64url segments.
var b64uChars = charclass.Alnum().Or(charclass.Of("-_"))

func looksLikeJWS(b []byte) bool {
	parts := bytes.Split(b, []byte("."))
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if len(p) == 0 {
			return false
		}
		if !b64uChars.All(string(p)) {
			return false
		}
	}
	return true
}

func inspectSealed(raw []byte, kind, name string, asJSON bool, stdout, stderr io.Writer) int {
	v := inspectView{Kind: kind, Notice: inspectNotice}
	// An envelope is shown as the manifest that describes it.
	var m *envelope.Manifest
	var err error
	if kind == kindEnvelope {
		m, v.PlaintextSize, err = envelope.Describe(raw)
	} else {
		m, err = envelope.ParseManifest(raw)
	}
	if err != nil {
		errorf(stderr, "inspect: %s: %v", name, err)
		return exitRejected
	}
	v.Format, v.PackID = m.Format, m.PackID
	v.ReportHashB64u, v.CiphertextSize = b64u.Encode(m.ReportHash[:]), m.CiphertextSize
	v.CiphertextHash = b64u.Encode(m.CiphertextHash[:])
	for _, id := range m.RecipientKeyIDs {
		v.RecipientKeyIDs = append(v.RecipientKeyIDs, id.String())
	}
	if asJSON {
		b, _ := json.Marshal(v)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "kind: %s\nverified: false\nnotice: %s\nformat: %s\npack_id: %s\nreport_hash_b64u: %s\nciphertext_size: %d\nciphertext_hash_b64u: %s\n",
		v.Kind, v.Notice, v.Format, v.PackID, v.ReportHashB64u, v.CiphertextSize, v.CiphertextHash)
	if v.PlaintextSize > 0 {
		fmt.Fprintf(stdout, "plaintext_size: %d\n", v.PlaintextSize)
	}
	for _, id := range v.RecipientKeyIDs {
		fmt.Fprintf(stdout, "recipient_key_id_b64u: %s\n", id)
	}
	return exitOK
}

// obj builds an ordered JSON object.
type obj struct{ ms []pohjson.Member }

func (o *obj) str(k, v string) {
	if v != "" {
		o.ms = append(o.ms, pohjson.M(k, pohjson.NewString(v)))
	}
}
func (o *obj) boolean(k string, b bool) { o.ms = append(o.ms, pohjson.M(k, pohjson.NewBool(b))) }
func (o *obj) num(k string, n int64)    { o.ms = append(o.ms, pohjson.M(k, pohjson.NewInt(n))) }
func (o *obj) val(k string, v *pohjson.Value) {
	if v != nil {
		o.ms = append(o.ms, pohjson.M(k, v))
	}
}
func (o *obj) value() *pohjson.Value { return pohjson.NewObject(o.ms...) }

func header(kind string) *obj {
	o := &obj{}
	o.str("kind", kind)
	o.boolean("verified", false)
	o.str("notice", inspectNotice)
	return o
}

// inspectDocument shows a document of a kind sniff recognised.
func inspectDocument(raw []byte, kind string) (*pohjson.Value, error) {
	o := header(kind)
	switch kind {
	case kindEventLog:
		bc, err := replayAny(raw, "")
		if err != nil {
			return nil, err
		}
		o.val("event_log", bootValue(bc))
		o.str("check_with", "packctl verify (replays the log carried in evidence against the registers the hardware signed)")
	case kindTPMCert:
		c, err := tpmcred.ParseCertification(raw)
		if err != nil {
			return nil, err
		}
		o.str("check_with", "packctl tpm check --ek-roots FILE (the EK chain is not checked here)")
		if ak, err := tpmquote.ParsePublic(c.AKPublic); err == nil {
			o.str("ak_name_hex", hex.EncodeToString(ak.Name()))
		}
		if ek, err := x509.ParseCertificate(c.EKCert); err == nil {
			o.val("ek_certificate", certValue(ek))
		}
		o.num("ek_intermediates", int64(len(c.EKIntermediates)))
		o.str("activated_at", c.ActivatedAt.UTC().Format(time.RFC3339))
		o.str("activated_by", c.ActivatedBy)
	case kindEvidenceDocument:
		v, err := evidenceDocValue(bytes.TrimSpace(raw))
		if err != nil {
			return nil, err
		}
		o.val("evidence_document", v)
	case kindIdentity:
		id, err := parseIdentity(raw)
		if err != nil {
			return nil, fmt.Errorf("malformed identity document: %w", err)
		}
		o.str("did", id.DID)
		o.str("platform", id.Platform)
		o.boolean("simulated", id.Simulated)
		o.boolean("identity_sealed", id.IdentitySealed)
		o.str("pack_public_key", id.PackPublicKey)
		v, err := evidenceDocValue([]byte(id.KeyAttestation))
		if err != nil {
			return nil, fmt.Errorf("key_attestation: %w", err)
		}
		o.val("key_attestation", v)
	case kindAttestation, kindPoHEnvelope, kindReport, kindPolicy:
		// Public documents: shown as they are, in their member order.
		root, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 64})
		if err != nil {
			return nil, err
		}
		o.val("document", root)
	case kindPack:
		// A plaintext pack is secret: only its version and the names and
		// sizes of its members are shown.
		root, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 64})
		if err != nil {
			return nil, err
		}
		v, _ := root.GetString("pack_version")
		o.str("pack_version", v)
		o.str("contents", "not shown: a plaintext pack is secret (packctl report shows its hash-only report)")
		sizes := &obj{}
		for _, m := range root.Members() {
			b, err := pohjson.Stringify(m.Value)
			if err != nil {
				return nil, err
			}
			sizes.num(m.Key, int64(len(b)))
		}
		o.val("member_bytes", sizes.value())
	case kindDisclosure:
		reportHash, revealed, err := promptpack.DescribeDisclosure(raw)
		if err != nil {
			return nil, err
		}
		o.str("report_hash_b64u", b64u.Encode(reportHash[:]))
		o.str("contents", "not shown: a disclosure reveals inputs (packctl verify-disclosure checks it)")
		var ins []*pohjson.Value
		for _, in := range revealed {
			iv := &obj{}
			iv.str("selector", in.Selector)
			iv.num("content_bytes", int64(in.ContentBytes))
			ins = append(ins, iv.value())
		}
		o.val("revealed", pohjson.NewArray(ins...))
	case kindAdmission, kindAuditLog, kindEAR, kindConfig:
		return inspectMore(raw, kind)
	default:
		return nil, fmt.Errorf("unsupported kind %q", kind)
	}
	return o.value(), nil
}

// evidenceDocValue parses an evidence document. Its JWS signature is
// checked against the key its own kid names: that shows the document is
// intact and who signed it, not that the signer is trusted.
func evidenceDocValue(jws []byte) (*pohjson.Value, error) {
	key, err := evidencedoc.SignerKey(jws)
	if err != nil {
		return nil, err
	}
	doc, err := evidencedoc.Parse(jws, key)
	if err != nil {
		return nil, err
	}
	o := &obj{}
	o.str("document_kind", doc.Kind)
	o.str("attester_did", doc.AttesterDID)
	o.str("signature", "valid for the key the kid names (self-signed: not a trust decision)")
	o.str("issued_at", doc.IssuedAt.UTC().Format(time.RFC3339Nano))
	o.boolean("simulated", doc.Simulated())
	o.str("nonce_b64u", b64u.Encode(doc.Nonce[:]))
	if k := doc.Key; k != nil {
		o.str("challenge_b64u", k.ChallengeB64u)
		o.str("recipient_x25519_b64u", k.RecipientX25519B64u)
	}
	if e := doc.Execution; e != nil {
		o.str("attestation_id", e.AttestationID)
		o.str("agent_did", e.AgentDID)
		o.str("run_id", e.RunID)
		o.str("proof_bundle_hash_b64u", e.ProofBundleHashB64u)
		if c, err := pohjson.FromGo(e.Clawea); err == nil {
			o.val("clawea", c)
		}
	}
	var items []*pohjson.Value
	for _, it := range doc.Items {
		items = append(items, itemValue(it))
	}
	o.val("evidence", pohjson.NewArray(items...))
	return o.value(), nil
}

func itemValue(it evidencedoc.Item) *pohjson.Value {
	ev := it.Evidence
	o := &obj{}
	o.str("platform", ev.Platform)
	o.str("format", ev.Format)
	o.boolean("simulated", ev.Simulated)
	switch c, err := teeclaims.Derive(ev); {
	case ev.Platform == evidence.PlatformNVIDIAGPU:
		// GPU evidence has no TEE claims: it sits beside the CPU's.
	case err == nil:
		o.str("attestation_type", c.AttestationType)
		o.str("root_id", c.RootID)
		o.str("tcb_version", c.TCBVersion)
		o.str("measurement_b64u", b64u.Encode(c.Measurement))
		o.str("measurement_hex", hex.EncodeToString(c.Measurement))
	default:
		o.str("claims_error", err.Error())
	}
	switch ev.Platform {
	case evidence.PlatformSEVSNP:
		o.val("sev_snp", sevValue(ev))
	case evidence.PlatformTDX:
		o.val("tdx", tdxValue(ev))
		if log, ok := ev.Aux["event_log"]; ok {
			o.val("event_log", eventLogValue(log, "ccel"))
		}
	case evidence.PlatformTPM:
		o.val("tpm", tpmValue(ev))
		if log, ok := ev.Aux["event_log"]; ok {
			o.val("event_log", eventLogValue(log, "tpm"))
		}
	case evidence.PlatformNVIDIAGPU:
		o.val("nvidia_gpu", gpuValue(ev))
	case evidence.PlatformAzureSNP, evidence.PlatformAzureTDX:
		o.val("azure", azureValue(ev))
	}
	var names []*pohjson.Value
	for n := range it.Collateral {
		names = append(names, pohjson.NewString(n))
	}
	if len(names) > 0 {
		sortValues(names)
		o.val("collateral", pohjson.NewArray(names...))
	}
	return o.value()
}

func sortValues(vs []*pohjson.Value) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0; j-- {
			a, _ := vs[j-1].Str()
			b, _ := vs[j].Str()
			if a <= b {
				break
			}
			vs[j-1], vs[j] = vs[j], vs[j-1]
		}
	}
}

func errValue(err error) *pohjson.Value {
	o := &obj{}
	o.str("error", err.Error())
	return o.value()
}

func tcbValue(v uint64) *pohjson.Value {
	p := kds.DecomposeTCBVersion(kds.TCBVersion(v))
	o := &obj{}
	o.str("hex", fmt.Sprintf("%016x", v))
	o.num("bl_spl", int64(p.BlSpl))
	o.num("tee_spl", int64(p.TeeSpl))
	o.num("snp_spl", int64(p.SnpSpl))
	o.num("ucode_spl", int64(p.UcodeSpl))
	return o.value()
}

func sevValue(ev *evidence.Evidence) *pohjson.Value {
	p, err := snpevidence.Parse(ev)
	if err != nil {
		return errValue(err)
	}
	r, err := abi.ReportToProto(p.Report)
	if err != nil {
		return errValue(err)
	}
	o := &obj{}
	o.num("report_version", int64(r.GetVersion()))
	o.str("signer", p.Signer.String())
	o.str("chip_id_hex", hex.EncodeToString(r.GetChipId()))
	o.val("reported_tcb", tcbValue(r.GetReportedTcb()))
	o.val("current_tcb", tcbValue(r.GetCurrentTcb()))
	o.val("committed_tcb", tcbValue(r.GetCommittedTcb()))
	o.val("launch_tcb", tcbValue(r.GetLaunchTcb()))
	o.str("guest_policy_hex", fmt.Sprintf("%016x", r.GetPolicy()))
	if pol, err := abi.ParseSnpPolicy(r.GetPolicy()); err == nil {
		o.boolean("debug", pol.Debug)
		o.boolean("migrate_ma", pol.MigrateMA)
	}
	o.num("vmpl", int64(r.GetVmpl()))
	o.num("guest_svn", int64(r.GetGuestSvn()))
	o.str("host_data_hex", hex.EncodeToString(r.GetHostData()))
	o.str("report_data_hex", hex.EncodeToString(r.GetReportData()))
	if p.Leaf != nil {
		o.val("endorsement_certificate", certValue(p.Leaf))
	}
	return o.value()
}

func tdxValue(ev *evidence.Evidence) *pohjson.Value {
	q, err := tdxquote.Parse(ev.Blob)
	if err != nil {
		return errValue(err)
	}
	b := &q.Body
	o := &obj{}
	o.str("tee_tcb_svn_hex", hex.EncodeToString(b.TeeTcbSvn[:]))
	o.str("mrtd_hex", hex.EncodeToString(b.MRTD[:]))
	for i := range b.RTMR {
		o.str("rtmr"+strconv.Itoa(i)+"_hex", hex.EncodeToString(b.RTMR[i][:]))
	}
	o.str("mr_config_id_hex", hex.EncodeToString(b.MRConfigID[:]))
	o.str("mr_owner_hex", hex.EncodeToString(b.MROwner[:]))
	o.str("mr_owner_config_hex", hex.EncodeToString(b.MROwnerConfig[:]))
	o.str("mr_seam_hex", hex.EncodeToString(b.MRSEAM[:]))
	o.str("td_attributes_hex", hex.EncodeToString(b.TDAttributes[:]))
	o.str("xfam_hex", hex.EncodeToString(b.XFAM[:]))
	o.boolean("debug", b.Debug())
	o.str("report_data_hex", hex.EncodeToString(b.ReportData[:]))
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err == nil && len(chain) > 0 {
		if leaf, err := x509.ParseCertificate(chain[0]); err == nil {
			pck := certValueObj(leaf)
			if ext, err := pcs.PckCertificateExtensions(leaf); err == nil {
				pck.str("fmspc", ext.FMSPC)
				pck.str("pceid", ext.PCEID)
				pck.str("ppid", ext.PPID)
			}
			o.val("pck_certificate", pck.value())
		}
	}
	return o.value()
}

// azureValue shows the HCL report's user data and the hardware report
// beneath it (docs/spec/platform-azure.md), unverified like the rest.
func azureValue(ev *evidence.Evidence) *pohjson.Value {
	o := &obj{}
	r, err := hclreport.Parse(ev.Aux[hclreport.AuxReport])
	if err != nil {
		return errValue(err)
	}
	o.num("hcl_report_version", int64(r.Version))
	if c, err := hclreport.ParseClaims(r.Claims); err == nil {
		o.str("user_data_hex", hex.EncodeToString(c.UserData[:]))
	} else {
		o.str("claims_error", err.Error())
	}
	var vcek []byte
	if len(ev.CertChain) == 1 {
		vcek = ev.CertChain[0]
	}
	hw, err := r.Hardware(ev.Simulated, vcek, ev.Aux[hclreport.AuxTDQuote])
	switch {
	case err != nil:
		o.str("hardware_error", err.Error())
	case hw.Platform == evidence.PlatformSEVSNP:
		o.val("sev_snp", sevValue(hw))
	default:
		o.val("tdx", tdxValue(hw))
	}
	return o.value()
}

func tpmValue(ev *evidence.Evidence) *pohjson.Value {
	o := &obj{}
	if ak, err := tpmquote.ParsePublic(ev.Aux["ak_public"]); err == nil {
		o.str("ak_name_hex", hex.EncodeToString(ak.Name()))
	} else {
		o.str("ak_error", err.Error())
	}
	a, err := tpmquote.ParseAttest(ev.Blob)
	if err != nil {
		o.str("quote_error", err.Error())
		return o.value()
	}
	pcrs := make([]*pohjson.Value, 0, len(a.PCRs))
	for _, p := range a.PCRs {
		pcrs = append(pcrs, pohjson.NewInt(int64(p)))
	}
	o.val("pcrs_sha256", pohjson.NewArray(pcrs...))
	o.str("pcr_digest_hex", hex.EncodeToString(a.PCRDigest))
	o.str("pcr_digest_b64u", b64u.Encode(a.PCRDigest))
	o.str("firmware_version_hex", fmt.Sprintf("%016x", a.FirmwareVersion))
	o.num("reset_count", int64(a.ResetCount))
	o.num("restart_count", int64(a.RestartCount))
	if len(ev.CertChain) > 0 {
		if ek, err := x509.ParseCertificate(ev.CertChain[0]); err == nil {
			o.val("ek_certificate", certValue(ek))
		}
	}
	if der, ok := ev.Aux[tpmquote.AuxAKCert]; ok {
		if c, err := x509.ParseCertificate(der); err == nil {
			o.val("ak_certificate", certValue(c))
		} else {
			o.str("ak_certificate_error", err.Error())
		}
	}
	return o.value()
}

func certValueObj(c *x509.Certificate) *obj {
	o := &obj{}
	o.str("subject", c.Subject.String())
	o.str("issuer", c.Issuer.String())
	o.str("serial", c.SerialNumber.String())
	o.str("not_after", c.NotAfter.UTC().Format(time.RFC3339))
	return o
}

func certValue(c *x509.Certificate) *pohjson.Value { return certValueObj(c).value() }

// flatten prints v as "path: value" lines in member order.
func flatten(w io.Writer, prefix string, v *pohjson.Value) {
	switch v.Kind() {
	case pohjson.Object:
		if len(v.Members()) == 0 {
			fmt.Fprintf(w, "%s: {}\n", prefix)
		}
		for _, m := range v.Members() {
			p := m.Key
			if prefix != "" {
				p = prefix + "." + m.Key
			}
			flatten(w, p, m.Value)
		}
	case pohjson.Array:
		if len(v.Elems()) == 0 {
			fmt.Fprintf(w, "%s: []\n", prefix)
		}
		for i, e := range v.Elems() {
			flatten(w, prefix+"["+strconv.Itoa(i)+"]", e)
		}
	case pohjson.String:
		s, _ := v.Str()
		fmt.Fprintf(w, "%s: %s\n", prefix, printable(s))
	default:
		b, _ := pohjson.Stringify(v)
		fmt.Fprintf(w, "%s: %s\n", prefix, b)
	}
}

// printable quotes s when it holds anything a terminal could interpret.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// input is a file given for a flag, with the kind the flag expects.
type input struct {
	flag, path string
	raw        []byte
	want       string
}

// inputHint recognises files given for the wrong flag: two that look
// swapped are named together, and a file that is recognisably another kind
// of document is named with its kind. Content that is not recognised is
// left to the parser of the expected kind. It returns "" when nothing looks
// wrong. Callers print it beside the error the parser gave, so that exit
// codes stay those of the parser.
func inputHint(ins ...input) string {
	kinds := make([]string, len(ins))
	for i, in := range ins {
		if in.raw != nil {
			kinds[i] = sniff(in.raw)
		}
	}
	for i := range ins {
		for j := i + 1; j < len(ins); j++ {
			if ins[i].raw != nil && ins[j].raw != nil && kinds[i] == ins[j].want && kinds[j] == ins[i].want && kinds[i] != kinds[j] {
				return fmt.Sprintf("%s and %s look swapped: %s is %s and %s is %s", ins[i].flag, ins[j].flag,
					ins[i].path, kindPhrase(kinds[i]), ins[j].path, kindPhrase(kinds[j]))
			}
		}
	}
	for i, in := range ins {
		if in.raw == nil || kinds[i] == kindUnknown || kinds[i] == in.want {
			continue
		}
		return fmt.Sprintf("%s %s is %s, not %s", in.flag, in.path, kindPhrase(kinds[i]), kindPhrase(in.want))
	}
	return ""
}

// replayAny replays an event log on its own (kind "tpm" or "ccel"; ""
// tries both).
func replayAny(log []byte, kind string) (*platform.BootChain, error) {
	kinds := []string{kind}
	if kind == "" {
		kinds = []string{"tpm", "ccel"}
	}
	var err error
	for _, k := range kinds {
		var bc *platform.BootChain
		if bc, err = platform.ReplayEventLog(k, log); err == nil {
			return bc, nil
		}
	}
	return nil, err
}

// eventLogValue is an event log of kind replayed on its own.
func eventLogValue(log []byte, kind string) *pohjson.Value {
	bc, err := replayAny(log, kind)
	if err != nil {
		return errValue(err)
	}
	return bootValue(bc)
}

// bootValue shows the registers a replayed log claims and the boot
// chain's reference values, all unverified until packctl verify replays
// the log against the registers the hardware signed. The kernel, command
// line and initrd are lists in log order, as a policy pins them (every one),
// and the last of each kind is named too.
func bootValue(bc *platform.BootChain) *pohjson.Value {
	o := &obj{}
	o.str("log", bc.Log)
	o.boolean("verified", false)
	name := "pcr"
	if bc.Log == "ccel" {
		name = "rtmr"
	}
	for i, r := range bc.Registers {
		o.str(name+strconv.Itoa(r)+"_hex", hex.EncodeToString(bc.Values[i]))
	}
	if bc.Firmware != nil {
		o.str("boot_firmware_hex", hex.EncodeToString(bc.Firmware))
	}
	for _, v := range []struct {
		kind string
		vals [][]byte
	}{{"kernel", bc.Kernels}, {"command_line", bc.CommandLines}, {"initrd", bc.Initrds}} {
		if len(v.vals) == 0 {
			continue
		}
		all := make([]*pohjson.Value, 0, len(v.vals))
		for _, d := range v.vals {
			all = append(all, pohjson.NewString(hex.EncodeToString(d)))
		}
		o.val("boot_"+v.kind+"_hex", pohjson.NewArray(all...))
		o.str("boot_"+v.kind+"_last_hex", hex.EncodeToString(v.vals[len(v.vals)-1]))
	}
	return o.value()
}
