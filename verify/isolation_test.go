package verify

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/wire/evidencedoc"
)

func observed(t *testing.T, o evidencedoc.IsolationObservation) *evidencedoc.Isolation {
	t.Helper()
	i, err := evidencedoc.NewIsolation(o)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestRequireIsolation: require_isolation refuses (ErrPolicy, check
// policy/isolation, the message naming the claim) an attestation whose
// required claim is false, and one without isolation claims (v2); it
// accepts one whose required claims hold. Verify returns the claims.
func TestRequireIsolation(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	isolated := observed(t, evidencedoc.IsolationObservation{
		AttesterUID: 998, ControlUIDs: []int64{999}, SocketProtected: true, YamaPtraceScope: "1",
		PeerUID: 999, PeerPIDNamespace: evidencedoc.PIDNamespaceSame,
	})
	shared := observed(t, evidencedoc.IsolationObservation{ // the development layout: one uid for all
		AttesterUID: 1000, ControlUIDs: []int64{1000}, SocketProtected: true, YamaPtraceScope: "0",
		PeerUID: 1000, PeerPIDNamespace: evidencedoc.PIDNamespaceSame,
	})
	v3 := func(iso *evidencedoc.Isolation) *fixture {
		return attestWith(t, sev, newRun(t), func(in *attestation.AttestInput) { in.Isolation = iso })
	}
	good, bad, old := v3(isolated), v3(shared), attest(t, sev, newRun(t))

	all := good.simPolicy()
	all.RequireIsolation = slices.Clone(evidencedoc.IsolationClaims)
	res, err := Verify(good.att, good.ev, good.bundle, all, good.opts())
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Commitments; c.Version != evidencedoc.CommitmentsVersionV3 || c.Isolation == nil || c.Isolation.AttesterUID != 998 {
		t.Fatalf("commitments %+v", c)
	}
	for _, tc := range []struct {
		name    string
		f       *fixture
		require []string
		names   string
	}{
		{"every claim, shared uid", bad, evidencedoc.IsolationClaims, "isolation claim control_uids_separate is false (attester uid 1000, control uids [1000])"},
		{"ptrace only", bad, []string{"ptrace_restricted"}, "isolation claim ptrace_restricted is false (yama ptrace_scope 0)"},
		{"no claims (v2)", old, []string{"socket_protected"}, "carries no isolation claims (clawea.dev/attestation/v2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.f.simPolicy()
			p.RequireIsolation = tc.require
			_, err := Verify(tc.f.att, tc.f.ev, tc.f.bundle, p, tc.f.opts())
			e := wantErr(t, err, ErrPolicy, checkPolicy+"/"+policyIsolation, "")
			if !strings.Contains(e.Error(), tc.names) || e.Field != "require_isolation" {
				t.Fatalf("error %q (field %q) does not say %q", e.Error(), e.Field, tc.names)
			}
		})
	}
	// A claim that holds is all a list requires.
	p := bad.simPolicy()
	p.RequireIsolation = []string{"socket_protected", "peer_same_pid_namespace"}
	if _, err := Verify(bad.att, bad.ev, bad.bundle, p, bad.opts()); err != nil {
		t.Fatal(err)
	}
}

// TestParseRequireIsolation: true is every claim, false none, a list its
// names; anything else is refused with the member's path.
func TestParseRequireIsolation(t *testing.T) {
	for doc, want := range map[string][]string{
		`true`:  evidencedoc.IsolationClaims,
		`false`: nil,
		`["ptrace_restricted","socket_protected"]`: {"ptrace_restricted", "socket_protected"},
	} {
		if p := roundTripPolicy(t, policyHead+`"require_isolation":`+doc+`}`); !slices.Equal(p.RequireIsolation, want) {
			t.Fatalf("%s: %v", doc, p.RequireIsolation)
		}
	}
	for _, doc := range []string{`[]`, `"yes"`, `["no_such_claim"]`, `["ptrace_restricted","ptrace_restricted"]`, `[1]`, `{}`} {
		_, err := ParsePolicy([]byte(policyHead + `"require_isolation":` + doc + `}`))
		if !errors.Is(err, ErrPolicyFile) || !strings.Contains(err.Error(), "require_isolation") {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
