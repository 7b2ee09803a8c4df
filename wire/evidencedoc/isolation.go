package evidencedoc

import (
	"fmt"
	"slices"
)

// isolationVersion is the isolation_version of Isolation claims: NewIsolation
// sets it and Parse refuses any other.
const isolationVersion = "clawea.dev/isolation/v1"

// ObservedAtRunCreation is the only observed_at value of v1: the claims
// were observed once, when the run was created, not during the run.
const ObservedAtRunCreation = "run_creation"

// Values of Isolation.YamaPtraceScope besides "0".."3".
const (
	// YamaAbsent: /proc/sys/kernel/yama/ptrace_scope does not exist (the
	// kernel has no Yama LSM).
	YamaAbsent = "absent"
	// YamaUnreadable: it exists but could not be read or parsed.
	YamaUnreadable = "unreadable"
)

// Values of Isolation.PeerPIDNamespace.
const (
	PIDNamespaceSame    = "same"
	PIDNamespaceOther   = "other"
	PIDNamespaceUnknown = "unknown"
)

// The isolation claim names a relying party's policy may require
// (require_isolation): each names a boolean member of Isolation that is
// true when the property was observed.
const (
	claimControlUIDsSeparate  = "control_uids_separate"
	claimSocketProtected      = "socket_protected"
	claimPtraceRestricted     = "ptrace_restricted"
	claimPeerUIDSeparate      = "peer_uid_separate"
	claimPeerSamePIDNamespace = "peer_same_pid_namespace"
)

// IsolationClaims lists the claim names, in wire order.
var IsolationClaims = []string{
	claimControlUIDsSeparate, claimSocketProtected, claimPtraceRestricted,
	claimPeerUIDSeparate, claimPeerSamePIDNamespace,
}

// Limits of Isolation.
const (
	// maxUID is the largest uid (2^31-2; -1 is "no uid").
	maxUID = 1<<31 - 2
	// maxControlUIDs bounds control_uids (attester.controlUids).
	maxControlUIDs = 64
)

// IsolationObservation is what the attester saw of its isolation from the
// orchestrator when a run was created (docs/spec/attestation-v1.md section
// 5.6). NewIsolation derives the claims from it.
type IsolationObservation struct {
	// AttesterUID is the attester's effective uid.
	AttesterUID int64
	// ControlUIDs are attester.controlUids.
	ControlUIDs []int64
	// SocketProtected: no control uid other than AttesterUID can write the
	// control socket's directory or any directory above it (so none can
	// replace the socket).
	SocketProtected bool
	// YamaPtraceScope is "0".."3", YamaAbsent or YamaUnreadable.
	YamaPtraceScope string
	// PeerUID is the run creator's uid, -1 when the attester had no peer
	// credentials; PeerPIDNamespace whether the creator is in the
	// attester's pid namespace.
	PeerUID          int64
	PeerPIDNamespace string
}

// Isolation is the "isolation" member of v3 commitments: evidence of what
// the attester observed when the run was created, not a promise that it
// held during the run. Field order is the wire order.
type Isolation struct {
	Version              string  `json:"isolation_version"`
	ObservedAt           string  `json:"observed_at"`
	AttesterUID          int64   `json:"attester_uid"`
	ControlUIDs          []int64 `json:"control_uids"`
	ControlUIDsSeparate  bool    `json:"control_uids_separate"`
	SocketProtected      bool    `json:"socket_protected"`
	YamaPtraceScope      string  `json:"yama_ptrace_scope"`
	PtraceRestricted     bool    `json:"ptrace_restricted"`
	PeerUID              int64   `json:"peer_uid"`
	PeerUIDSeparate      bool    `json:"peer_uid_separate"`
	PeerPIDNamespace     string  `json:"peer_pid_namespace"`
	PeerSamePIDNamespace bool    `json:"peer_same_pid_namespace"`
}

