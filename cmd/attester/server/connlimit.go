package server

import (
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimiter bounds the connections one http.Server holds. Wrap the
// listener with Listener and set the server's ConnState to ConnState. When
// a new connection arrives at the limit, the oldest idle keep-alive
// connection is closed to make room; when none is idle (every slot is in a
// request, or still sending its headers), the new connection is closed at
// once instead of queueing. Slow senders lose their slot at the header or
// body deadline, so a flood delays other callers by at most that long and
// never holds the process's memory or file descriptors beyond the limit.
type ConnLimiter struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connSlot
	seq   uint64
	// refused counts connections closed at accept because every slot was
	// busy (guarded by mu); refusedMetric, when set, counts them too.
	refused       uint64
	refusedMetric prometheus.Counter
}

type connSlot struct {
	state http.ConnState
	since uint64 // when it last became idle (seq), for oldest-first
}

// NewConnLimiter returns a limiter of max connections (max >= 1).
func NewConnLimiter(max int) *ConnLimiter {
	return &ConnLimiter{max: max, conns: make(map[net.Conn]*connSlot, max)}
}

// ConnLimiter returns a limiter of attester.maxConnections for the named
// listener, counting refusals in clawea_connections_refused_total.
func (s *Server) ConnLimiter(listener string) *ConnLimiter {
	cl := NewConnLimiter(s.cfg.MaxConnections)
	cl.refusedMetric = s.metrics.connRefused.WithLabelValues(listener)
	return cl
}

// Listener wraps l: Accept returns only connections that got a slot.
func (cl *ConnLimiter) Listener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, cl: cl}
}

// ConnState tracks the connections' states (http.Server.ConnState).
func (cl *ConnLimiter) ConnState(c net.Conn, s http.ConnState) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	slot := cl.conns[c]
	if slot == nil {
		return
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(cl.conns, c)
	case http.StateIdle:
		cl.seq++
		slot.state, slot.since = s, cl.seq
	default:
		slot.state = s
	}
}

// Refused returns how many connections were closed at accept.
func (cl *ConnLimiter) Refused() uint64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.refused
}

// admit takes a slot for c, evicting the oldest idle connection if needed.
func (cl *ConnLimiter) admit(c net.Conn) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.conns) >= cl.max {
		var oldest net.Conn
		var at uint64
		for oc, s := range cl.conns {
			if s.state == http.StateIdle && (oldest == nil || s.since < at) {
				oldest, at = oc, s.since
			}
		}
		if oldest == nil {
			cl.refused++
			if cl.refusedMetric != nil {
				cl.refusedMetric.Inc()
			}
			return false
		}
		// The server sees the close on its next read and reports
		// StateClosed; the slot is free now.
		delete(cl.conns, oldest)
		oldest.Close()
	}
	cl.conns[c] = &connSlot{state: http.StateNew}
	return true
}

type limitListener struct {
	net.Listener
	cl *ConnLimiter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.cl.admit(c) {
			return c, nil
		}
		c.Close()
	}
}
