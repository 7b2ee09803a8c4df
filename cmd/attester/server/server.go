// Package server is the attester's HTTP surface over its control plane
// (package control), on stdlib net/http: handlers translate HTTP requests
// to control calls and control refusals to statuses. It serves three
// surfaces: the public API on TCP (identity, health, TPM credential
// activation), the metrics listener, and the control API on a unix socket,
// where the peer's uid and a per-run capability authorize every request
// (docs/spec/attester-api.md).
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/control/frames"
)

// Request size limits.
const (
	maxToolCallBody = 1 << 20
	maxBundle       = 8 << 20
	// maxActivateBody bounds POST /v1/tpm/activate: the largest challenge
	// (tpmcred limits) in b64u is about 1.2 KiB.
	maxActivateBody = 4 << 10
)

// Server serves a control.Service over HTTP.
type Server struct {
	svc     *control.Service
	cfg     *control.Config
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics
	ready   atomic.Bool
	uploads *budget
	// limiters are the listeners' connection limiters (ConnLimiter): a
	// connection taken over from net/http (the prompt, frames) keeps its
	// slot until releaseConn.
	limMu    sync.Mutex
	limiters []*ConnLimiter
	// framed are the framed control connections (frames.go,
	// control/frames).
	framed frames.Group
}

// Wrap serves svc; reg is the registry /metrics serves, which svc's
// counters were registered with. Close closes svc.
func Wrap(svc *control.Service, reg *prometheus.Registry, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		svc: svc, cfg: svc.Config(), log: log, reg: reg,
		uploads: &budget{max: svc.Config().UploadBudgetBytes},
	}
	s.metrics = newMetrics(reg)
	s.ready.Store(true)
	return s
}

// Service is the control plane s serves.
func (s *Server) Service() *control.Service { return s.svc }

// Close closes the control plane: every run's sealed prompt is destroyed
// and the audit log closed.
func (s *Server) Close() { s.svc.Close() }

// ControlHandler is the control API, served only on the control socket.
// Every request is refused (403) unless the peer's uid is in
// attester.controlUids, before routing and before any body is read.
func (s *Server) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/runs", s.wrap("runs_create", s.handleCreateRun))
	mux.Handle("GET /v1/runs/{id}/prompt", s.runRoute("prompt", 0, s.handlePrompt))
	mux.Handle("DELETE /v1/runs/{id}", s.runRoute("runs_close", 0, s.handleCloseRun))
	mux.Handle("POST /v1/runs/{id}/turns", s.runRoute("turns", control.MaxSmallBody, s.handleTurn))
	mux.Handle("POST /v1/runs/{id}/verify", s.runRoute("verify", control.MaxSmallBody, s.handleVerify))
	mux.Handle("POST /v1/runs/{id}/tool-calls", s.runRoute("tool_calls", maxToolCallBody, s.handleToolCall))
	mux.Handle("GET /v1/runs/{id}/audit", s.runRoute("audit", 0, s.handleAudit))
	mux.Handle("POST /v1/runs/{id}/model/{provider}/{api}", s.runRoute("model", 0, s.handleModel))
	mux.Handle("POST /v1/runs/{id}/attestation", s.runRoute("attestation", maxBundle, s.handleAttest))
	mux.Handle("GET /v1/gate/policy", s.wrap("gate_policy", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"policy_hash_b64u": s.svc.Status().PolicyHash})
		return nil
	}))
	s.fallback(mux)
	// Framed requests (frames.go) pass the same checks and routes, but
	// for the routes served only over HTTP.
	framed := s.wrapUID(s.cleanPathsOnly(s.framedOnly(mux)))
	mux.Handle("GET "+framesPath, s.wrap("frames", s.handleFrames(framed)))
	return s.wrapUID(s.cleanPathsOnly(mux))
}

