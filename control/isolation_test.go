package control

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/clawea/attester/wire/evidencedoc"
)

// layout is a socket at <tmp>/parent/ctl/attester.sock: ctl is 0750 (as
// ListenControlSocket requires), parent has the given mode.
func layout(t *testing.T, parentMode fs.FileMode) (socket, parent string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the socket layout is read on Linux only")
	}
	parent = filepath.Join(t.TempDir(), "parent")
	ctl := filepath.Join(parent, "ctl")
	if err := os.MkdirAll(ctl, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, parentMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ctl, 0o750); err != nil {
		t.Fatal(err)
	}
	socket = filepath.Join(ctl, "attester.sock")
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return socket, parent
}

// probe is a host probe whose uid other has the groups given (nil: no
// account) and which sees owner as the owner of the directories named.
func probe(other int, groups []int, owner map[string]int) *isolationProbe {
	return &isolationProbe{
		proc: "/proc",
		groups: func(uid int) ([]int, bool) {
			if uid == other && groups != nil {
				return groups, true
			}
			return nil, uid != other
		},
		stat: func(path string) (fs.FileMode, int, int, error) {
			m, u, g, err := lstatOwner(path)
			if o, ok := owner[path]; ok {
				u = o
			}
			return m, u, g, err
		},
	}
}

// TestSocketWriter: which control uid can replace the socket, walking from
// its directory up to /, with modes, groups, sticky bits and owners.
func TestSocketWriter(t *testing.T) {
	me := os.Geteuid()
	other := me + 1000
	gid := os.Getegid()
	for _, tc := range []struct {
		name    string
		mode    fs.FileMode
		groups  []int
		owner   bool // other owns parent
		uids    []int
		wantDir bool // parent is reported
	}{
		{"parent 0755: protected", 0o755, []int{gid}, false, []int{other}, false},
		{"parent 0777: others write it", 0o777, []int{gid + 1}, false, []int{other}, true},
		{"parent 01777: sticky, the entry is not theirs", 0o777 | fs.ModeSticky, []int{gid + 1}, false, []int{other}, false},
		{"parent 0775, a member of its group", 0o775, []int{gid}, false, []int{other}, true},
		{"parent 0775, not a member of its group", 0o775, []int{gid + 1}, false, []int{other}, false},
		{"parent 0775, a uid without an account", 0o775, nil, false, []int{other}, true},
		{"parent 0755 owned by the control uid", 0o755, []int{gid + 1}, true, []int{other}, true},
		{"root as a control uid", 0o755, nil, false, []int{0}, me != 0},
		{"only the attester's own uid", 0o777, nil, false, []int{me}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket, parent := layout(t, tc.mode)
			owners := map[string]int{}
			if tc.owner {
				owners[parent] = other
			}
			p := probe(other, tc.groups, owners)
			w, found, err := p.socketWriter(socket, me, tc.uids)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "root as a control uid" && found {
				// Root writes every directory: the first one reported is
				// the socket's own.
				if w.UID != 0 || w.Dir != filepath.Dir(socket) {
					t.Fatalf("got %+v", w)
				}
				return
			}
			if found != tc.wantDir || (found && (w.Dir != parent || w.UID != tc.uids[0])) {
				t.Fatalf("got %+v %v, want parent %s reported: %v", w, found, parent, tc.wantDir)
			}
			iso, err := p.observe(socket, me, tc.uids, peerCred{}, false)
			if err != nil {
				t.Fatal(err)
			}
			if iso.SocketProtected == found {
				t.Fatalf("socket_protected %v with writer %v", iso.SocketProtected, found)
			}
		})
	}
	// A layout that cannot be read is not protected.
	p := probe(other, nil, nil)
	if _, _, err := p.socketWriter(filepath.Join(t.TempDir(), "missing", "s.sock"), me, []int{other}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing socket: %v", err)
	}
	iso, err := p.observe(filepath.Join(t.TempDir(), "missing", "s.sock"), me, []int{other}, peerCred{}, false)
	if err != nil || iso.SocketProtected {
		t.Fatalf("unreadable layout: %+v %v", iso, err)
	}
}

