//go:build !linux

package control

import "net"

// readPeer is only implemented on Linux; elsewhere no peer is known and
// every control request is refused (fail closed).
func readPeer(*net.UnixConn) (peerCred, bool) { return peerCred{}, false }
