package verify

import (
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
	"github.com/google/go-sev-guest/kds"
)

// PolicyVersion is the value of policy_version, the first member of every
// policy file.
const PolicyVersion = "clawea.dev/verify-policy/v1"

// Policy file limits.
const (
	MaxPolicyBytes = 1 << 20
	maxPolicyList  = 1024
	maxPolicyText  = 512
)

// ErrPolicyFile is wrapped by every ParsePolicy error.
var ErrPolicyFile = errors.New("verify: invalid policy file")

// Recipe names a prompt rebuild recipe and its version.
type Recipe struct {
	ID      string
	Version string
}

// ModelIdentity is an expected model identity. Revision empty means "no
// revision": the attested identity must then carry none either.
type ModelIdentity struct {
	Provider string
	Model    string
	Revision string
}

// Policy is the relying party's reference values and relaxations
// (docs/spec/verify-v1.md, section 5). The zero value is the strictest: no
// measurement is accepted, simulated evidence is refused, revocation and
// collateral data are required. Debug guests are always refused.
type Policy struct {
	// AllowSimulated, AllowUncheckedRevocation and AllowUncheckedCollateral
	// are relaxations; each applies when either the Policy or the Options
	// grant it.
	AllowSimulated           bool
	AllowUncheckedRevocation bool
	AllowUncheckedCollateral bool

	// Measurements are the accepted launch measurements (SEV-SNP
	// MEASUREMENT, TDX MRTD, TPM PCR digest). Empty accepts none unless
	// AllowAnyMeasurement is set.
	Measurements        [][]byte
	AllowAnyMeasurement bool
	// MinSEVSNPTCB is the component-wise minimum REPORTED_TCB (the u64 of
	// tcb_version); 0 means no minimum.
	MinSEVSNPTCB uint64
	// MinTDXTeeTCBSVN is the component-wise minimum TEE_TCB_SVN.
	MinTDXTeeTCBSVN [16]byte
	// TDXTCBStatuses are the TDX TCB statuses accepted besides UpToDate
	// (for the TD's and the QE's TCB level) when collateral was checked;
	// empty means UpToDate only. Revoked is never accepted.
	TDXTCBStatuses []string
	// TDXAllowedAdvisoryIDs are the Intel advisory IDs accepted on a
	// matching TCB level; empty accepts none.
	TDXAllowedAdvisoryIDs []string
	// BootFirmware, BootKernel, BootCommandLine and BootInitrd pin the boot
	// chain replayed from the evidence's event log
	// (platform.Policy.BootFirmware, ...); empty pins nothing.
	BootFirmware, BootKernel, BootCommandLine, BootInitrd [][]byte
	// TrustedTPMAKs are the TPM Names of trusted attestation keys.
	TrustedTPMAKs [][]byte
	// TPMAKCertifications are credential-activation records
	// (docs/spec/platform-tpm.md section 2.2) whose AKs are trusted while
	// their EK certificates chain to TPMEKRoots; RequireTPMEKCertifiedAK
	// refuses AKs that are only in TrustedTPMAKs.
	TPMAKCertifications     []*tpmcred.Certification
	TPMEKRoots              []*x509.Certificate
	RequireTPMEKCertifiedAK bool
	// TrustGCEAKCerts trusts a TPM AK whose certificate (read from the
	// vTPM's NV) chains to Google's EK/AK CA (platform.Options).
	TrustGCEAKCerts bool

	// TrustedAttesterDIDs, when not empty, are the only accepted attester
	// DIDs.
	TrustedAttesterDIDs []string
	// TrustedTemplates maps template names to "sha256:<hex>"; when not
	// empty, every template of the SystemPromptReport must be listed with
	// the same hash (the report must be supplied).
	TrustedTemplates map[string]string
	// TrustedRecipes, when not empty, lists the accepted recipes (the report
	// must be supplied).
	TrustedRecipes []Recipe
	// Expected commitments (b64u SHA-256), each checked when set.
	ExpectedPromptHashB64u     string
	ExpectedReportHashB64u     string
	ExpectedGatePolicyHashB64u string
	// ExpectedModel, when set, must equal the attested model identity.
	ExpectedModel *ModelIdentity
	// ReceiptSignerDIDs is the allowlist of gateway receipt signers; it is
	// reported (Result.Bundle.AllowlistedReceipts), not enforced.
	ReceiptSignerDIDs []string
	// AdmissionPolicyHashes, when not empty, is the allowlist of admission
	// policies (admission_policy_hash_b64u) a run must have been admitted
	// under: an attestation that commits to none of them is refused.
	AdmissionPolicyHashes []string
	// RequireSensitive refuses an attestation that does not mark its run as
	// sensitive. It requires AdmissionPolicyHashes: a sensitive run is only
	// as strict as the policy that admitted it.
	RequireSensitive bool
	// RequireIsolation lists the isolation claims (evidencedoc.IsolationClaims)
	// that must be true: an attestation without isolation claims, or with
	// one of these false, is refused. Empty requires none.
	RequireIsolation []string
	// AllowUncheckedGPURevocation accepts GPU evidence whose chain's
	// revocation is not checked (it cannot be yet) while CPU revocation
	// stays required; AllowUncheckedRevocation implies it.
	AllowUncheckedGPURevocation bool
	// RequireGPU refuses an attestation without verified NVIDIA GPU
	// evidence (docs/spec/attestation-v1.md section 4.3).
	RequireGPU bool
	// GPUMeasurements pins GPU measurement blocks by index (see
	// platform.Policy.GPUMeasurements).
	GPUMeasurements map[int][]byte
	// RequireGateway refuses an attestation that does not commit to a model
	// gateway record (commitments v4), or whose bundle has an llm_call
	// without its gateway receipt. It needs the proof bundle.
	RequireGateway bool
}