// fakeProc is a /proc with Yama's ptrace_scope (absent when scope is "")
// and, for pid 42, a pid namespace link and a stat line.
func fakeProc(t *testing.T, scope, selfNS, peerNS string) string {
	t.Helper()
	proc := t.TempDir()
	if scope != "" {
		must(t, os.MkdirAll(filepath.Join(proc, "sys/kernel/yama"), 0o755))
		must(t, os.WriteFile(filepath.Join(proc, "sys/kernel/yama/ptrace_scope"), []byte(scope), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(proc, "self/ns"), 0o755))
	must(t, os.Symlink(selfNS, filepath.Join(proc, "self/ns/pid")))
	if peerNS != "" {
		must(t, os.MkdirAll(filepath.Join(proc, "42/ns"), 0o755))
		must(t, os.Symlink(peerNS, filepath.Join(proc, "42/ns/pid")))
		must(t, os.WriteFile(filepath.Join(proc, "42/stat"),
			[]byte("42 (node) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 23 24\n"), 0o644))
	}
	return proc
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestYamaPtraceScope: the value, or absent, or unreadable.
func TestYamaPtraceScope(t *testing.T) {
	for scope, want := range map[string]string{
		"1\n": "1", "0\n": "0", "3": "3", "": evidencedoc.YamaAbsent, "4\n": evidencedoc.YamaUnreadable, "one\n": evidencedoc.YamaUnreadable,
	} {
		p := &isolationProbe{proc: fakeProc(t, scope, "pid:[1]", "")}
		if got := p.yamaPtraceScope(); got != want {
			t.Errorf("ptrace_scope %q: got %q, want %q", scope, got, want)
		}
	}
}

// TestPeerPIDNamespace: same or other namespace by the links; pid 0 is
// outside; an unreadable link, or a pid now held by a process that started
// later than the peer, is unknown.
func TestPeerPIDNamespace(t *testing.T) {
	for _, tc := range []struct {
		name           string
		selfNS, peerNS string
		peer           peerCred
		want           string
	}{
		{"same", "pid:[4026531836]", "pid:[4026531836]", peerCred{PID: 42, UID: 1000, StartTime: 777, StartTimeKnown: true}, evidencedoc.PIDNamespaceSame},
		{"same, start time unknown", "pid:[1]", "pid:[1]", peerCred{PID: 42, UID: 1000}, evidencedoc.PIDNamespaceSame},
		{"other", "pid:[4026531836]", "pid:[4026532999]", peerCred{PID: 42, UID: 1000, StartTime: 777, StartTimeKnown: true}, evidencedoc.PIDNamespaceOther},
		{"outside (pid 0)", "pid:[1]", "", peerCred{PID: 0, UID: 1000}, evidencedoc.PIDNamespaceOther},
		{"exited", "pid:[1]", "", peerCred{PID: 42, UID: 1000}, evidencedoc.PIDNamespaceUnknown},
		{"pid reused", "pid:[1]", "pid:[1]", peerCred{PID: 42, UID: 1000, StartTime: 700, StartTimeKnown: true}, evidencedoc.PIDNamespaceUnknown},
	} {
		p := &isolationProbe{proc: fakeProc(t, "1", tc.selfNS, tc.peerNS)}
		if got := p.pidNamespace(tc.peer); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPeerPIDNamespaceByDepth: where the peer's namespace link cannot be
// read (another uid, as in the recommended layout), the NSpid lines of
// /proc/PID/status decide: the attester's depth is its namespace, a deeper
// one another; a status without NSpid, or one that numbers the peer other
// than SO_PEERCRED did, is unknown, and so is a reused pid.
func TestPeerPIDNamespaceByDepth(t *testing.T) {
	peer := peerCred{PID: 42, UID: 1000, StartTime: 777, StartTimeKnown: true}
	for _, tc := range []struct {
		name, self, theirs string
		peer               peerCred
		want               string
	}{
		{"same depth", "NSpid:\t7\n", "NSpid:\t42\n", peer, evidencedoc.PIDNamespaceSame},
		{"same depth, both nested", "NSpid:\t7\t1\n", "NSpid:\t42\t3\n", peer, evidencedoc.PIDNamespaceSame},
		{"a namespace below", "NSpid:\t7\n", "NSpid:\t42\t1\n", peer, evidencedoc.PIDNamespaceOther},
		{"numbered otherwise", "NSpid:\t7\n", "NSpid:\t43\n", peer, evidencedoc.PIDNamespaceUnknown},
		{"no NSpid", "NSpid:\t7\n", "Uid:\t1000\n", peer, evidencedoc.PIDNamespaceUnknown},
		{"empty NSpid", "NSpid:\t7\n", "NSpid:\n", peer, evidencedoc.PIDNamespaceUnknown},
		{"pid reused", "NSpid:\t7\n", "NSpid:\t42\n", peerCred{PID: 42, UID: 1000, StartTime: 700, StartTimeKnown: true}, evidencedoc.PIDNamespaceUnknown},
	} {
		proc := fakeProc(t, "1", "pid:[1]", "")
		must(t, os.MkdirAll(filepath.Join(proc, "42"), 0o755))
		must(t, os.WriteFile(filepath.Join(proc, "self/status"), []byte("Name:\tattester\n"+tc.self+"Uid:\t0\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(proc, "42/status"), []byte("Name:\tnode\n"+tc.theirs), 0o644))
		must(t, os.WriteFile(filepath.Join(proc, "42/stat"),
			[]byte("42 (node) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 23 24\n"), 0o644))
		p := &isolationProbe{proc: proc}
		if got := p.pidNamespace(tc.peer); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestObserveIsolation: the claims of one observation with a peer, and
// without one (an in-process call).
func TestObserveIsolation(t *testing.T) {
	socket, _ := layout(t, 0o755)
	me := os.Geteuid()
	p := probe(me+1000, []int{}, nil)
	p.proc = fakeProc(t, "1\n", "pid:[1]", "pid:[1]")
	iso, err := p.observe(socket, me, []int{me + 1000}, peerCred{PID: 42, UID: me + 1000, StartTime: 777, StartTimeKnown: true}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := evidencedoc.Isolation{
		Version: "clawea.dev/isolation/v1", ObservedAt: evidencedoc.ObservedAtRunCreation,
		AttesterUID: int64(me), ControlUIDs: []int64{int64(me + 1000)}, ControlUIDsSeparate: true, SocketProtected: true,
		YamaPtraceScope: "1", PtraceRestricted: true, PeerUID: int64(me + 1000), PeerUIDSeparate: true,
		PeerPIDNamespace: evidencedoc.PIDNamespaceSame, PeerSamePIDNamespace: true,
	}
	if !reflect.DeepEqual(*iso, want) {
		t.Fatalf("got %+v\nwant %+v", *iso, want)
	}
	iso, err = p.observe(socket, me, []int{me}, peerCred{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if iso.ControlUIDsSeparate || iso.PeerUID != -1 || iso.PeerUIDSeparate || iso.PeerPIDNamespace != evidencedoc.PIDNamespaceUnknown || iso.PeerSamePIDNamespace {
		t.Fatalf("own uid, no peer: %+v", *iso)
	}
}
