package earresult

import (
	"testing"

	"github.com/clawea/attester/wire/evidencedoc"
)

// TestIsolationShown: the EAR shows the isolation claims the attestation
// carries, by name, with what was observed and when.
func TestIsolationShown(t *testing.T) {
	iso, err := evidencedoc.NewIsolation(evidencedoc.IsolationObservation{
		AttesterUID: 998, ControlUIDs: []int64{999}, SocketProtected: true, YamaPtraceScope: evidencedoc.YamaAbsent,
		PeerUID: 999, PeerPIDNamespace: evidencedoc.PIDNamespaceSame,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := result()
	r.Commitments.Isolation = iso
	ar, err := New(r, nil, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	annot := *ar.Submods[SubmodName].VeraisonAnnotatedEvidence
	m, ok := annot["isolation"].(map[string]interface{})
	if !ok {
		t.Fatalf("no isolation annotation: %v", annot)
	}
	want := map[string]interface{}{
		"observed_at": "run_creation", "yama_ptrace_scope": "absent", "peer_pid_namespace": "same",
		"control_uids_separate": true, "socket_protected": true, "ptrace_restricted": false,
		"peer_uid_separate": true, "peer_same_pid_namespace": true,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: %v, want %v", k, m[k], v)
		}
	}
	// Without isolation claims (commitments before v3), none is shown.
	ar, err = New(result(), nil, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (*ar.Submods[SubmodName].VeraisonAnnotatedEvidence)["isolation"]; ok {
		t.Fatal("an attestation without isolation claims shows some")
	}
}