var (
	sha256Hex  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	advisoryID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Platform returns the part of the policy that verify/platform judges
// verified hardware evidence by (measurements, TCB minimums, TDX TCB
// statuses and advisories).
func (p *Policy) Platform() platform.Policy {
	return platform.Policy{
		Measurements:        p.Measurements,
		AllowAnyMeasurement: p.AllowAnyMeasurement,
		MinSEVSNPTCB:        kds.DecomposeTCBVersion(kds.TCBVersion(p.MinSEVSNPTCB)),
		MinTDXTeeTCBSVN:     p.MinTDXTeeTCBSVN,
		TCBStatuses:         p.TDXTCBStatuses,
		AllowedAdvisoryIDs:  p.TDXAllowedAdvisoryIDs,
		BootFirmware:        p.BootFirmware,
		BootKernel:          p.BootKernel,
		BootCommandLine:     p.BootCommandLine,
		BootInitrd:          p.BootInitrd,
		GPUMeasurements:     p.GPUMeasurements,
	}
}

// ParsePolicy parses a policy file (docs/spec/verify-v1.md, section 5):
// a JSON object at most MaxPolicyBytes long whose first member is
// policy_version; unknown members, duplicate members, wrong types and
// malformed values are refused. Every error is a *confdoc.ConfigError
// naming the member and wrapping ErrPolicyFile.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, &confdoc.ConfigError{Doc: ErrPolicyFile, Err: jsonobj.ErrTooLarge, Msg: fmt.Sprintf("%d bytes, limit %d", len(data), MaxPolicyBytes)}
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxPolicyBytes, MaxDepth: 4})
	if err != nil {
		return nil, confdoc.FromPathError(ErrPolicyFile, err)
	}
	ms := root.Members()
	if len(ms) == 0 || ms[0].Key != "policy_version" {
		return nil, &confdoc.ConfigError{Doc: ErrPolicyFile, Err: jsonobj.ErrWrongType, Msg: "the first member must be policy_version"}
	}
	if v, ok := ms[0].Value.Str(); !ok || v != PolicyVersion {
		return nil, &confdoc.ConfigError{Doc: ErrPolicyFile, Key: "policy_version", Err: jsonobj.ErrWrongType, Msg: fmt.Sprintf("unsupported, want %q", PolicyVersion)}
	}
	var doc policyDoc
	if err := confdoc.Decode(root, &doc, confdoc.Options{Doc: ErrPolicyFile}); err != nil {
		return nil, err
	}
	return doc.policy, nil
}

