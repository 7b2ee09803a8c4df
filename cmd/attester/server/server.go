// Package server is the attester service behind cmd/attester: identity,
// runs, the tool-call gate and execution attestations over stdlib net/http.
// It serves three surfaces: the public API on TCP (identity, health), the
// metrics listener, and the control API on a unix socket, where the peer's
// uid and a per-run capability authorize every request
// (docs/spec/attester-api.md).
package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/rebuild"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/sealed"
)

// Request size limits.
const (
	maxSmallBody    = 64 << 10
	maxToolCallBody = 1 << 20
	maxBundle       = 8 << 20
)

// Deps are what a Server is built from.
type Deps struct {
	Config *Config
	// GateConfig is the gate's configuration (ParseConfig).
	GateConfig *gate.Config
	Identity   *Identity
	Platform   detect.Platform
	// PlatformReport is what detection found; shown at /readyz.
	PlatformReport *detect.Report
	Logger         *slog.Logger
	Registry       *prometheus.Registry
	Now            func() time.Time
	// HTTPClient is used by the gate's external verifiers; nil means a
	// client with a 60 s timeout.
	HTTPClient *http.Client
	// TelegramAPIBase overrides the Bot API base URL (tests).
	TelegramAPIBase string
}

// Server is the attester service.
type Server struct {
	cfg      *Config
	id       *Identity
	platform detect.Platform
	report   *detect.Report
	log      *slog.Logger
	reg      *prometheus.Registry
	metrics  *metrics
	now      func() time.Time
	memOpts  sealed.Options
	ready    atomic.Bool
	runs     *runStore
	gate     *gateState
	uploads  *budget
	rebuild  *rebuild.Runner
	keyAtts  *keyAttestations
	// activations meters POST /v1/tpm/activate (tpmactivate.go).
	activations *tokenBucket
}

// withIssuer runs f with an attestation issuer holding a short-lived copy of
// the identity key.
func (s *Server) withIssuer(f func(*attestation.Issuer) error) error {
	return s.id.WithSigningKey(func(k ed25519.PrivateKey) error {
		return f(&attestation.Issuer{
			Key: k, Quoter: s.platform, Now: s.now,
			RecipientKey: s.id.PackKey.Public().Bytes(),
		})
	})
}

// New builds a Server.
func New(d Deps) (*Server, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
		d.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Server{
		cfg: d.Config, id: d.Identity, platform: d.Platform, report: d.PlatformReport,
		log: d.Logger, reg: d.Registry, now: d.Now,
		memOpts: sealed.Options{AllowUnlocked: d.Config.AllowUnlockedMemory},
		uploads: &budget{max: d.Config.UploadBudgetBytes},
	}
	s.metrics = newMetrics(d.Registry)
	s.keyAtts = newKeyAttestations(d.Now, s.produceKeyAttestation)
	s.activations = newTokenBucket(activationsPerSecond, activationBurst, d.Now)
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	gs, err := newGateState(d.GateConfig, gate.Options{
		HTTPClient: d.HTTPClient, TelegramAPIBase: d.TelegramAPIBase, Logger: d.Logger, Now: d.Now,
		MaxRuns: d.Config.MaxRuns,
	}, d.Config.StateDir)
	if err != nil {
		return nil, err
	}
	s.gate = gs
	// Packs are opened in worker processes that get the identity key as a
	// sealed descriptor (package rebuild).
	rb, err := rebuild.NewRunner(rebuild.Config{Key: d.Identity.PackKey, Memory: s.memOpts})
	if err != nil {
		_ = gs.close()
		return nil, err
	}
	s.rebuild = rb
	s.runs = newRunStore(d.Config.MaxRuns)
	s.ready.Store(true)
	return s, nil
}

// Close destroys every run's sealed prompt and closes the audit log.
func (s *Server) Close() {
	s.runs.closeAll()
	s.rebuild.Close()
	if err := s.gate.close(); err != nil {
		s.log.Error("closing the audit log", "err", err)
	}
}

// simulated reports whether the platform's evidence is simulated (the
// simulated platform, or a TPM reached over TCP).
func (s *Server) simulated() bool {
	return (s.report != nil && s.report.Simulated) || s.cfg.TPM.Address != ""
}

// maxCreateBody bounds POST /v1/runs: the pack in b64u plus the rest.
func (s *Server) maxCreateBody() int64 { return s.cfg.MaxPackBytes*4/3 + 4 + maxSmallBody }

// runHandler handles a request on an authorized run; body is the request
// body (nil for routes without one).
type runHandler func(w http.ResponseWriter, r *http.Request, rn *run, body []byte) error

