package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/wire/evidencedoc"
)

// What the attester observes of its isolation from the orchestrator
// (docs/spec/attestation-v1.md section 5.6): at start, where a layout in
// which a control uid can replace the control socket is refused outside
// development mode, and at each run creation, where the observation becomes
// the run's isolation claims. The attester cannot enforce this isolation;
// it states what it saw, once, when the run was created.

// peerCtxKey is the context key of a control request's peer.
type peerCtxKey struct{}

// ConnContext is the http.Server ConnContext of the control socket: it
// records the credentials of c's peer (SO_PEERCRED and its start time,
// readPeer) for the connection's requests, which AdmitCaller, Authorize
// and run creation read. A connection that is not a unix socket, or whose
// peer cannot be read, records nothing, and its requests are refused.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if uc, ok := c.(*net.UnixConn); ok {
		if p, ok := readPeer(uc); ok {
			return withPeer(ctx, p)
		}
	}
	return ctx
}

// withPeer returns ctx carrying the peer of the control connection it
// serves (ConnContext).
func withPeer(ctx context.Context, p peerCred) context.Context {
	return context.WithValue(ctx, peerCtxKey{}, p)
}

// peerFrom returns the peer ConnContext recorded; false when none was (not a
// unix socket, the credentials could not be read, or an in-process call).
func peerFrom(ctx context.Context) (peerCred, bool) {
	p, ok := ctx.Value(peerCtxKey{}).(peerCred)
	return p, ok
}

// socketWriterUID is a uid that can replace the control socket: it can write
// Dir, the socket's directory or a directory above it, and replace the
// entry on the socket's path there.
type socketWriterUID struct {
	UID int
	Dir string
}

// errSocketReplaceable is returned by checkSocketLayout (wrapped, with
// the uid and the directory named) when a control uid can replace the
// control socket.
var errSocketReplaceable = errors.New("control socket: a control uid can replace it")

// socketLayoutError names the uid and the directory w found: it wraps
// errSocketReplaceable.
func socketLayoutError(w socketWriterUID) error {
	return fmt.Errorf("%w: uid %d can write %s (the socket's directory or one above it); give every directory up to / to the attester or root, without group or other write for a group of a control uid", errSocketReplaceable, w.UID, w.Dir)
}

// dirInfo is what a writability check needs of one directory on the
// socket's path and of the entry below it.
type dirInfo struct {
	path       string
	mode       fs.FileMode
	uid, gid   int
	entryOwner int // owner of the entry of the socket's path in this directory
}

// isolationProbe observes the host. Its fields are the hooks tests replace
// (a temporary tree, a fake /proc, fixed groups).
type isolationProbe struct {
	// proc is the proc filesystem's mount point ("/proc").
	proc string
	// groups returns the gids of uid (primary and supplementary); ok is
	// false when the uid has no account, and then every group-writable
	// directory counts as writable by it.
	groups func(uid int) (gids []int, ok bool)
	// stat returns a directory's mode, owner and group.
	stat func(path string) (mode fs.FileMode, uid, gid int, err error)
}

func hostProbe() *isolationProbe {
	return &isolationProbe{proc: "/proc", groups: accountGroups, stat: lstatOwner}
}

// accountGroups looks uid's groups up in the account database.
func accountGroups(uid int) ([]int, bool) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil, false
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, false
	}
	ids = append(ids, u.Gid)
	var out []int
	for _, s := range ids {
		g, err := strconv.Atoi(s)
		if err != nil {
			return nil, false
		}
		out = append(out, g)
	}
	return out, true
}

// socketPath lists the directories from the socket's directory up to /,
// each with the owner of the entry of the path below it: for the path as
// configured and, when it differs, for the path with symlinks resolved.
func (p *isolationProbe) socketPath(socket string) ([]dirInfo, error) {
	paths := []string{socket}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(socket)); err == nil && dir != filepath.Dir(socket) {
		paths = append(paths, filepath.Join(dir, filepath.Base(socket)))
	}
	var out []dirInfo
	for _, path := range paths {
		entry := path
		_, entryUID, _, err := p.stat(entry)
		if err != nil {
			return nil, err
		}
		for dir := filepath.Dir(entry); dir != entry; entry, dir = dir, filepath.Dir(dir) {
			mode, uid, gid, err := p.stat(dir)
			if err != nil {
				return nil, err
			}
			out = append(out, dirInfo{path: dir, mode: mode, uid: uid, gid: gid, entryOwner: entryUID})
			entryUID = uid
		}
	}
	return out, nil
}