// policyDoc declares the policy file's members (docs/spec/verify-v1.md,
// section 5). Lists hold at most maxPolicyList distinct entries; the
// values are checked and converted by CheckConf.
type policyDoc struct {
	Version                  string            `conf:"policy_version,required"`
	AllowSimulated           bool              `conf:"allow_simulated"`
	AllowUncheckedRevocation bool              `conf:"allow_unchecked_revocation"`
	AllowUncheckedCollateral bool              `conf:"allow_unchecked_collateral"`
	AllowAnyMeasurement      bool              `conf:"allow_any_measurement"`
	Measurements             []string          `conf:"measurements_b64u,max=1024,unique"`
	MinSEVSNPTCB             *string           `conf:"min_sev_snp_tcb"`
	MinTDXTeeTCBSVN          *string           `conf:"min_tdx_tee_tcb_svn"`
	TDXTCBStatuses           []string          `conf:"tdx_tcb_statuses,max=1024,unique"`
	TDXAllowedAdvisoryIDs    []string          `conf:"tdx_allowed_advisory_ids,max=1024,unique"`
	BootFirmware             []string          `conf:"boot_firmware_hex,max=1024,unique"`
	BootKernel               []string          `conf:"boot_kernel_hex,max=1024,unique"`
	BootCommandLine          []string          `conf:"boot_command_line_hex,max=1024,unique"`
	BootInitrd               []string          `conf:"boot_initrd_hex,max=1024,unique"`
	TrustedTPMAKs            []string          `conf:"trusted_tpm_ak_names_hex,max=1024,unique"`
	TPMAKCertifications      []string          `conf:"tpm_ak_certifications_b64u,max=1024,unique"`
	TPMEKRoots               []string          `conf:"tpm_ek_roots_b64u,max=1024,unique"`
	RequireTPMEKCertifiedAK  bool              `conf:"require_tpm_ek_certified_ak"`
	TrustGCEAKCerts          bool              `conf:"trust_gce_ak_certs"`
	TrustedAttesterDIDs      []string          `conf:"trusted_attester_dids,max=1024,unique"`
	ReceiptSignerDIDs        []string          `conf:"gateway_receipt_signer_dids,max=1024,unique"`
	TrustedTemplates         map[string]string `conf:"trusted_templates,max=1024"`
	TrustedRecipes           []*pohjson.Value  `conf:"trusted_recipes,max=1024"`
	RequireSensitive         bool              `conf:"require_sensitive"`
	AdmissionPolicyHashes    []string          `conf:"admission_policy_hashes_b64u,max=1024,unique"`
	ExpectedPromptHash       *string           `conf:"expected_system_prompt_hash_b64u"`
	ExpectedReportHash       *string           `conf:"expected_report_hash_b64u"`
	ExpectedGatePolicyHash   *string           `conf:"expected_gate_policy_hash_b64u"`
	ExpectedModel            *pohjson.Value    `conf:"expected_model"`
	RequireIsolation         *pohjson.Value    `conf:"require_isolation"`
	RequireGPU               bool              `conf:"require_gpu"`
	AllowUncheckedGPURev     bool              `conf:"allow_unchecked_gpu_revocation"`
	GPUMeasurements          map[string]string `conf:"gpu_measurements_hex,max=255"`
	RequireGateway           bool              `conf:"require_gateway"`

	policy *Policy
}

// CheckConf checks and converts every member's values, then the rules
// across members.
func (doc *policyDoc) CheckConf(d *confdoc.Decoder, _ string) {
	p := &Policy{
		AllowSimulated: doc.AllowSimulated, AllowUncheckedRevocation: doc.AllowUncheckedRevocation,
		AllowUncheckedCollateral: doc.AllowUncheckedCollateral, AllowAnyMeasurement: doc.AllowAnyMeasurement,
		RequireTPMEKCertifiedAK: doc.RequireTPMEKCertifiedAK, RequireSensitive: doc.RequireSensitive,
		RequireGPU: doc.RequireGPU, AllowUncheckedGPURevocation: doc.AllowUncheckedGPURev,
		TrustGCEAKCerts: doc.TrustGCEAKCerts,
		RequireGateway:  doc.RequireGateway,
	}
	for _, read := range []func(*confdoc.Decoder, *Policy){
		doc.readPlatform,
		doc.readTPM,
		doc.readTrusted,
		doc.readRecipes,
		doc.readExpected,
		doc.readGPU,
	} {
		read(d, p)
	}
	if d.Failed() {
		return
	}
	if len(p.TPMAKCertifications) > 0 && len(p.TPMEKRoots) == 0 {
		d.Fail("$.tpm_ak_certifications_b64u", errContradiction, "tpm_ak_certifications_b64u needs tpm_ek_roots_b64u")
		return
	}
	if err := p.checkConsistent(); err != nil {
		pe, _ := errors.AsType[*jsonobj.PathError](err)
		d.Fail(pe.Path, pe.Err, "%v", pe.Err)
		return
	}
	doc.policy = p
}

