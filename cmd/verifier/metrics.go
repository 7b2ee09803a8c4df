package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/clawea/attester/verify/platform"
)

// metrics are the service's Prometheus metrics, on a registry of its own
// (no global state).
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec   // by HTTP status code
	unrouted     *prometheus.CounterVec   // 404 and 405, by code
	verdicts     *prometheus.CounterVec   // by verdict
	duration     *prometheus.HistogramVec // by verdict
	inflight     prometheus.Gauge
	reloads      *prometheus.CounterVec // by result: ok, error
	configStale  prometheus.Gauge
	configLoaded prometheus.Gauge
	policies     prometheus.Gauge
}

func newMetrics(cache *platform.CertCache) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_verifier_http_requests_total", Help: "POST /v1/verify requests by HTTP status code.",
		}, []string{"code"}),
		unrouted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_verifier_http_unrouted_total", Help: "Requests for a path the API does not have (404) or a method its path does not take (405), by HTTP status code.",
		}, []string{"code"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_verifier_verifications_total", Help: "Verifications by verdict (verified, rejected, cannot-check, policy-refused, usage).",
		}, []string{"verdict"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "clawea_verifier_verification_duration_seconds", Help: "Time to verify and sign the EAR, by verdict.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1},
		}, []string{"verdict"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawea_verifier_inflight_requests", Help: "POST /v1/verify requests being served.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_verifier_config_reloads_total", Help: "Policy and collateral reloads by result (ok, error).",
		}, []string{"result"}),
		configStale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawea_verifier_config_stale", Help: "1 when the last reload failed and the previous configuration is still in use.",
		}),
		configLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawea_verifier_config_loaded_timestamp_seconds", Help: "When the configuration in use was loaded.",
		}),
		policies: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clawea_verifier_policies", Help: "Number of policies in the configuration in use.",
		}),
	}
	stat := func(f func(platform.CacheStats) float64) func() float64 {
		return func() float64 { return f(cache.Stats()) }
	}
	m.reg.MustRegister(m.requests, m.unrouted, m.verdicts, m.duration, m.inflight, m.reloads, m.configStale, m.configLoaded, m.policies,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clawea_verifier_cert_cache_hits_total", Help: "SEV-SNP chain verifications served from the cache."},
			stat(func(s platform.CacheStats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clawea_verifier_cert_cache_misses_total", Help: "SEV-SNP chains verified in full."},
			stat(func(s platform.CacheStats) float64 { return float64(s.Misses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clawea_verifier_cert_cache_evictions_total", Help: "Cached chains evicted to stay within capacity."},
			stat(func(s platform.CacheStats) float64 { return float64(s.Evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clawea_verifier_cert_cache_entries", Help: "Cached SEV-SNP chains."},
			stat(func(s platform.CacheStats) float64 { return float64(s.Entries) })),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}
