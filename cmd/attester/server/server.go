// Package server is the attester service behind cmd/attester: identity,
// runs, the tool-call gate and execution attestations over a stdlib
// net/http API, plus the unix socket that serves the rebuilt prompt to the
// co-located agent.
package server

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/sealed"
)

// Request size limits.
const (
	maxSmallBody = 64 << 10
	maxBundle    = 8 << 20
)

// Deps are what a Server is built from.
type Deps struct {
	Config *Config
	// GateConfig holds the OpenClaw sections (agents, tools) for the gate.
	GateConfig map[string]json.RawMessage
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
	}
	s.metrics = newMetrics(d.Registry)
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	gs, err := newGateState(d.GateConfig, gate.Options{
		HTTPClient: d.HTTPClient, TelegramAPIBase: d.TelegramAPIBase, Logger: d.Logger, Now: d.Now,
	}, d.Config.Development, d.Config.StateDir)
	if err != nil {
		return nil, err
	}
	s.gate = gs
	s.runs = &runStore{runs: map[string]*run{}, max: d.Config.MaxRuns}
	s.ready.Store(true)
	return s, nil
}

// Close destroys every run's sealed prompt and closes the audit log.
func (s *Server) Close() {
	s.runs.closeAll()
	if err := s.gate.close(); err != nil {
		s.log.Error("closing the audit log", "err", err)
	}
}

func (s *Server) routes(mux *http.ServeMux) {
	maxRun := s.cfg.MaxPackBytes*4/3 + maxSmallBody
	mux.Handle("POST /v1/runs", s.wrap("runs_create", maxRun, s.handleCreateRun))
	mux.Handle("DELETE /v1/runs/{id}", s.wrap("runs_close", 0, s.handleCloseRun))
	mux.Handle("POST /v1/runs/{id}/turns", s.wrap("turns", maxSmallBody, s.handleTurn))
	mux.Handle("POST /v1/runs/{id}/verify", s.wrap("verify", maxSmallBody, s.handleVerify))
	mux.Handle("POST /v1/runs/{id}/tool-calls", s.wrap("tool_calls", 1<<20, s.handleToolCall))
	mux.Handle("POST /v1/runs/{id}/attestation", s.wrap("attestation", maxBundle, s.handleAttest))
	mux.Handle("GET /v1/runs/{id}/audit", s.wrap("audit", 0, s.handleAudit))
	mux.Handle("GET /v1/gate/policy", s.wrap("gate_policy", 0, func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"policy_hash_b64u": s.gate.PolicyHash()})
		return nil
	}))
}

// AgentHandler is served only on the agent's unix socket: the rebuilt prompt
// never travels over TCP.
func (s *Server) AgentHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/runs/{id}/prompt", s.wrap("agent_prompt", 0, s.handlePrompt))
	return mux
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", s.wrap("healthz", 0, func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("GET /readyz", s.wrap("readyz", 0, s.handleReady))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /v1/identity", s.wrap("identity", 0, s.handleIdentity))
	s.routes(mux)
	return mux
}

// SetReady marks the service ready or draining.
func (s *Server) SetReady(v bool) { s.ready.Store(v) }

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if !s.ready.Load() {
		return httpErr(http.StatusServiceUnavailable, "draining", nil)
	}
	if err := s.gate.audit.Healthy(); err != nil {
		return httpErr(http.StatusServiceUnavailable, "the gate cannot record decisions", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status":    "ready",
		"platform":  s.platform.Platform(),
		"simulated": s.report != nil && s.report.Simulated,
	})
	return nil
}

// Shutdown drains: readiness goes false so load balancers stop sending.
func (s *Server) Shutdown(ctx context.Context) { s.ready.Store(false) }
