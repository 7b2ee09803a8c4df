package verify

import (
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
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
	// TrustedTPMAKs are the TPM Names of trusted attestation keys.
	TrustedTPMAKs [][]byte
	// TPMAKCertifications are credential-activation records
	// (docs/spec/platform-tpm.md section 2.2) whose AKs are trusted while
	// their EK certificates chain to TPMEKRoots; RequireTPMEKCertifiedAK
	// refuses AKs that are only in TrustedTPMAKs.
	TPMAKCertifications     []*tpmcred.Certification
	TPMEKRoots              []*x509.Certificate
	RequireTPMEKCertifiedAK bool

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
}

var (
	sha256Hex  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	advisoryID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// ParsePolicy parses a policy file (docs/spec/verify-v1.md, section 5):
// a JSON object at most MaxPolicyBytes long whose first member is
// policy_version; unknown members, duplicate members, wrong types and
// malformed values are refused. Every error wraps ErrPolicyFile and a
// *jsonobj.PathError naming the member.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > MaxPolicyBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrPolicyFile, len(data), MaxPolicyBytes)
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: MaxPolicyBytes, MaxDepth: 4})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicyFile, err)
	}
	ms := root.Members()
	if len(ms) == 0 || ms[0].Key != "policy_version" {
		return nil, fmt.Errorf("%w: the first member must be policy_version", ErrPolicyFile)
	}
	if v, ok := ms[0].Value.Str(); !ok || v != PolicyVersion {
		return nil, fmt.Errorf("%w: policy_version: unsupported, want %q", ErrPolicyFile, PolicyVersion)
	}
	p := &Policy{}
	var r jsonobj.Reader
	for _, m := range ms[1:] {
		p.set(&r, m.Key, m.Value)
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicyFile, err)
		}
	}
	if len(p.TPMAKCertifications) > 0 && len(p.TPMEKRoots) == 0 {
		return nil, fmt.Errorf("%w: tpm_ak_certifications_b64u needs tpm_ek_roots_b64u", ErrPolicyFile)
	}
	if err := p.checkConsistent(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicyFile, err)
	}
	return p, nil
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

// ErrContradiction is wrapped (with ErrPolicyFile from ParsePolicy, with
// ErrUsage from Verify) when policy members contradict each other.
var ErrContradiction = errors.New("verify: contradictory policy")

// checkConsistent refuses contradictory members.
func (p *Policy) checkConsistent() error {
	if p.RequireSensitive && len(p.AdmissionPolicyHashes) == 0 {
		return &jsonobj.PathError{Path: jsonobj.Key(jsonobj.Root, "require_sensitive"),
			Err: fmt.Errorf("%w: require_sensitive needs admission_policy_hashes_b64u (the admission policies a sensitive run may have been admitted under)", ErrContradiction)}
	}
	return nil
}