// canReplace reports whether uid can replace the entry below d: it can
// write d (root always; d's owner, who can chmod it; a member of d's group
// with group write, every uid without an account included; anyone with
// other write) and, in a sticky directory, owns d or the entry. POSIX
// permission bits only: ACLs and capabilities other than root's are not
// evaluated.
func (p *isolationProbe) canReplace(uid int, d dirInfo) bool {
	if uid == 0 || uid == d.uid {
		return true
	}
	writable := d.mode&0o002 != 0
	if !writable && d.mode&0o020 != 0 {
		gids, ok := p.groups(uid)
		writable = !ok
		for _, g := range gids {
			writable = writable || g == d.gid
		}
	}
	if !writable {
		return false
	}
	return d.mode&fs.ModeSticky == 0 || uid == d.entryOwner
}

// socketWriter returns a control uid other than the attester's own that
// can replace the socket, and the directory that lets it; false when none
// can. The attester's own uid is left out (it owns the socket's
// directory); whether it is a control uid is a claim of its own.
func (p *isolationProbe) socketWriter(socket string, attester int, controlUIDs []int) (socketWriterUID, bool, error) {
	dirs, err := p.socketPath(socket)
	if err != nil {
		return socketWriterUID{}, false, err
	}
	for _, d := range dirs {
		for _, u := range controlUIDs {
			if u != attester && p.canReplace(u, d) {
				return socketWriterUID{UID: u, Dir: d.path}, true, nil
			}
		}
	}
	return socketWriterUID{}, false, nil
}

// maxProcStatBytes bounds the read of /proc/PID/stat (as readPeer does).
const maxProcStatBytes = 4 << 10

// maxProcValueBytes bounds the read of a one-number /proc file.
const maxProcValueBytes = 64

// yamaPtraceScope reads kernel.yama.ptrace_scope: "0".."3", or
// evidencedoc.YamaAbsent when the file does not exist, or
// evidencedoc.YamaUnreadable.
func (p *isolationProbe) yamaPtraceScope() string {
	b, err := bounded.ReadFile(filepath.Join(p.proc, "sys/kernel/yama/ptrace_scope"), maxProcValueBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return evidencedoc.YamaAbsent
	}
	if err != nil {
		return evidencedoc.YamaUnreadable
	}
	switch v := strings.TrimSuffix(string(b), "\n"); v {
	case "0", "1", "2", "3":
		return v
	}
	return evidencedoc.YamaUnreadable
}

// pidNamespace says whether the peer is in the attester's pid namespace:
// a peer outside it has pid 0 (SO_PEERCRED); otherwise samePIDNamespace
// compares the namespaces, and the peer's start time is checked again so
// that a pid reused by another process is not taken for the peer.
func (p *isolationProbe) pidNamespace(peer peerCred) string {
	if peer.PID == 0 {
		return evidencedoc.PIDNamespaceOther
	}
	pid := strconv.Itoa(peer.PID)
	same, ok := p.samePIDNamespace(pid)
	if !ok {
		return evidencedoc.PIDNamespaceUnknown
	}
	if peer.StartTimeKnown {
		stat, err := bounded.ReadFile(filepath.Join(p.proc, pid, "stat"), maxProcStatBytes)
		if err != nil {
			return evidencedoc.PIDNamespaceUnknown
		}
		if got, err := statStartTime(stat); err != nil || got != peer.StartTime {
			return evidencedoc.PIDNamespaceUnknown
		}
	}
	if same {
		return evidencedoc.PIDNamespaceSame
	}
	return evidencedoc.PIDNamespaceOther
}

// samePIDNamespace compares the pid namespace of the process pid (visible
// to the attester, so in its namespace or one below it) with the
// attester's: by their /proc/PID/ns/pid links, or, where the attester may
// not read the peer's link (another uid: reading it needs ptrace access),
// by their depth, the number of pids on the NSpid lines of their
// /proc/PID/status, which every uid may read. A visible process at the
// attester's depth is in the attester's namespace. ok is false when neither
// could be read, or when /proc numbers the peer other than SO_PEERCRED did.
func (p *isolationProbe) samePIDNamespace(pid string) (same, ok bool) {
	self, err1 := os.Readlink(filepath.Join(p.proc, "self/ns/pid"))
	theirs, err2 := os.Readlink(filepath.Join(p.proc, pid, "ns/pid"))
	if err1 == nil && err2 == nil {
		return self == theirs, true
	}
	mine, err1 := p.nsPIDs("self")
	their, err2 := p.nsPIDs(pid)
	if err1 != nil || err2 != nil || their[0] != pid {
		return false, false
	}
	return len(mine) == len(their), true
}

