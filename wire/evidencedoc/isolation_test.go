package evidencedoc_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/clawea/attester/wire/evidencedoc"
)

func isolation(t *testing.T, o evidencedoc.IsolationObservation) *evidencedoc.Isolation {
	t.Helper()
	i, err := evidencedoc.NewIsolation(o)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

var goodObservation = evidencedoc.IsolationObservation{
	AttesterUID: 998, ControlUIDs: []int64{1000, 999, 1000}, SocketProtected: true,
	YamaPtraceScope: "1", PeerUID: 999, PeerPIDNamespace: evidencedoc.PIDNamespaceSame,
}

// TestIsolationClaims: the claims NewIsolation derives, and their exact
// wire form in a v3 commitment, which round-trips through Sign and Parse.
func TestIsolationClaims(t *testing.T) {
	i := isolation(t, goodObservation)
	for _, name := range evidencedoc.IsolationClaims {
		if v, ok := i.Claim(name); !ok || !v {
			t.Errorf("%s: %v %v, want true", name, v, ok)
		}
	}
	d := execDoc(t)
	d.Execution.Clawea.Version, d.Execution.Clawea.Isolation = evidencedoc.CommitmentsVersionV3, i
	s := sign(t, d)
	_, payload := segments(s.JWS)
	want := `"sensitive":false,"isolation":{"isolation_version":"clawea.dev/isolation/v1","observed_at":"run_creation","attester_uid":998,"control_uids":[999,1000],"control_uids_separate":true,"socket_protected":true,"yama_ptrace_scope":"1","ptrace_restricted":true,"peer_uid":999,"peer_uid_separate":true,"peer_pid_namespace":"same","peer_same_pid_namespace":true}}`
	if !bytes.Contains(payload, []byte(want)) {
		t.Fatalf("payload %s\nhas no %s", payload, want)
	}
	p, err := evidencedoc.Parse(s.JWS, pub())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Execution.Clawea.Isolation; got == nil || got.AttesterUID != 998 || len(got.ControlUIDs) != 2 || !got.SocketProtected {
		t.Fatalf("parsed %+v", got)
	}

	for name, c := range map[string]struct {
		o     evidencedoc.IsolationObservation
		claim string
	}{
		"attester uid is a control uid": {evidencedoc.IsolationObservation{AttesterUID: 0, ControlUIDs: []int64{0}, YamaPtraceScope: "1", PeerUID: 0, PeerPIDNamespace: "same"}, "control_uids_separate"},
		"socket not protected":          {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{2}, YamaPtraceScope: "1", PeerUID: 2, PeerPIDNamespace: "same"}, "socket_protected"},
		"ptrace scope 0":                {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{2}, SocketProtected: true, YamaPtraceScope: "0", PeerUID: 2, PeerPIDNamespace: "same"}, "ptrace_restricted"},
		"no yama":                       {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{2}, SocketProtected: true, YamaPtraceScope: evidencedoc.YamaAbsent, PeerUID: 2, PeerPIDNamespace: "same"}, "ptrace_restricted"},
		"peer unknown":                  {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{2}, SocketProtected: true, YamaPtraceScope: "2", PeerUID: -1, PeerPIDNamespace: "unknown"}, "peer_uid_separate"},
		"peer is the attester's uid":    {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{1, 2}, SocketProtected: true, YamaPtraceScope: "2", PeerUID: 1, PeerPIDNamespace: "same"}, "peer_uid_separate"},
		"peer in another pid namespace": {evidencedoc.IsolationObservation{AttesterUID: 1, ControlUIDs: []int64{2}, SocketProtected: true, YamaPtraceScope: "3", PeerUID: 2, PeerPIDNamespace: "other"}, "peer_same_pid_namespace"},
	} {
		if v, _ := isolation(t, c.o).Claim(c.claim); v {
			t.Errorf("%s: %s is true", name, c.claim)
		}
	}
	for name, o := range map[string]evidencedoc.IsolationObservation{
		"no control uid":                {AttesterUID: 1, YamaPtraceScope: "1", PeerUID: 2, PeerPIDNamespace: "same"},
		"negative uid":                  {AttesterUID: -1, ControlUIDs: []int64{2}, YamaPtraceScope: "1", PeerUID: 2, PeerPIDNamespace: "same"},
		"unknown yama value":            {AttesterUID: 1, ControlUIDs: []int64{2}, YamaPtraceScope: "4", PeerUID: 2, PeerPIDNamespace: "same"},
		"unknown peer, known namespace": {AttesterUID: 1, ControlUIDs: []int64{2}, YamaPtraceScope: "1", PeerUID: -1, PeerPIDNamespace: "same"},
	} {
		if _, err := evidencedoc.NewIsolation(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestIsolationVersions: v3 requires isolation, v1 and v2 refuse it, and a
// hand-edited claim that does not follow from the observed values, or
// members out of order, is refused by Parse.
func TestIsolationVersions(t *testing.T) {
	for name, c := range map[string]struct {
		version string
		iso     *evidencedoc.Isolation
	}{
		"v3 without isolation": {evidencedoc.CommitmentsVersionV3, nil},
		"v2 with isolation":    {evidencedoc.CommitmentsVersionV2, isolation(t, goodObservation)},
	} {
		d := execDoc(t)
		d.Execution.Clawea.Version, d.Execution.Clawea.Isolation = c.version, c.iso
		if s, err := evidencedoc.Sign(fuzzKey, d); !errors.Is(err, evidencedoc.ErrMalformed) || s != nil {
			t.Errorf("%s: signed (%v)", name, err)
		}
	}
	d := execDoc(t)
	d.Execution.Clawea.Version, d.Execution.Clawea.Isolation = evidencedoc.CommitmentsVersionV3, isolation(t, goodObservation)
	hdr, payload := segments(sign(t, d).JWS)
	for name, c := range map[string]struct {
		old, new string
		want     error
	}{
		"a derived claim flipped":   {`"ptrace_restricted":true`, `"ptrace_restricted":false`, evidencedoc.ErrInconsistent},
		"control uid separate lie":  {`"control_uids":[999,1000]`, `"control_uids":[998,999,1000]`, evidencedoc.ErrInconsistent},
		"control uids out of order": {`"control_uids":[999,1000]`, `"control_uids":[1000,999]`, evidencedoc.ErrMalformed},
		"no observation point":      {`"observed_at":"run_creation"`, `"observed_at":"always"`, evidencedoc.ErrMalformed},
		"another version":           {`"isolation_version":"clawea.dev/isolation/v1"`, `"isolation_version":"clawea.dev/isolation/v2"`, evidencedoc.ErrUnsupported},
		"members out of order":      {`"socket_protected":true,"yama_ptrace_scope":"1"`, `"yama_ptrace_scope":"1","socket_protected":true`, evidencedoc.ErrMalformed},
		"v2 with isolation":         {`"clawea_version":"clawea.dev/attestation/v3"`, `"clawea_version":"clawea.dev/attestation/v2"`, evidencedoc.ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) { refusesEdit(t, hdr, payload, c.old, c.new, c.want) })
	}
}