// readPlatform reads the measurements, the minimum TCBs and the
// acceptable TDX TCB statuses and advisories.
func (doc *policyDoc) readPlatform(d *confdoc.Decoder, p *Policy) {
	each(d, "measurements_b64u", doc.Measurements, func(s string) error {
		b, err := b64u.Decode(s)
		if err != nil || (len(b) != 32 && len(b) != 48) {
			return errors.New("a measurement is 32 or 48 bytes of b64u")
		}
		p.Measurements = append(p.Measurements, b)
		return nil
	})
	if s := doc.MinSEVSNPTCB; s != nil {
		n, err := strconv.ParseUint(*s, 16, 64)
		if len(*s) != 16 || !isLowerHex(*s) || err != nil {
			d.Fail("$.min_sev_snp_tcb", jsonobj.ErrWrongType, "want 16 lowercase hex digits")
		}
		p.MinSEVSNPTCB = n
	}
	if s := doc.MinTDXTeeTCBSVN; s != nil {
		if len(*s) != 32 || !isLowerHex(*s) {
			d.Fail("$.min_tdx_tee_tcb_svn", jsonobj.ErrWrongType, "want 32 lowercase hex digits")
		} else {
			_, _ = hex.Decode(p.MinTDXTeeTCBSVN[:], []byte(*s))
		}
	}
	each(d, "tdx_tcb_statuses", doc.TDXTCBStatuses, func(s string) error {
		if !platform.AcceptableTCBStatus(s) {
			return errors.New("unknown tcb status (Revoked is never acceptable)")
		}
		p.TDXTCBStatuses = append(p.TDXTCBStatuses, s)
		return nil
	})
	each(d, "tdx_allowed_advisory_ids", doc.TDXAllowedAdvisoryIDs, func(s string) error {
		if !advisoryID.MatchString(s) {
			return errors.New("an advisory id is 1 to 64 letters, digits, '.', '_' or '-'")
		}
		p.TDXAllowedAdvisoryIDs = append(p.TDXAllowedAdvisoryIDs, s)
		return nil
	})
	for _, pin := range []struct {
		key  string
		list []string
		dst  *[][]byte
	}{
		{"boot_firmware_hex", doc.BootFirmware, &p.BootFirmware}, {"boot_kernel_hex", doc.BootKernel, &p.BootKernel},
		{"boot_command_line_hex", doc.BootCommandLine, &p.BootCommandLine}, {"boot_initrd_hex", doc.BootInitrd, &p.BootInitrd},
	} {
		each(d, pin.key, pin.list, func(s string) error {
			b, err := hex.DecodeString(s)
			if err != nil || !isLowerHex(s) || (len(b) != 32 && len(b) != 48) {
				return errors.New("a boot reference value is a 32- or 48-byte digest in lowercase hex")
			}
			*pin.dst = append(*pin.dst, b)
			return nil
		})
	}
}