// NewIsolation derives the claims from an observation: control_uids sorted
// without duplicates; control_uids_separate when the attester's uid is none
// of them; ptrace_restricted when Yama's ptrace_scope is 1 or more;
// peer_uid_separate when the peer is known and not the attester's uid;
// peer_same_pid_namespace when the peer is in the attester's pid
// namespace. It refuses values outside their ranges (ErrMalformed).
func NewIsolation(o IsolationObservation) (*Isolation, error) {
	if o.AttesterUID < 0 || o.AttesterUID > maxUID || o.PeerUID < -1 || o.PeerUID > maxUID {
		return nil, fmt.Errorf("%w: isolation: uid out of range", ErrMalformed)
	}
	if len(o.ControlUIDs) == 0 || len(o.ControlUIDs) > maxControlUIDs {
		return nil, fmt.Errorf("%w: isolation: 1 to %d control uids", ErrMalformed, maxControlUIDs)
	}
	uids := slices.Compact(slices.Sorted(slices.Values(o.ControlUIDs)))
	if uids[0] < 0 || uids[len(uids)-1] > maxUID {
		return nil, fmt.Errorf("%w: isolation: control uid out of range", ErrMalformed)
	}
	restricted := false
	switch o.YamaPtraceScope {
	case "0", YamaAbsent, YamaUnreadable:
	case "1", "2", "3":
		restricted = true
	default:
		return nil, fmt.Errorf("%w: isolation: yama_ptrace_scope %q", ErrMalformed, o.YamaPtraceScope)
	}
	switch o.PeerPIDNamespace {
	case PIDNamespaceSame, PIDNamespaceOther, PIDNamespaceUnknown:
	default:
		return nil, fmt.Errorf("%w: isolation: peer_pid_namespace %q", ErrMalformed, o.PeerPIDNamespace)
	}
	if o.PeerUID == -1 && o.PeerPIDNamespace != PIDNamespaceUnknown {
		return nil, fmt.Errorf("%w: isolation: a peer without credentials has an unknown pid namespace", ErrInconsistent)
	}
	return &Isolation{
		Version:              isolationVersion,
		ObservedAt:           ObservedAtRunCreation,
		AttesterUID:          o.AttesterUID,
		ControlUIDs:          uids,
		ControlUIDsSeparate:  !slices.Contains(uids, o.AttesterUID),
		SocketProtected:      o.SocketProtected,
		YamaPtraceScope:      o.YamaPtraceScope,
		PtraceRestricted:     restricted,
		PeerUID:              o.PeerUID,
		PeerUIDSeparate:      o.PeerUID >= 0 && o.PeerUID != o.AttesterUID,
		PeerPIDNamespace:     o.PeerPIDNamespace,
		PeerSamePIDNamespace: o.PeerPIDNamespace == PIDNamespaceSame,
	}, nil
}

// Claim returns the value of the claim named name; ok is false for a name
// that is not in IsolationClaims.
func (i *Isolation) Claim(name string) (value, ok bool) {
	switch name {
	case claimControlUIDsSeparate:
		return i.ControlUIDsSeparate, true
	case claimSocketProtected:
		return i.SocketProtected, true
	case claimPtraceRestricted:
		return i.PtraceRestricted, true
	case claimPeerUIDSeparate:
		return i.PeerUIDSeparate, true
	case claimPeerSamePIDNamespace:
		return i.PeerSamePIDNamespace, true
	}
	return false, false
}

// Observed says, for a relying party's message, what the attester observed
// behind the claim named name: the values NewIsolation derived it from.
func (i *Isolation) Observed(name string) string {
	switch name {
	case claimControlUIDsSeparate:
		return fmt.Sprintf("attester uid %d, control uids %v", i.AttesterUID, i.ControlUIDs)
	case claimSocketProtected:
		return fmt.Sprintf("a control uid other than the attester's can replace the control socket, control uids %v", i.ControlUIDs)
	case claimPtraceRestricted:
		return "yama ptrace_scope " + i.YamaPtraceScope
	case claimPeerUIDSeparate:
		return fmt.Sprintf("run creator uid %d, attester uid %d", i.PeerUID, i.AttesterUID)
	case claimPeerSamePIDNamespace:
		return "run creator's pid namespace " + i.PeerPIDNamespace
	}
	return "unknown claim"
}

// checkIsolation checks claims read from a document: the version, the
// observation point, and that every derived claim is what NewIsolation
// derives from the observed values (control_uids in canonical order).
func checkIsolation(i *Isolation) error {
	if i.Version != isolationVersion {
		return fmt.Errorf("%w: isolation_version %q", ErrUnsupported, i.Version)
	}
	if i.ObservedAt != ObservedAtRunCreation {
		return fmt.Errorf("%w: isolation observed_at %q", ErrMalformed, i.ObservedAt)
	}
	want, err := NewIsolation(IsolationObservation{
		AttesterUID: i.AttesterUID, ControlUIDs: i.ControlUIDs, SocketProtected: i.SocketProtected,
		YamaPtraceScope: i.YamaPtraceScope, PeerUID: i.PeerUID, PeerPIDNamespace: i.PeerPIDNamespace,
	})
	if err != nil {
		return err
	}
	if !slices.Equal(want.ControlUIDs, i.ControlUIDs) {
		return fmt.Errorf("%w: isolation control_uids must be ascending without duplicates", ErrMalformed)
	}
	for _, name := range IsolationClaims {
		got, _ := i.Claim(name)
		if w, _ := want.Claim(name); got != w {
			return fmt.Errorf("%w: isolation %s is %v, but the observed values give %v", ErrInconsistent, name, got, w)
		}
	}
	return nil
}

// checkIsolationMember requires isolation in v3 commitments, admits it in
// v4, refuses it in earlier versions, and checks it.
func checkIsolationMember(c *Commitments) error {
	if err := memberInVersion(c.Version, "isolation", c.Isolation != nil, CommitmentsVersionV3, CommitmentsVersionV4); err != nil || c.Isolation == nil {
		return err
	}
	return checkIsolation(c.Isolation)
}
