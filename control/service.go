// Package control is the attester's control plane: the run lifecycle
// (a prompt pack opened in a worker process, the rebuilt prompt in sealed
// memory), run capabilities, commitment events, the run-time facts an
// admission policy obliges, the tool-call gate with its durable audit log,
// the attester identity, key attestations and TPM credential activation.
//
// It has no transport: cmd/attester translates HTTP to these calls and
// back, and the demo and tests call them directly. Refusals are *Error
// values whose Status the surface reports and whose Msg is safe to
// show (docs/spec/attester-api.md).
package control

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/sealed"
)

// Deps are what a Service is built from.
type Deps struct {
	Config *Config
	// GateConfig is the gate's configuration (ParseConfigWith).
	GateConfig *gate.Config
	Identity   *Identity
	Platform   detect.Platform
	// PlatformReport is what detection found.
	PlatformReport *detect.Report
	// GPUs produce GPU evidence beside the platform's (attester.gpu).
	GPUs   []enclave.Quoter
	Logger *slog.Logger
	// Registerer receives the control plane's counters (packs, gate
	// decisions, attestations); nil registers them nowhere.
	Registerer prometheus.Registerer
	Now        func() time.Time
	// HTTPClient is used by the gate's external verifiers; nil means a
	// client with a 60 s timeout.
	HTTPClient *http.Client
	// TelegramAPIBase overrides the Bot API base URL (tests).
	TelegramAPIBase string
}

// Service is the attester's control plane.
type Service struct {
	cfg      *Config
	id       *Identity
	platform detect.Platform
	report   *detect.Report
	gpus     []enclave.Quoter
	log      *slog.Logger
	metrics  *metrics
	now      func() time.Time
	memOpts  sealed.Options
	runs     *runStore
	gate     *gateState
	rebuild  packOpener
	keyAtts  *keyAttestations
	// answers signs control answers with the identity key (binding.go).
	answers signer
	// activations meters TPM credential activations (tpmactivate.go).
	activations *tokenBucket
	// gw is the model gateway (modelcall.go); gwTmp its temporary audit
	// directory when there is no stateDir.
	gw    *gateway.Gateway
	gwTmp string
}

// packOpener opens a pack and rebuilds its prompt away from the service's
// heap, into sealed memory: the rebuild worker (rebuilder, rebuild.go).
type packOpener interface {
	run(ctx context.Context, req rebuildRequest) (*rebuildResult, error)
	close()
}

var _ packOpener = (*rebuilder)(nil)

// New builds a Service.
func New(d Deps) (*Service, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Service{
		cfg: d.Config, id: d.Identity, platform: d.Platform, report: d.PlatformReport, gpus: d.GPUs,
		log: d.Logger, now: d.Now, answers: answerSigner{Identity: d.Identity},
		memOpts: sealed.Options{AllowUnlocked: d.Config.AllowUnlockedMemory},
	}
	s.metrics = newMetrics(d.Registerer)
	s.keyAtts = newKeyAttestations(d.Now, s.produceKeyAttestation)
	s.activations = newTokenBucket(activationsPerSecond, activationBurst, d.Now)
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	gs, err := newGateState(d.GateConfig, gate.Options{
		HTTPClient: d.HTTPClient, TelegramAPIBase: d.TelegramAPIBase, Logger: d.Logger, Now: d.Now,
		MaxRuns: d.Config.MaxRuns,
	}, d.Config.StateDir, d.Identity)
	if err != nil {
		return nil, err
	}
	s.gate = gs
	// Packs are opened in worker processes that get the identity key as a
	// sealed descriptor (rebuild.go).
	rb, err := newRebuilder(rebuildConfig{Key: d.Identity.PackKey, Memory: s.memOpts})
	if err != nil {
		_ = gs.close()
		return nil, err
	}
	s.rebuild = rb
	s.runs = newRunStore(d.Config.MaxRuns)
	if err := newGateway(s, d.Config); err != nil {
		_ = gs.close()
		return nil, err
	}
	return s, nil
}

// Close destroys every run's sealed prompt and closes the audit log.
func (s *Service) Close() {
	s.runs.closeAll()
	s.rebuild.close()
	if err := s.gate.close(); err != nil {
		s.log.Error("closing the audit log", "err", err)
	}
	if s.gwTmp != "" {
		_ = os.RemoveAll(s.gwTmp)
	}
}

// Config is the configuration the service runs with.
func (s *Service) Config() *Config { return s.cfg }

// serviceStatus is what the service reports about itself at one moment.
type serviceStatus struct {
	// Platform names the platform the attester quotes with; Simulated says
	// whether its evidence is simulated (the simulated platform, or a TPM
	// reached over TCP).
	Platform  string
	Simulated bool
	// PolicyHash is the gate policy's hash.
	PolicyHash string
	// OpenRuns is the number of open runs.
	OpenRuns int
}

// Status reports the service's platform, gate policy and open runs (cheap
// to read: AuditHealthy, which takes the audit log's lock, is apart).
func (s *Service) Status() serviceStatus {
	platform, simulated := s.platformName()
	return serviceStatus{Platform: platform, Simulated: simulated, PolicyHash: s.gate.PolicyHash(), OpenRuns: s.runs.open()}
}

// AuditHealthy reports why the gate cannot record decisions, or nil: while
// it cannot, every tool call is denied.
func (s *Service) AuditHealthy() error { return s.gate.audit.Healthy() }

// platformName names the platform the attester quotes with, and whether
// its evidence is simulated.
func (s *Service) platformName() (name string, simulated bool) {
	return s.platform.Platform(), (s.report != nil && s.report.Simulated) || s.cfg.TPM.Address != ""
}

// withIssuer runs f with an attestation issuer that signs with the
// identity's sealed signer.
func (s *Service) withIssuer(f func(*attestation.Issuer) error) error {
	return f(&attestation.Issuer{
		Key: s.id.Signer, Quoter: s.platform, Now: s.now, GPUs: s.gpus,
		RecipientKey: s.id.PackKey.Public().Bytes(),
	})
}

// metrics are the control plane's counters.
type metrics struct {
	packs        *prometheus.CounterVec
	decisions    *prometheus.CounterVec
	attestations *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		packs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_packs_total", Help: "Prompt packs opened, by outcome (accepted, refused).",
		}, []string{"outcome"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_gate_decisions_total", Help: "Tool-call gate decisions by deciding stage and outcome.",
		}, []string{"stage", "outcome"}),
		attestations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_attestations_total", Help: "Execution attestations by outcome (issued, refused, error).",
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.packs, m.decisions, m.attestations)
	}
	return m
}