func (p *Policy) set(r *jsonobj.Reader, key string, v *pohjson.Value) {
	path := jsonobj.Key(jsonobj.Root, key)
	bad := func(format string, args ...any) { r.Failf(path, jsonobj.ErrWrongType, format, args...) }
	switch key {
	case "allow_simulated":
		p.AllowSimulated = r.Bool(v, path)
	case "allow_unchecked_revocation":
		p.AllowUncheckedRevocation = r.Bool(v, path)
	case "allow_unchecked_collateral":
		p.AllowUncheckedCollateral = r.Bool(v, path)
	case "allow_any_measurement":
		p.AllowAnyMeasurement = r.Bool(v, path)
	case "measurements_b64u":
		listTo(r, v, path, func(s string) error {
			b, err := b64u.Decode(s)
			if err != nil || (len(b) != 32 && len(b) != 48) {
				return errors.New("a measurement is 32 or 48 bytes of b64u")
			}
			p.Measurements = append(p.Measurements, b)
			return nil
		})
	case "min_sev_snp_tcb":
		s, ok := v.Str()
		n, err := strconv.ParseUint(s, 16, 64)
		if !ok || len(s) != 16 || !isLowerHex(s) || err != nil {
			bad("want 16 lowercase hex digits")
			return
		}
		p.MinSEVSNPTCB = n
	case "min_tdx_tee_tcb_svn":
		s, ok := v.Str()
		if !ok || len(s) != 32 || !isLowerHex(s) {
			bad("want 32 lowercase hex digits")
			return
		}
		_, _ = hex.Decode(p.MinTDXTeeTCBSVN[:], []byte(s))
	case "tdx_tcb_statuses":
		listTo(r, v, path, func(s string) error {
			if !platform.AcceptableTCBStatus(s) {
				return errors.New("unknown tcb status (Revoked is never acceptable)")
			}
			p.TDXTCBStatuses = append(p.TDXTCBStatuses, s)
			return nil
		})
	case "tdx_allowed_advisory_ids":
		listTo(r, v, path, func(s string) error {
			if !advisoryID.MatchString(s) {
				return errors.New("an advisory id is 1 to 64 letters, digits, '.', '_' or '-'")
			}
			p.TDXAllowedAdvisoryIDs = append(p.TDXAllowedAdvisoryIDs, s)
			return nil
		})
	case "trusted_tpm_ak_names_hex":
		listTo(r, v, path, func(s string) error {
			b, err := hex.DecodeString(s)
			if err != nil || len(b) != 34 || !isLowerHex(s) {
				return errors.New("a TPM Name is 34 bytes of lowercase hex")
			}
			p.TrustedTPMAKs = append(p.TrustedTPMAKs, b)
			return nil
		})
	case "tpm_ak_certifications_b64u":
		listTo(r, v, path, func(s string) error {
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
	case "tpm_ek_roots_b64u":
		listTo(r, v, path, func(s string) error {
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
	case "require_tpm_ek_certified_ak":
		p.RequireTPMEKCertifiedAK = r.Bool(v, path)
	case "trusted_attester_dids":
		listTo(r, v, path, func(s string) error {
			if len(s) > maxPolicyText || !didkey.ValidSyntax(s) {
				return errors.New("not a did:key or did:web")
			}
			p.TrustedAttesterDIDs = append(p.TrustedAttesterDIDs, s)
			return nil
		})
	case "gateway_receipt_signer_dids":
		listTo(r, v, path, func(s string) error {
			if len(s) > maxPolicyText || !didkey.ValidSyntax(s) {
				return errors.New("not a did:key or did:web")
			}
			p.ReceiptSignerDIDs = append(p.ReceiptSignerDIDs, s)
			return nil
		})
	case "trusted_templates":
		p.TrustedTemplates = nil
		for _, m := range r.Members(v, path, 0, maxPolicyList) {
			if p.TrustedTemplates == nil {
				p.TrustedTemplates = map[string]string{}
			}
			s, ok := m.Value.Str()
			if !ok || !sha256Hex.MatchString(s) || !text(m.Key) {
				r.Failf(jsonobj.Key(path, m.Key), jsonobj.ErrWrongType, "want sha256:<64 lowercase hex>")
				return
			}
			p.TrustedTemplates[m.Key] = s
		}
	case "trusted_recipes":
		for i, e := range r.Array(v, path, 0, maxPolicyList) {
			ep := jsonobj.Index(path, i)
			ms := e.Members()
			if e.Kind() != pohjson.Object || len(ms) != 2 || ms[0].Key != "id" || ms[1].Key != "version" {
				r.Failf(ep, jsonobj.ErrWrongType, `want {"id","version"} objects`)
				return
			}
			id, ok1 := ms[0].Value.Str()
			ver, ok2 := ms[1].Value.Str()
			if !ok1 || !ok2 || !text(id) || !text(ver) || id == "" || ver == "" {
				r.Failf(ep, jsonobj.ErrWrongType, "id and version are non-empty strings")
				return
			}
			p.TrustedRecipes = append(p.TrustedRecipes, Recipe{ID: id, Version: ver})
		}
	case "require_sensitive":
		p.RequireSensitive = r.Bool(v, path)
	case "admission_policy_hashes_b64u":
		listTo(r, v, path, func(s string) error {
			if _, err := b64u.DecodeHash(s); err != nil {
				return errors.New("want a b64u SHA-256 string")
			}
			p.AdmissionPolicyHashes = append(p.AdmissionPolicyHashes, s)
			return nil
		})
	case "expected_system_prompt_hash_b64u":
		p.ExpectedPromptHashB64u = hashTo(r, v, path)
	case "expected_report_hash_b64u":
		p.ExpectedReportHashB64u = hashTo(r, v, path)
	case "expected_gate_policy_hash_b64u":
		p.ExpectedGatePolicyHashB64u = hashTo(r, v, path)
	case "expected_model":
		// Member order is part of the format: provider, model[, revision].
		ms := v.Members()
		if v.Kind() != pohjson.Object || len(ms) < 2 || len(ms) > 3 {
			bad(`want {"provider","model"[,"revision"]}`)
			return
		}
		m := &ModelIdentity{}
		for i, want := range []string{"provider", "model", "revision"}[:len(ms)] {
			s, ok := ms[i].Value.Str()
			if ms[i].Key != want || !ok || s == "" || !text(s) {
				bad(`want {"provider","model"[,"revision"]} with non-empty strings`)
				return
			}
			switch i {
			case 0:
				m.Provider = s
			case 1:
				m.Model = s
			case 2:
				m.Revision = s
			}
		}
		p.ExpectedModel = m
	default:
		r.Fail(path, jsonobj.ErrUnknownField)
	}
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

// hashTo returns the b64u SHA-256 string v.
func hashTo(r *jsonobj.Reader, v *pohjson.Value, path string) string {
	s, ok := v.Str()
	if _, err := b64u.DecodeHash(s); !ok || err != nil {
		r.Failf(path, jsonobj.ErrWrongType, "want a b64u SHA-256 string")
		return ""
	}
	return s
}

// listTo reads an array of at most maxPolicyList distinct strings, each
// checked by add.
func listTo(r *jsonobj.Reader, v *pohjson.Value, path string, add func(string) error) {
	seen := map[string]bool{}
	for i, s := range r.Strings(v, path, 0, maxPolicyList, 0) {
		ep := jsonobj.Index(path, i)
		if seen[s] {
			r.Failf(ep, jsonobj.ErrWrongType, "duplicate entry")
			return
		}
		seen[s] = true
		if err := add(s); err != nil {
			r.Fail(ep, fmt.Errorf("%w: %w", jsonobj.ErrWrongType, err))
			return
		}
	}
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

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