// maxProcStatusBytes bounds the read of /proc/PID/status.
const maxProcStatusBytes = 16 << 10

// errNoNSpid: /proc/PID/status has no NSpid line (Linux before 4.1).
var errNoNSpid = errors.New("no NSpid line in /proc status")

// nsPIDs returns the pids on the NSpid line of /proc/<pid>/status: the
// process's pid in each pid namespace from /proc's down to its own.
func (p *isolationProbe) nsPIDs(pid string) ([]string, error) {
	b, err := bounded.ReadFile(filepath.Join(p.proc, pid, "status"), maxProcStatusBytes)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return f, nil
			}
			break
		}
	}
	return nil, errNoNSpid
}

// observe is what the attester sees of its isolation now, with the peer
// that asked (hasPeer false: none known). A socket layout that cannot be
// read counts as not protected.
func (p *isolationProbe) observe(socket string, attester int, controlUIDs []int, peer peerCred, hasPeer bool) (*evidencedoc.Isolation, error) {
	_, replaceable, err := p.socketWriter(socket, attester, controlUIDs)
	o := evidencedoc.IsolationObservation{
		AttesterUID:      int64(attester),
		SocketProtected:  err == nil && !replaceable,
		YamaPtraceScope:  p.yamaPtraceScope(),
		PeerUID:          -1,
		PeerPIDNamespace: evidencedoc.PIDNamespaceUnknown,
	}
	for _, u := range controlUIDs {
		o.ControlUIDs = append(o.ControlUIDs, int64(u))
	}
	if hasPeer {
		o.PeerUID, o.PeerPIDNamespace = int64(peer.UID), p.pidNamespace(peer)
	}
	return evidencedoc.NewIsolation(o)
}

// CheckIsolation records in log what the attester sees of its isolation
// at start (docs/spec/attestation-v1.md section 5.6) and refuses, outside
// development mode, a layout in which a control uid other than the
// attester's own can replace the control socket (write its directory or a
// directory above it): errSocketReplaceable, wrapped. In development mode that
// layout is only warned about. A layout it cannot read is an error too.
// The attester does not start on an error (already logged here).
func (c *Config) CheckIsolation(log *slog.Logger) error {
	iso, err := hostProbe().observe(c.ControlSocket, os.Geteuid(), c.ControlUIDs, peerCred{}, false)
	if err != nil {
		log.Error("cannot observe the attester's isolation", "err", err)
		return err
	}
	log.Info("isolation observed at start", "attester_uid", iso.AttesterUID, "control_uids", iso.ControlUIDs,
		"control_uids_separate", iso.ControlUIDsSeparate, "socket_protected", iso.SocketProtected,
		"yama_ptrace_scope", iso.YamaPtraceScope, "ptrace_restricted", iso.PtraceRestricted)
	if err := c.checkSocketLayout(); err != nil {
		if !c.Development {
			log.Error("refusing to start: the control socket's layout lets a control uid replace it", "err", err)
			return err
		}
		log.Warn("DEVELOPMENT ONLY: the control socket's layout lets a control uid replace it", "err", err)
	}
	return nil
}

// checkSocketLayout refuses a layout in which a control uid other than the
// attester's own can replace the control socket: errSocketReplaceable,
// wrapped (socketLayoutError). A
// layout it cannot read is an error too.
func (c *Config) checkSocketLayout() error {
	w, found, err := hostProbe().socketWriter(c.ControlSocket, os.Geteuid(), c.ControlUIDs)
	if err != nil {
		return fmt.Errorf("control socket: cannot read its directories: %w", err)
	}
	if found {
		return socketLayoutError(w)
	}
	return nil
}

// observeIsolation records what the attester sees of its isolation as the
// run is created, with the peer that asked (its uid and pid namespace):
// the run's isolation claims, observed once, here.
func (c *creation) observeIsolation(ctx context.Context) error {
	peer, ok := peerFrom(ctx)
	iso, err := hostProbe().observe(c.s.cfg.ControlSocket, os.Geteuid(), c.s.cfg.ControlUIDs, peer, ok)
	if err != nil {
		return fmt.Errorf("observing isolation: %w", err)
	}
	c.rn.isolation = iso
	return nil
}