// wrapUID refuses control requests whose peer uid is not allowed, any
// request with an Origin header (a browser), and requests from a process
// the attester cannot identify (pid or start time unknown: runs are bound
// to processes): control.Config.AdmitCaller.
func (s *Server) wrapUID(next http.Handler) http.Handler {
	deny := s.wrap("control_denied", func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Origin") != "" {
			return refuse(httpErr(http.StatusForbidden, "this caller may not use the control API", errors.New("a request with an Origin header")))
		}
		return refuse(s.cfg.AdmitCaller(r.Context()))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" || s.cfg.AdmitCaller(r.Context()) != nil {
			deny.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// PublicHandler is the public TCP API: identity, healthz, readyz, TPM
// credential activation (tpm.go). The control routes answer 403 there,
// before any body is read.
func (s *Server) PublicHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.wrap("healthz", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("GET /readyz", s.wrap("readyz", s.handleReady))
	mux.Handle("GET /v1/identity", s.wrap("identity", s.handleIdentity))
	mux.Handle("GET /v1/tpm/ek", s.wrap("tpm_ek", s.handleTPMEK))
	mux.Handle("POST /v1/tpm/activate", s.wrap("tpm_activate", s.handleTPMActivate))
	ctl := s.wrap("control_on_tcp", func(w http.ResponseWriter, r *http.Request) error {
		return refuse(httpErr(http.StatusForbidden, "the control API is served only on the control socket", nil))
	})
	for _, p := range []string{"/v1/runs", "/v1/runs/", "/v1/audit", "/v1/audit/", "/v1/gate/", framesPath} {
		mux.Handle(p, ctl)
	}
	s.fallback(mux)
	return s.cleanPathsOnly(mux)
}

// MetricsHandler serves GET /metrics (its own listener).
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.fallback(mux)
	return s.cleanPathsOnly(mux)
}

// cleanPathsOnly refuses (403) a request whose path is not in clean form
// ("//v1/runs", "/v1//runs", "/./v1/runs", "/x/../v1/runs"): http.ServeMux
// would answer it with a redirect to the clean path, so a control route
// reached through such a path on TCP would get a 307 instead of the 403
// the API specifies, and no listener should route by a path it rewrote.
func (s *Server) cleanPathsOnly(next http.Handler) http.Handler {
	refused := s.wrap("unclean_path", func(w http.ResponseWriter, r *http.Request) error {
		return refuse(httpErr(http.StatusForbidden, "the request path is not in clean form", nil))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cleanPath(r.URL.Path) {
			refused.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath reports whether p is an absolute path that path.Clean leaves
// as it is, but for one trailing slash.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	trimmed := p
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		trimmed = p[:len(p)-1]
	}
	return path.Clean(trimmed) == trimmed
}

// fallback makes unknown routes a JSON 404 and known routes with another
// method a JSON 405 (with Allow), like every other error.
func (s *Server) fallback(mux *http.ServeMux) {
	mux.Handle("/", s.wrap("unknown", func(w http.ResponseWriter, r *http.Request) error {
		var allow []string
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if m == r.Method {
				continue
			}
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pat := mux.Handler(probe); pat != "/" && pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			return refuse(&HTTPError{Code: http.StatusMethodNotAllowed, Msg: "method not allowed", allow: strings.Join(allow, ", ")})
		}
		return refuse(httpErr(http.StatusNotFound, "no such route", nil))
	}))
}

// SetReady marks the service ready or draining.
func (s *Server) SetReady(v bool) { s.ready.Store(v) }

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return httpErr(http.StatusServiceUnavailable, "draining", nil)
	}
	if err := s.svc.AuditHealthy(); err != nil {
		return httpErr(http.StatusServiceUnavailable, "the gate cannot record decisions: every tool call would be denied", err)
	}
	st := s.svc.Status()
	writeJSON(w, http.StatusOK, map[string]any{
		"status":    "ready",
		"platform":  st.Platform,
		"simulated": st.Simulated,
	})
	return nil
}

// Shutdown drains: readiness goes false, the framed connections stop
// reading and no new one is accepted (as when the control socket's
// http.Server shuts down, whose Shutdown does not wait for them: they were
// hijacked), and it waits until ctx ends for them to answer what is in
// flight and close, so that no framed request meets a closed service.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	return s.framed.Shutdown(ctx)
}

// budget bounds the bytes held by requests in flight.
type budget struct {
	mu   sync.Mutex
	max  int64
	used int64
}

// reserve takes the memory a body of contentLength bytes (or, unknown, of
// max bytes) will cost (the body, its parsed copy, the decoded pack and its
// plaintext), or fails with 503 when the budget is spent.
func (b *budget) reserve(contentLength, max int64) (func(), error) {
	n := max
	if contentLength >= 0 && contentLength < max {
		n = contentLength
	}
	cost := 4 * n
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+cost > b.max {
		return nil, refuse(&HTTPError{Code: http.StatusServiceUnavailable, Msg: "too many pack uploads in progress; retry later"})
	}
	b.used += cost
	return func() {
		b.mu.Lock()
		b.used -= cost
		b.mu.Unlock()
	}, nil
}
