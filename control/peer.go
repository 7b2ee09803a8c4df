package control

import (
	"bytes"
	"errors"
	"strconv"
)

// peerCred is what the kernel says about the process at the other end of a
// control connection (SO_PEERCRED, at connect time), and when that process
// started, so that a pid reused by a later process is not mistaken for it.
type peerCred struct {
	// PID is the peer's process id in the attester's pid namespace (0 when
	// the peer is outside it).
	PID int
	UID int
	// StartTime is the peer's start time in clock ticks after boot
	// (/proc/PID/stat field 22), when StartTimeKnown: false when it could
	// not be read.
	StartTime      uint64
	StartTimeKnown bool
}

var errStat = errors.New("malformed /proc/PID/stat")

// statStartTime returns field 22 (starttime) of a /proc/PID/stat line. The
// second field, the command name in parentheses, may itself hold spaces
// and parentheses: the fields after it start after the last ')'.
func statStartTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || bytes.IndexByte(stat, '(') < 0 || bytes.IndexByte(stat, '(') > i {
		return 0, errStat
	}
	// Fields 3 onwards, separated by single spaces.
	fields := bytes.Fields(stat[i+1:])
	const startTime = 22 - 3
	if len(fields) <= startTime {
		return 0, errStat
	}
	v, err := strconv.ParseUint(string(fields[startTime]), 10, 64)
	if err != nil {
		return 0, errStat
	}
	return v, nil
}
