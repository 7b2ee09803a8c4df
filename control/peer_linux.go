//go:build linux

package control

import (
	"net"
	"strconv"
	"syscall"

	"github.com/clawea/attester/schema/bounded"
)

// readPeer reads the credentials of the process at the other end of c
// (SO_PEERCRED: set by the kernel at connect time) and that process's start
// time. ok is false when the credentials could not be read; a start time
// that cannot be read (the peer has exited, or is in another pid
// namespace) leaves only StartTime unknown.
func readPeer(c *net.UnixConn) (peerCred, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return peerCred{}, false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil || cred == nil {
		return peerCred{}, false
	}
	p := peerCred{PID: int(cred.Pid), UID: int(cred.Uid)}
	if p.PID > 0 {
		p.StartTime, p.StartTimeKnown = readStartTime(p.PID)
	}
	return p, true
}

// maxStatBytes bounds the read of /proc/PID/stat (52 numeric fields and a
// command name of at most 64 bytes).
const maxStatBytes = 4 << 10

func readStartTime(pid int) (uint64, bool) {
	b, err := bounded.ReadFile("/proc/"+strconv.Itoa(pid)+"/stat", maxStatBytes)
	if err != nil {
		return 0, false
	}
	v, err := statStartTime(b)
	return v, err == nil
}
