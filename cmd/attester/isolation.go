package main

import (
	"log/slog"

	"github.com/clawea/attester/control"
)

// checkIsolation records what the attester sees of its isolation at start
// (docs/spec/attestation-v1.md section 5.6) and refuses, outside
// development mode, a layout in which a control uid other than its own can
// replace the control socket (write its directory or one above it). It
// reports whether the attester may go on.
func checkIsolation(cfg *control.Config, log *slog.Logger) bool {
	iso, err := cfg.ObserveIsolation()
	if err != nil {
		log.Error("cannot observe the attester's isolation", "err", err)
		return false
	}
	log.Info("isolation observed at start", "attester_uid", iso.AttesterUID, "control_uids", iso.ControlUIDs,
		"control_uids_separate", iso.ControlUIDsSeparate, "socket_protected", iso.SocketProtected,
		"yama_ptrace_scope", iso.YamaPtraceScope, "ptrace_restricted", iso.PtraceRestricted)
	if err := cfg.CheckSocketLayout(); err != nil {
		if !cfg.Development {
			log.Error("refusing to start: the control socket's layout lets a control uid replace it", "err", err)
			return false
		}
		log.Warn("DEVELOPMENT ONLY: the control socket's layout lets a control uid replace it", "err", err)
	}
	return true
}
