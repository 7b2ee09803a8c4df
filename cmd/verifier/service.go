package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/verify/platform"
)

// Defaults of Config.
const (
	DefaultMaxBody     = 16 << 20
	DefaultMaxInflight = 128
)

// DefaultGCPercent is the binary's garbage collector target (--gc-percent).
// A verification allocates about 0.4 MiB and keeps almost nothing, so with
// Go's default of 100 and a live heap of a few MiB the collector runs
// about a hundred times a second at 1,000 verifications per second; 400
// cuts CPU per verification by about 15% for a heap about five times the
// live one. GOMEMLIMIT still applies.
const DefaultGCPercent = 400

// buildPrefix starts the EAR verifier-id build of this service; the
// binary's version follows it (Config.Version).
const buildPrefix = "clawea-verifier/"

// Config configures a Service.
type Config struct {
	Sources sources
	// Signer signs the EARs (earresult.ParseSigningKey).
	Signer crypto.Signer
	// PreviousKeys are public keys of earlier EAR signing keys, still
	// published (GET /.well-known/jwks.json) so that EARs they signed
	// verify after a rotation; they sign nothing.
	PreviousKeys []crypto.PublicKey
	// Version is the binary's version, the EAR's ear.verifier-id.build
	// (after "clawea-verifier/") and the discovery document's version.
	Version string
	// Now is the clock; required.
	Now func() time.Time
	// MaxBody bounds a request body; 0 means DefaultMaxBody.
	MaxBody int
	// MaxInflight bounds the verifications served at once (and so the
	// memory bodies hold, MaxInflight x MaxBody); more get 503. 0 means
	// DefaultMaxInflight.
	MaxInflight int
	// CacheSize bounds the SEV-SNP chain cache (platform.CertCache.MaxEntries).
	CacheSize int
	Log       *slog.Logger
}

// Service is the stateless verifier: a configuration snapshot swapped
// atomically on reload, a chain cache, and metrics.
type Service struct {
	cfg     Config
	signer  *earresult.Signer
	keys    *keyDocs
	cache   *platform.CertCache
	metrics *metrics
	snap    atomic.Pointer[snapshot]
	slots   chan struct{} // one per verification in flight

	reloadMu  sync.Mutex // one reload at a time
	lastError atomic.Pointer[string]
}

// NewService loads the configuration once; an error there is fatal.
func NewService(cfg Config) (*Service, error) {
	if cfg.Now == nil || cfg.Signer == nil || cfg.Log == nil {
		return nil, errors.New("verifier: Now, Signer and Log are required")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.Version == "" {
		return nil, errors.New("verifier: Version is required")
	}
	keys, err := newKeyDocs(cfg.Signer.Public(), cfg.PreviousKeys, cfg.Version)
	if err != nil {
		return nil, err
	}
	signer, err := earresult.NewSigner(cfg.Signer)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, signer: signer, keys: keys, cache: &platform.CertCache{MaxEntries: cfg.CacheSize}, slots: make(chan struct{}, cfg.MaxInflight)}
	s.metrics = newMetrics(s.cache)
	snap, err := cfg.Sources.load(cfg.Now())
	if err != nil {
		return nil, err
	}
	s.install(snap)
	return s, nil
}

func (s *Service) install(snap *snapshot) {
	s.snap.Store(snap)
	s.metrics.configLoaded.Set(float64(snap.loadedAt.Unix()))
	s.metrics.policies.Set(float64(len(snap.policies)))
}

// Reload re-reads the sources when their fingerprint changed. A source
// that fails to load keeps the configuration in use; the error is logged,
// counted, shown by /readyz and returned. It reports whether a new
// configuration was installed.
func (s *Service) Reload() (bool, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cur := s.snap.Load()
	fp, err := s.cfg.Sources.fingerprint()
	if err == nil && fp == cur.fingerprint {
		return false, nil
	}
	var snap *snapshot
	if err == nil {
		snap, err = s.cfg.Sources.load(s.cfg.Now())
	}
	if err != nil {
		msg := err.Error()
		if prev := s.lastError.Swap(&msg); prev == nil || *prev != msg {
			s.cfg.Log.Error("configuration reload failed; keeping the previous configuration", "err", err,
				"loaded_at", cur.loadedAt.UTC().Format(time.RFC3339))
		}
		s.metrics.reloads.WithLabelValues("error").Inc()
		s.metrics.configStale.Set(1)
		return false, err
	}
	s.install(snap)
	s.lastError.Store(nil)
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.metrics.configStale.Set(0)
	s.cfg.Log.Info("configuration reloaded", "policies", len(snap.policies), "collateral", snap.collateral != nil)
	return true, nil
}

