package server

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ConnLimiter bounds the connections one http.Server holds. Wrap the
// listener with Listener and set the server's ConnState to ConnState. When
// a new connection arrives at the limit, the oldest idle keep-alive
// connection is closed to make room; when none is idle (every slot is in a
// request, or still sending its headers), the new connection is closed at
// once instead of queueing. A connection taken over from net/http keeps
// its slot until Server.releaseConn. Slow senders lose their slot at the header or
// body deadline, so a flood delays other callers by at most that long and
// never holds the process's memory or file descriptors beyond the limit.
type ConnLimiter struct {
	max int
	// mu serializes admissions and removals: n and the set of keys in
	// conns change only under it. A connection's state changes (twice per
	// request) take no lock: conns is read lock-free and a slot's fields
	// are atomic.
	mu    sync.Mutex
	n     int
	conns sync.Map // net.Conn -> *connSlot
	seq   atomic.Uint64
	// refused counts connections closed at accept because every slot was
	// busy (guarded by mu); refusedMetric, when set, counts them too.
	refused       uint64
	refusedMetric prometheus.Counter
}

type connSlot struct {
	state atomic.Int32  // http.ConnState
	since atomic.Uint64 // when it last became idle (seq), for oldest-first
}

// NewConnLimiter returns a limiter of max connections (max >= 1).
func NewConnLimiter(max int) *ConnLimiter {
	return &ConnLimiter{max: max}
}

// ConnLimiter returns a limiter of attester.maxConnections for the named
// listener, counting refusals in clawea_connections_refused_total.
func (s *Server) ConnLimiter(listener string) *ConnLimiter {
	cl := NewConnLimiter(s.cfg.MaxConnections)
	cl.refusedMetric = s.metrics.connRefused.WithLabelValues(listener)
	s.limMu.Lock()
	s.limiters = append(s.limiters, cl)
	s.limMu.Unlock()
	return cl
}

// eachLimiter calls f with each of s's limiters.
func (s *Server) eachLimiter(f func(*ConnLimiter)) {
	s.limMu.Lock()
	ls := s.limiters
	s.limMu.Unlock()
	for _, cl := range ls {
		f(cl)
	}
}

// releaseConn closes a connection taken over from net/http (Hijack) and
// frees its slot.
func (s *Server) releaseConn(c net.Conn) {
	c.Close()
	s.eachLimiter(func(cl *ConnLimiter) { cl.remove(c) })
}

// connBusy marks a framed connection as serving requests (busy) or
// waiting for one (idle: the oldest such may be closed to make room, like
// an idle keep-alive connection).
func (s *Server) connBusy(c net.Conn, busy bool) {
	s.eachLimiter(func(cl *ConnLimiter) {
		v, ok := cl.conns.Load(c)
		if !ok {
			return
		}
		slot := v.(*connSlot)
		if busy {
			slot.state.Store(int32(http.StateActive))
			return
		}
		slot.since.Store(cl.seq.Add(1))
		slot.state.Store(int32(http.StateIdle))
	})
}

// remove frees c's slot, if it holds one.
func (cl *ConnLimiter) remove(c net.Conn) {
	cl.mu.Lock()
	if _, ok := cl.conns.LoadAndDelete(c); ok {
		cl.n--
	}
	cl.mu.Unlock()
}

// Listener wraps l: Accept returns only connections that got a slot.
func (cl *ConnLimiter) Listener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, cl: cl}
}

// ConnState tracks the connections' states (http.Server.ConnState).
func (cl *ConnLimiter) ConnState(c net.Conn, s http.ConnState) {
	v, ok := cl.conns.Load(c)
	if !ok {
		return
	}
	slot := v.(*connSlot)
	switch s {
	case http.StateClosed:
		cl.remove(c)
	case http.StateHijacked:
		// The handler that took it over frees the slot when it closes it
		// (Server.releaseConn); until then it is busy.
		slot.state.Store(int32(http.StateActive))
	case http.StateIdle:
		slot.since.Store(cl.seq.Add(1))
		slot.state.Store(int32(s))
	default:
		slot.state.Store(int32(s))
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
	if cl.n >= cl.max {
		var oldest net.Conn
		var at uint64
		cl.conns.Range(func(k, v any) bool {
			s := v.(*connSlot)
			if since := s.since.Load(); http.ConnState(s.state.Load()) == http.StateIdle && (oldest == nil || since < at) {
				oldest, at = k.(net.Conn), since
			}
			return true
		})
		if oldest == nil {
			cl.refused++
			if cl.refusedMetric != nil {
				cl.refusedMetric.Inc()
			}
			return false
		}
		// The server sees the close on its next read and reports
		// StateClosed; the slot is free now.
		cl.conns.Delete(oldest)
		cl.n--
		oldest.Close()
	}
	slot := &connSlot{}
	slot.state.Store(int32(http.StateNew))
	cl.conns.Store(c, slot)
	cl.n++
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
