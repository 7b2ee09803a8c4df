package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

func TestParsePolicyErrorsNameTheMember(t *testing.T) {
	for _, tc := range []struct {
		in, path string
		want     error
	}{
		{policyHead + `"allow_simulation":true}`, "$.allow_simulation", jsonobj.ErrUnknownField},
		{policyHead + `"allow_simulated":"yes"}`, "$.allow_simulated", jsonobj.ErrWrongType},
		{policyHead + `"trusted_attester_dids":["did:key:z6Mk","did:nope:x"]}`, "$.trusted_attester_dids[1]", jsonobj.ErrWrongType},
		{policyHead + `"trusted_attester_dids":["did:key:z6Mk","did:key:z6Mk"]}`, "$.trusted_attester_dids[1]", jsonobj.ErrWrongType},
		{policyHead + `"trusted_templates":{"AGENTS.md":"sha256:00"}}`, `$.trusted_templates["AGENTS.md"]`, jsonobj.ErrWrongType},
		{policyHead + `"trusted_recipes":[{"version":"1","id":"x"}]}`, "$.trusted_recipes[0]", jsonobj.ErrWrongType},
		{policyHead + `"expected_report_hash_b64u":"abc"}`, "$.expected_report_hash_b64u", jsonobj.ErrWrongType},
		{policyHead + `"allow_simulated":true,"allow_simulated":false}`, "$.allow_simulated", pohjson.ErrDuplicateKey},
		{policyHead + `"require_sensitive":true}`, "$.require_sensitive", errContradiction},
		{policyHead + `"require_sensitive":1,"admission_policy_hashes_b64u":["` + h("a") + `"]}`, "$.require_sensitive", jsonobj.ErrWrongType},
		{policyHead + `"admission_policy_hashes_b64u":["abc"]}`, "$.admission_policy_hashes_b64u[0]", jsonobj.ErrWrongType},
		// A range violation: more than 1024 entries.
		{policyHead + `"tdx_tcb_statuses":["OutOfDate"` + strings.Repeat(`,"OutOfDate"`, 1024) + `]}`, "$.tdx_tcb_statuses", jsonobj.ErrTooLarge},
		{policyHead + `"admission_policy_hashes_b64u":["` + h("a") + `","` + h("a") + `"]}`, "$.admission_policy_hashes_b64u[1]", jsonobj.ErrWrongType},
	} {
		wantPolicyRefused(t, tc.in, tc.path, tc.want)
	}
}

// policyHead starts a verify-policy document: tests append members and
// the closing brace.
const policyHead = `{"policy_version":"` + PolicyVersion + `",`

// roundTripPolicy parses the policy document doc; it fails t unless the
// policy's encoding parses again to the same encoding (the same ID).
func roundTripPolicy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParsePolicy(enc); err != nil || again.ID() != p.ID() {
		t.Fatalf("round trip %s: %v", enc, err)
	}
	return p
}

// wantPolicyRefused requires ParsePolicy to refuse in with an ErrPolicyFile
// error that wraps cause (unless nil) and names the member at path (unless
// empty).
func wantPolicyRefused(t *testing.T, in, path string, cause error) {
	t.Helper()
	_, err := ParsePolicy([]byte(in))
	if !errors.Is(err, ErrPolicyFile) || cause != nil && !errors.Is(err, cause) {
		t.Errorf("%s: err = %v, want %v", in, err, cause)
		return
	}
	if pe, ok := errors.AsType[*confdoc.ConfigError](err); path != "" && (!ok || pe.Path() != path) {
		t.Errorf("%s: err = %v, want path %s", in, err, path)
	}
}

func TestPolicyAdmissionRoundTrip(t *testing.T) {
	in := `{"policy_version":"clawea.dev/verify-policy/v1","admission_policy_hashes_b64u":["` + h("a") + `","` + h("b") + `"],"require_sensitive":true}`
	p, err := ParsePolicy([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !p.RequireSensitive || len(p.AdmissionPolicyHashes) != 2 || p.AdmissionPolicyHashes[1] != h("b") {
		t.Fatalf("policy %+v", p)
	}
	out, err := p.Encode()
	if err != nil || string(out) != in {
		t.Fatalf("Encode = %s, %v", out, err)
	}
}