// Watch polls the sources every interval until ctx is done.
func (s *Service) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Reload()
		}
	}
}

// Handler serves the API (docs/spec/verifier-api.md).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		mux.Handle(r.pattern, r.h)
	}
	return recoverer(s.cfg.Log, countUnrouted(s.metrics, mux))
}

// route is one method and path of the API.
type route struct {
	pattern string // "METHOD /path"
	h       http.Handler
}

// routes is the whole API; docs/spec/verifier-openapi.json describes the
// same routes (TestOpenAPIMatchesService).
func (s *Service) routes() []route {
	return []route{
		{"POST /v1/verify", http.HandlerFunc(s.serveVerify)},
		{"GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
		})},
		{"GET /readyz", http.HandlerFunc(s.serveReady)},
		{"GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})},
		{"GET " + jwksPath, http.HandlerFunc(s.keys.serveJWKS)},
		{"GET " + discoveryPath, http.HandlerFunc(s.keys.serveDiscovery)},
	}
}

// countUnrouted counts the answers the mux gives on its own: 404 for a
// path the API does not have, 405 for a method its path does not take (a
// request no pattern matches gets no other answer: the mux redirects only
// to a path a pattern matches).
func countUnrouted(m *metrics, mux *http.ServeMux) http.Handler {
	unrouted := promhttp.InstrumentHandlerCounter(m.unrouted, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			unrouted.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// serveReady is 200 while a configuration is loaded. A failed reload does
// not make the service unready (it keeps verifying with the previous,
// valid configuration), but the body says so.
func (s *Service) serveReady(w http.ResponseWriter, _ *http.Request) {
	snap := s.snap.Load()
	out := map[string]any{"ready": snap != nil}
	code := http.StatusOK
	if snap == nil {
		code = http.StatusServiceUnavailable
	} else {
		out["config_loaded_at"] = snap.loadedAt.UTC().Format(time.RFC3339)
		out["policies"] = len(snap.policies)
		out["config_stale"] = false
		if e := s.lastError.Load(); e != nil {
			out["config_stale"] = true
			out["reload_error"] = *e
		}
	}
	writeJSON(w, code, out)
}

// response is a verification outcome as packctl verify --json prints it,
// plus the signed EAR: member "ear", a string, last, when there is one.
// writeJSON appends the EAR to the Outcome's JSON itself: it is a compact
// JWS (base64url segments and dots, nothing JSON escapes), so its bytes
// are the string's and need no scan or copy by encoding/json.
type response struct {
	*verify.Outcome
	ear []byte
}

// serviceOutcome is the outcome of a request the service itself ended
// before or after verifying (check "request" or "ear"): the verdict, its
// exit code and a message for the client.
func serviceOutcome(verdict, check, msg string) *verify.Outcome {
	return &verify.Outcome{
		Verdict: verdict, ExitCode: verify.ExitCode(verdict),
		Error: &verify.OutcomeError{Class: verdict, Check: check, Message: msg, Passed: []string{}},
	}
}

func (s *Service) serveVerify(w http.ResponseWriter, r *http.Request) {
	var code int
	var resp *response
	select {
	case s.slots <- struct{}{}:
		s.metrics.inflight.Inc()
		body := bodyBufs.Get().(*[]byte)
		// The body goes back only after the answer is written: the
		// request borrows it (parseRequest), so what refers to it must
		// be gone first.
		defer putBody(body)
		code, resp = s.verify(r, w, body)
		s.metrics.inflight.Dec()
		<-s.slots
	default:
		w.Header().Set("Retry-After", "1")
		code, resp = http.StatusServiceUnavailable, &response{Outcome: serviceOutcome(verify.VerdictCannotCheck, "request", "too many verifications in flight")}
	}
	s.metrics.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	writeJSON(w, code, resp)
}

// bodyBufs holds the buffers request bodies are read into, reused across
// requests (a full request's body is about 45 KiB, which the collector
// would otherwise sweep after every request). A buffer in the pool is all
// zeros: putBody clears what a request left in it.
var bodyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody is the largest body buffer kept in bodyBufs.
const maxPooledBody = 1 << 20

func putBody(b *[]byte) {
	if cap(*b) > maxPooledBody {
		return
	}
	clear((*b)[:cap(*b)])
	*b = (*b)[:0]
	bodyBufs.Put(b)
}

// verify serves one verification, the body read into *buf (which it may
// grow); nothing it returns refers to the body.
func (s *Service) verify(r *http.Request, w http.ResponseWriter, buf *[]byte) (int, *response) {
	refuse := func(code int, format string, args ...any) (int, *response) {
		s.metrics.verdicts.WithLabelValues(verify.VerdictUsage).Inc()
		return code, &response{Outcome: serviceOutcome(verify.VerdictUsage, "request", fmt.Sprintf(format, args...))}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, "content type must be application/json")
	}
	body, err := bounded.ReadBody(w, r, int64(s.cfg.MaxBody), *buf)
	if err == nil {
		*buf = body
	}
	if err != nil {
		if errors.Is(err, bounded.ErrTooLarge) {
			return refuse(http.StatusRequestEntityTooLarge, "body over %d bytes", s.cfg.MaxBody)
		}
		s.cfg.Log.Info("request body unreadable", "err", err)
		return refuse(http.StatusBadRequest, "body unreadable")
	}
	req, err := parseRequest(body, s.cfg.MaxBody)
	if err != nil {
		return refuse(http.StatusBadRequest, "%v", err)
	}
	snap := s.snap.Load()
	pol := snap.policies[req.policy]
	if pol == nil {
		return refuse(http.StatusBadRequest, "unknown policy %q", req.policy)
	}

	start := time.Now()
	now := s.cfg.Now()
	res, verr := verify.Verify(req.attestation, req.evidence, req.bundle, pol, verify.Options{
		Now:        func() time.Time { return now },
		Collateral: snap.collateral,
		CertCache:  s.cache,
		AuditLog:   req.audit,
		Report:     req.report,
	})
	out := &response{Outcome: verify.NewOutcome(res, verr)}
	defer func() {
		s.metrics.verdicts.WithLabelValues(out.Verdict).Inc()
		s.metrics.duration.WithLabelValues(out.Verdict).Observe(time.Since(start).Seconds())
	}()
	if out.Verdict == verify.VerdictUsage {
		return http.StatusBadRequest, out
	}
	ar, err := earresult.New(res, verr, earresult.Options{Now: now, Build: buildPrefix + s.cfg.Version, Policy: pol})
	var tok []byte
	if err == nil {
		tok, err = s.signer.Sign(ar)
	}
	if err != nil {
		s.cfg.Log.Error("cannot issue the ear", "err", err)
		out.Outcome = serviceOutcome(verify.VerdictCannotCheck, "ear", "the attestation result could not be signed")
		return http.StatusInternalServerError, out
	}
	out.ear = tok
	if verr != nil {
		s.cfg.Log.Info("verification failed", "verdict", out.Verdict, "policy", req.policy, "err", verr)
	}
	return http.StatusOK, out
}

// responseBufs holds the buffers writeJSON encodes into, reused across
// requests: a verification's answer is about 7 KiB, which json.Marshal
// would allocate and then copy again to add the newline.
var responseBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledResponse is the largest buffer kept in responseBufs.
const maxPooledResponse = 64 << 10

func writeJSON(w http.ResponseWriter, code int, v any) {
	buf := responseBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledResponse {
			buf.Reset()
			responseBufs.Put(buf)
		}
	}()
	buf.Reset()
	// Encode writes what json.Marshal returns, then a newline.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		http.Error(w, `{"verdict":"cannot-check","exit_code":3}`, http.StatusInternalServerError)
		return
	}
	if r, ok := v.(*response); ok && len(r.ear) > 0 {
		appendEAR(buf, r.ear)
	}
	b := buf.Bytes()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b))) // not chunked: responses pass 2 KiB
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// appendEAR adds member "ear" to the object (and newline) in buf: what
// encoding/json writes for a last member ear of type string holding a
// compact JWS.
func appendEAR(buf *bytes.Buffer, ear []byte) {
	buf.Truncate(buf.Len() - len("}\n"))
	if b := buf.Bytes(); b[len(b)-1] != '{' {
		buf.WriteByte(',')
	}
	buf.WriteString(`"ear":"`)
	buf.Write(ear)
	buf.WriteString("\"}\n")
}

// recoverer turns a panic into a 500 whose body says nothing; the detail
// goes to the log.
func recoverer(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeJSON(w, http.StatusInternalServerError, &response{Outcome: &verify.Outcome{
					Verdict: verify.VerdictCannotCheck, ExitCode: verify.ExitCode(verify.VerdictCannotCheck)}})
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// logStart logs what the service serves with: the policies by name and
// their ids, the collateral, and the EAR key's id and algorithm (never
// the key).
func (s *Service) logStart() {
	snap := s.snap.Load()
	names := slices.Sorted(maps.Keys(snap.policies))
	ids := make([]string, len(names))
	for i, n := range names {
		ids[i] = n + "=" + snap.policies[n].ID()
	}
	s.cfg.Log.Info("configuration loaded", "policies", ids, "collateral", snap.collateral != nil,
		"ear_kid", s.keys.kid, "ear_alg", s.keys.alg, "ear_previous_keys", len(s.cfg.PreviousKeys), "version", s.cfg.Version)
}
