package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPError is an error with a status code and a message that is safe to
// send to the client. Err carries the detail for the log only.
type HTTPError struct {
	Code int
	Msg  string
	// Reason is an optional machine-readable code (e.g. a PoH reason code).
	Reason string
	Err    error
}

func (e *HTTPError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Msg)
}

func (e *HTTPError) Unwrap() error { return e.Err }

func httpErr(code int, msg string, err error) *HTTPError {
	return &HTTPError{Code: code, Msg: msg, Err: err}
}

// handlerFunc is an HTTP handler that returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	panics       prometheus.Counter
	packs        *prometheus.CounterVec
	decisions    *prometheus.CounterVec
	attestations *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawea_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "clawea_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clawea_http_panics_total", Help: "Handler panics turned into 500 responses.",
		}),
	}
	m.packs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clawea_packs_total", Help: "Prompt packs opened, by outcome (accepted, refused).",
	}, []string{"outcome"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clawea_gate_decisions_total", Help: "Tool-call gate decisions by deciding stage and outcome.",
	}, []string{"stage", "outcome"})
	m.attestations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clawea_attestations_total", Help: "Execution attestations by outcome (issued, refused, error).",
	}, []string{"outcome"})
	reg.MustRegister(m.requests, m.duration, m.panics, m.packs, m.decisions, m.attestations)
	return m
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap adapts h: a request body limit, panic recovery (500), error rendering
// with only the safe message, structured logs and metrics.
func (s *Server) wrap(route string, maxBody int64, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		if maxBody > 0 {
			r.Body = http.MaxBytesReader(sw, r.Body, maxBody)
		}
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.metrics.panics.Inc()
					err = httpErr(http.StatusInternalServerError, "internal error", fmt.Errorf("panic: %v", p))
				}
			}()
			err = h(sw, r)
		}()
		if err != nil {
			var he *HTTPError
			if !errors.As(err, &he) {
				he = httpErr(http.StatusInternalServerError, "internal error", err)
			}
			level := slog.LevelWarn
			if he.Code >= 500 {
				level = slog.LevelError
			}
			s.log.Log(r.Context(), level, "request failed", "route", route, "method", r.Method, "code", he.Code, "reason", he.Reason, "err", he.Error())
			if sw.code == 0 {
				writeJSON(sw, he.Code, errorBody{Error: he.Msg, Reason: he.Reason})
			}
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		s.metrics.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// readBody reads the (already size-limited) body, mapping an oversized body
// to 413.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, httpErr(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), err)
		}
		return nil, httpErr(http.StatusBadRequest, "cannot read request body", err)
	}
	return b, nil
}

// decodeStrict decodes JSON into v refusing unknown fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httpErr(http.StatusBadRequest, "malformed JSON request: "+safeJSONError(err), err)
	}
	if dec.More() {
		return httpErr(http.StatusBadRequest, "malformed JSON request: trailing data", nil)
	}
	return nil
}

// safeJSONError keeps the structural part of a JSON error (which field,
// which type) without echoing values.
func safeJSONError(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return fmt.Sprintf("field %q has the wrong type", ute.Field)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	}
	const unknown = "json: unknown field "
	if msg := err.Error(); len(msg) > len(unknown) && msg[:len(unknown)] == unknown {
		f := msg[len(unknown):]
		if len(f) > 66 {
			f = f[:66]
		}
		return "unknown field " + f
	}
	if errors.Is(err, io.EOF) {
		return "empty body"
	}
	return "invalid JSON"
}