// runRoute authorizes a /v1/runs/{id}/... request by its capability before
// anything else, then checks the Content-Type and reads the body (maxBody >
// 0) within its limits.
func (s *Server) runRoute(route string, maxBody int64, h runHandler) http.Handler {
	return s.wrap(route, func(w http.ResponseWriter, r *http.Request) error {
		capHash, err := parseBearer(r.Header.Get("Authorization"))
		if err != nil {
			return refuse(err)
		}
		rn, err := s.runs.authorize(r.PathValue("id"), capHash)
		if err != nil {
			return refuse(err)
		}
		var body []byte
		if maxBody > 0 {
			if err := checkContentType(r); err != nil {
				return refuse(err)
			}
			if body, err = readBody(w, r, maxBody, smallBodyTimeout); err != nil {
				return err
			}
		}
		return h(w, r, rn, body)
	})
}

// refuse marks an error returned before the body was read: the connection
// is closed instead of draining a body nobody may send.
func refuse(err error) error {
	var he *HTTPError
	if !errors.As(err, &he) {
		return err
	}
	c := *he
	c.closeConn = true
	return &c
}

// ControlHandler is the control API, served only on the control socket.
// Every request is refused (403) unless the peer's uid is in
// attester.controlUids, before routing and before any body is read.
func (s *Server) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/runs", s.wrap("runs_create", s.handleCreateRun))
	mux.Handle("GET /v1/runs/{id}/prompt", s.runRoute("prompt", 0, s.handlePrompt))
	mux.Handle("DELETE /v1/runs/{id}", s.runRoute("runs_close", 0, s.handleCloseRun))
	mux.Handle("POST /v1/runs/{id}/turns", s.runRoute("turns", maxSmallBody, s.handleTurn))
	mux.Handle("POST /v1/runs/{id}/verify", s.runRoute("verify", maxSmallBody, s.handleVerify))
	mux.Handle("POST /v1/runs/{id}/tool-calls", s.runRoute("tool_calls", maxToolCallBody, s.handleToolCall))
	mux.Handle("GET /v1/runs/{id}/audit", s.runRoute("audit", 0, s.handleAudit))
	mux.Handle("POST /v1/runs/{id}/attestation", s.runRoute("attestation", maxBundle, s.handleAttest))
	mux.Handle("GET /v1/gate/policy", s.wrap("gate_policy", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"policy_hash_b64u": s.gate.PolicyHash()})
		return nil
	}))
	s.fallback(mux)
	return s.wrapUID(mux)
}

// wrapUID refuses control requests whose peer uid is not allowed, and any
// request with an Origin header (a browser).
func (s *Server) wrapUID(next http.Handler) http.Handler {
	deny := s.wrap("control_denied", func(w http.ResponseWriter, r *http.Request) error {
		return refuse(httpErr(http.StatusForbidden, "this caller may not use the control API", nil))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(peerKey{}).(peer)
		_, allowed := s.cfg.uidAllow[p.uid]
		if !p.ok || !allowed || r.Header.Get("Origin") != "" {
			s.log.Warn("control request refused", "peer_uid_known", p.ok, "peer_uid", p.uid, "origin", r.Header.Get("Origin") != "")
			deny.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// PublicHandler is the public TCP API: identity, healthz, readyz, TPM
// credential activation (tpmactivate.go). The
// control routes answer 403 there, before any body is read.
func (s *Server) PublicHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.wrap("healthz", func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("GET /readyz", s.wrap("readyz", s.handleReady))
	mux.Handle("GET /v1/identity", s.wrap("identity", s.handleIdentity))
	s.tpmRoutes(mux)
	control := s.wrap("control_on_tcp", func(w http.ResponseWriter, r *http.Request) error {
		return refuse(httpErr(http.StatusForbidden, "the control API is served only on the control socket", nil))
	})
	for _, p := range []string{"/v1/runs", "/v1/runs/", "/v1/audit", "/v1/audit/", "/v1/gate/"} {
		mux.Handle(p, control)
	}
	s.fallback(mux)
	return mux
}

// MetricsHandler serves GET /metrics (its own listener).
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.fallback(mux)
	return mux
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
	if err := s.gate.audit.Healthy(); err != nil {
		return httpErr(http.StatusServiceUnavailable, "the gate cannot record decisions: every tool call would be denied", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status":    "ready",
		"platform":  s.platform.Platform(),
		"simulated": s.simulated(),
	})
	return nil
}

// Shutdown drains: readiness goes false so load balancers stop sending.
func (s *Server) Shutdown(ctx context.Context) { s.ready.Store(false) }

// budget bounds the bytes held by requests in flight.
type budget struct {
	mu   sync.Mutex
	max  int64
	used int64
}

// uploadCost is what one run creation of n body bytes may hold at once:
// the body, its parsed copy, the decoded pack and its plaintext.
func uploadCost(maxPack int64) int64 { return 4 * (maxPack*4/3 + 4 + maxSmallBody) }

// reserve takes the memory a body of contentLength bytes (or, unknown, of
// max bytes) will cost, or fails with 503 when the budget is spent.
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