// readTPM reads the trusted TPM AK names, the AK certifications and the
// EK roots.
func (doc *policyDoc) readTPM(d *confdoc.Decoder, p *Policy) {
	each(d, "trusted_tpm_ak_names_hex", doc.TrustedTPMAKs, func(s string) error {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 34 || !isLowerHex(s) {
			return errors.New("a TPM Name is 34 bytes of lowercase hex")
		}
		p.TrustedTPMAKs = append(p.TrustedTPMAKs, b)
		return nil
	})
	each(d, "tpm_ak_certifications_b64u", doc.TPMAKCertifications, func(s string) error {
		b, err := b64u.Decode(s)
		if err != nil {
			return errors.New("not b64u")
		}
		c, err := tpmcred.ParseCertification(b)
		if err != nil {
			return err
		}
		p.TPMAKCertifications = append(p.TPMAKCertifications, c)
		return nil
	})
	each(d, "tpm_ek_roots_b64u", doc.TPMEKRoots, func(s string) error {
		b, err := b64u.Decode(s)
		if err != nil || len(b) > tpmquote.MaxCertSize {
			return errors.New("not b64u of at most 16 KiB")
		}
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return errors.New("not an X.509 certificate")
		}
		p.TPMEKRoots = append(p.TPMEKRoots, c)
		return nil
	})
}

// readTrusted reads the trusted attester and receipt signer DIDs and the
// trusted templates.
func (doc *policyDoc) readTrusted(d *confdoc.Decoder, p *Policy) {
	did := func(dst *[]string) func(string) error {
		return func(s string) error {
			if len(s) > maxPolicyText || !didkey.ValidSyntax(s) {
				return errors.New("not a did:key or did:web")
			}
			*dst = append(*dst, s)
			return nil
		}
	}
	each(d, "trusted_attester_dids", doc.TrustedAttesterDIDs, did(&p.TrustedAttesterDIDs))
	each(d, "gateway_receipt_signer_dids", doc.ReceiptSignerDIDs, did(&p.ReceiptSignerDIDs))
	if len(doc.TrustedTemplates) > 0 {
		p.TrustedTemplates = map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(doc.TrustedTemplates)) {
			s := doc.TrustedTemplates[name]
			if !sha256Hex.MatchString(s) || !text(name) {
				d.Fail(jsonobj.Key("$.trusted_templates", name), jsonobj.ErrWrongType, "want sha256:<64 lowercase hex>")
			}
			p.TrustedTemplates[name] = s
		}
	}
}

// readRecipes reads the trusted recipes and the admission policy hashes.
func (doc *policyDoc) readRecipes(d *confdoc.Decoder, p *Policy) {
	for i, e := range doc.TrustedRecipes {
		// Member order is part of the format: id, version.
		ep := jsonobj.Index("$.trusted_recipes", i)
		ms := e.Members()
		if e.Kind() != pohjson.Object || len(ms) != 2 || ms[0].Key != "id" || ms[1].Key != "version" {
			d.Fail(ep, jsonobj.ErrWrongType, `want {"id","version"} objects`)
			break
		}
		id, ok1 := ms[0].Value.Str()
		ver, ok2 := ms[1].Value.Str()
		if !ok1 || !ok2 || !text(id) || !text(ver) || id == "" || ver == "" {
			d.Fail(ep, jsonobj.ErrWrongType, "id and version are non-empty strings")
			break
		}
		p.TrustedRecipes = append(p.TrustedRecipes, Recipe{ID: id, Version: ver})
	}
	each(d, "admission_policy_hashes_b64u", doc.AdmissionPolicyHashes, func(s string) error {
		if _, err := b64u.DecodeHash(s); err != nil {
			return errors.New("want a b64u SHA-256 string")
		}
		p.AdmissionPolicyHashes = append(p.AdmissionPolicyHashes, s)
		return nil
	})
}

// readExpected reads the expected prompt, report and gate policy hashes
// and the expected model.
func (doc *policyDoc) readExpected(d *confdoc.Decoder, p *Policy) {
	for _, h := range []struct {
		key string
		v   *string
		dst *string
	}{
		{"expected_system_prompt_hash_b64u", doc.ExpectedPromptHash, &p.ExpectedPromptHashB64u},
		{"expected_report_hash_b64u", doc.ExpectedReportHash, &p.ExpectedReportHashB64u},
		{"expected_gate_policy_hash_b64u", doc.ExpectedGatePolicyHash, &p.ExpectedGatePolicyHashB64u},
	} {
		if h.v == nil {
			continue
		}
		if _, err := b64u.DecodeHash(*h.v); err != nil {
			d.Fail(jsonobj.Key(jsonobj.Root, h.key), jsonobj.ErrWrongType, "want a b64u SHA-256 string")
		}
		*h.dst = *h.v
	}
	if v := doc.ExpectedModel; v != nil {
		p.ExpectedModel = expectedModel(d, v)
	}
	if v := doc.RequireIsolation; v != nil {
		p.RequireIsolation = requireIsolation(d, v)
	}
}

