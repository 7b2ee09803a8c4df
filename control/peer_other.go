//go:build !linux

package control

import "net"

// ReadPeer is only implemented on Linux; elsewhere no peer is known and
// every control request is refused (fail closed).
func ReadPeer(*net.UnixConn) (Peer, bool) { return Peer{}, false }
