package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidencedoc"
)

// policyIsolation names the policy check of require_isolation.
const policyIsolation = "isolation"

// requireIsolation reads require_isolation (docs/spec/verify-v1.md section
// 5.2): true (every claim of evidencedoc.IsolationClaims), false (none), or
// a non-empty list of distinct claim names.
func requireIsolation(d *confdoc.Decoder, v *pohjson.Value) []string {
	const path = "$.require_isolation"
	if b, ok := v.Bool(); ok {
		if b {
			return slices.Clone(evidencedoc.IsolationClaims)
		}
		return nil
	}
	want := fmt.Sprintf("want true, false or a non-empty list of distinct claim names (%s)", strings.Join(evidencedoc.IsolationClaims, ", "))
	if v.Kind() != pohjson.Array || len(v.Elems()) == 0 {
		d.Fail(path, jsonobj.ErrWrongType, "%s", want)
		return nil
	}
	var names []string
	for i, e := range v.Elems() {
		s, ok := e.Str()
		if !ok || !slices.Contains(evidencedoc.IsolationClaims, s) || slices.Contains(names, s) {
			d.Fail(jsonobj.Index(path, i), jsonobj.ErrWrongType, "%s", want)
			return nil
		}
		names = append(names, s)
	}
	return names
}

// encodeRequireIsolation is the require_isolation member of Encode: the
// list of claim names (ParsePolicy reads true as the list of all of them).
func encodeRequireIsolation(names []string) *pohjson.Value {
	var es []*pohjson.Value
	for _, n := range names {
		es = append(es, pohjson.NewString(n))
	}
	return pohjson.NewArray(es...)
}

// checkIsolation applies require_isolation to the verified commitments: an
// attestation without isolation claims (commitments before v3), or one
// whose required claim is false, is refused, naming the claim and what was
// observed. The claims are what the attester observed at run creation, not
// a guarantee for the whole run.
func checkIsolation(p *Policy, c *evidencedoc.Commitments) *Error {
	if len(p.RequireIsolation) == 0 {
		return nil
	}
	iso := c.Isolation
	if iso == nil {
		return policyErr(policyIsolation, "require_isolation", "the attestation carries no isolation claims (%s) and require_isolation names %s",
			c.Version, strings.Join(p.RequireIsolation, ", "))
	}
	for _, name := range p.RequireIsolation {
		if v, ok := iso.Claim(name); !ok || !v {
			return policyErr(policyIsolation, "require_isolation", "isolation claim %s is false (%s) and require_isolation requires it",
				name, iso.Observed(name))
		}
	}
	return nil
}