// expectedModel reads expected_model, whose member order is part of the
// format: provider, model[, revision].
func expectedModel(d *confdoc.Decoder, v *pohjson.Value) *ModelIdentity {
	const path = "$.expected_model"
	ms := v.Members()
	if v.Kind() != pohjson.Object || len(ms) < 2 || len(ms) > 3 {
		d.Fail(path, jsonobj.ErrWrongType, `want {"provider","model"[,"revision"]}`)
		return nil
	}
	m := &ModelIdentity{}
	for i, want := range []string{"provider", "model", "revision"}[:len(ms)] {
		s, ok := ms[i].Value.Str()
		if ms[i].Key != want || !ok || s == "" || !text(s) {
			d.Fail(path, jsonobj.ErrWrongType, `want {"provider","model"[,"revision"]} with non-empty strings`)
			return nil
		}
		*[]*string{&m.Provider, &m.Model, &m.Revision}[i] = s
	}
	return m
}

// each checks every entry of the list member key with add.
func each(d *confdoc.Decoder, key string, list []string, add func(string) error) {
	for i, s := range list {
		if err := add(s); err != nil {
			d.Fail(jsonobj.Index(jsonobj.Key(jsonobj.Root, key), i), jsonobj.ErrWrongType, "%v", err)
			return
		}
	}
}

// tpmEKRoots returns the policy's TPM EK roots as a pool, nil when none.
func (p *Policy) tpmEKRoots() *x509.CertPool {
	if len(p.TPMEKRoots) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	for _, c := range p.TPMEKRoots {
		pool.AddCert(c)
	}
	return pool
}

// errContradiction is wrapped (with ErrPolicyFile from ParsePolicy, with
// ErrUsage from Verify) when policy members contradict each other.
var errContradiction = errors.New("verify: contradictory policy")

// checkConsistent refuses contradictory members.
func (p *Policy) checkConsistent() error {
	if p.RequireSensitive && len(p.AdmissionPolicyHashes) == 0 {
		return &jsonobj.PathError{Path: jsonobj.Key(jsonobj.Root, "require_sensitive"),
			Err: fmt.Errorf("%w: require_sensitive needs admission_policy_hashes_b64u (the admission policies a sensitive run may have been admitted under)", errContradiction)}
	}
	return nil
}

