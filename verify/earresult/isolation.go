package earresult

import "github.com/clawea/attester/wire/evidencedoc"

// isolationAnnotation is the isolation claims as the EAR shows them: the
// observed values and each claim by name, and when they were observed.
func isolationAnnotation(iso *evidencedoc.Isolation) map[string]interface{} {
	uids := make([]interface{}, 0, len(iso.ControlUIDs))
	for _, u := range iso.ControlUIDs {
		uids = append(uids, u)
	}
	m := map[string]interface{}{
		"isolation_version":  iso.Version,
		"observed_at":        iso.ObservedAt,
		"attester_uid":       iso.AttesterUID,
		"control_uids":       uids,
		"yama_ptrace_scope":  iso.YamaPtraceScope,
		"peer_uid":           iso.PeerUID,
		"peer_pid_namespace": iso.PeerPIDNamespace,
	}
	for _, name := range evidencedoc.IsolationClaims {
		m[name], _ = iso.Claim(name)
	}
	return m
}