// Encode returns the policy file for p: compact JSON, policy_version first,
// members in the order of docs/spec/verify-v1.md, unset members omitted.
// ParsePolicy(p.Encode()) equals p.
func (p *Policy) Encode() ([]byte, error) {
	ms := []pohjson.Member{pohjson.M("policy_version", pohjson.NewString(PolicyVersion))}
	addBool := func(k string, b bool) {
		if b {
			ms = append(ms, pohjson.M(k, pohjson.NewBool(true)))
		}
	}
	addList := func(k string, l []string) {
		if len(l) == 0 {
			return
		}
		var es []*pohjson.Value
		for _, s := range l {
			es = append(es, pohjson.NewString(s))
		}
		ms = append(ms, pohjson.M(k, pohjson.NewArray(es...)))
	}
	addStr := func(k, s string) {
		if s != "" {
			ms = append(ms, pohjson.M(k, pohjson.NewString(s)))
		}
	}
	addBool("allow_simulated", p.AllowSimulated)
	addBool("allow_unchecked_revocation", p.AllowUncheckedRevocation)
	addBool("allow_unchecked_collateral", p.AllowUncheckedCollateral)
	var meas []string
	for _, m := range p.Measurements {
		meas = append(meas, b64u.Encode(m))
	}
	addList("measurements_b64u", meas)
	addBool("allow_any_measurement", p.AllowAnyMeasurement)
	if p.MinSEVSNPTCB != 0 {
		addStr("min_sev_snp_tcb", fmt.Sprintf("%016x", p.MinSEVSNPTCB))
	}
	if p.MinTDXTeeTCBSVN != ([16]byte{}) {
		addStr("min_tdx_tee_tcb_svn", hex.EncodeToString(p.MinTDXTeeTCBSVN[:]))
	}
	addList("tdx_tcb_statuses", p.TDXTCBStatuses)
	addList("tdx_allowed_advisory_ids", p.TDXAllowedAdvisoryIDs)
	for _, pin := range []struct {
		key  string
		list [][]byte
	}{{"boot_firmware_hex", p.BootFirmware}, {"boot_kernel_hex", p.BootKernel}, {"boot_command_line_hex", p.BootCommandLine}, {"boot_initrd_hex", p.BootInitrd}} {
		var hs []string
		for _, b := range pin.list {
			hs = append(hs, hex.EncodeToString(b))
		}
		addList(pin.key, hs)
	}
	var aks []string
	for _, a := range p.TrustedTPMAKs {
		aks = append(aks, hex.EncodeToString(a))
	}
	addList("trusted_tpm_ak_names_hex", aks)
	var certs, roots []string
	for _, c := range p.TPMAKCertifications {
		certs = append(certs, b64u.Encode(c.Marshal()))
	}
	for _, c := range p.TPMEKRoots {
		roots = append(roots, b64u.Encode(c.Raw))
	}
	addList("tpm_ak_certifications_b64u", certs)
	addList("tpm_ek_roots_b64u", roots)
	addBool("require_tpm_ek_certified_ak", p.RequireTPMEKCertifiedAK)
	addBool("trust_gce_ak_certs", p.TrustGCEAKCerts)
	addList("trusted_attester_dids", p.TrustedAttesterDIDs)
	if len(p.TrustedTemplates) > 0 {
		names := make([]string, 0, len(p.TrustedTemplates))
		for n := range p.TrustedTemplates {
			names = append(names, n)
		}
		sort.Strings(names)
		var tm []pohjson.Member
		for _, n := range names {
			tm = append(tm, pohjson.M(n, pohjson.NewString(p.TrustedTemplates[n])))
		}
		ms = append(ms, pohjson.M("trusted_templates", pohjson.NewObject(tm...)))
	}
	if len(p.TrustedRecipes) > 0 {
		var rs []*pohjson.Value
		for _, r := range p.TrustedRecipes {
			rs = append(rs, pohjson.NewObject(pohjson.M("id", pohjson.NewString(r.ID)), pohjson.M("version", pohjson.NewString(r.Version))))
		}
		ms = append(ms, pohjson.M("trusted_recipes", pohjson.NewArray(rs...)))
	}
	addStr("expected_system_prompt_hash_b64u", p.ExpectedPromptHashB64u)
	addStr("expected_report_hash_b64u", p.ExpectedReportHashB64u)
	addStr("expected_gate_policy_hash_b64u", p.ExpectedGatePolicyHashB64u)
	if m := p.ExpectedModel; m != nil {
		mm := []pohjson.Member{pohjson.M("provider", pohjson.NewString(m.Provider)), pohjson.M("model", pohjson.NewString(m.Model))}
		if m.Revision != "" {
			mm = append(mm, pohjson.M("revision", pohjson.NewString(m.Revision)))
		}
		ms = append(ms, pohjson.M("expected_model", pohjson.NewObject(mm...)))
	}
	addList("gateway_receipt_signer_dids", p.ReceiptSignerDIDs)
	addList("admission_policy_hashes_b64u", p.AdmissionPolicyHashes)
	addBool("require_sensitive", p.RequireSensitive)
	if len(p.RequireIsolation) > 0 {
		ms = append(ms, pohjson.M("require_isolation", encodeRequireIsolation(p.RequireIsolation)))
	}
	ms = append(ms, p.encodeGPU()...)
	addBool("require_gateway", p.RequireGateway)
	return pohjson.Stringify(pohjson.NewObject(ms...))
}

// ID returns an identifier of the policy for reports:
// "clawea.dev/verify-policy/v1#" + b64u(SHA-256(Encode())).
func (p *Policy) ID() string {
	b, err := p.Encode()
	if err != nil {
		return PolicyVersion
	}
	return PolicyVersion + "#" + b64u.SHA256(b)
}

func isLowerHex(s string) bool { return charclass.LowerHex().All(s) }

// text reports whether s is short UTF-8 without control characters.
func text(s string) bool {
	if len(s) > maxPolicyText || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
