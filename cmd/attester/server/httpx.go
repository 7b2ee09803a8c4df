package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// HTTPError is an error with a status code and a message that is safe to
// send to the client. Err carries the detail for the log only.
type HTTPError struct {
	Code int
	Msg  string
	// Reason is an optional machine-readable code (e.g. a PoH reason code).
	Reason string
	Err    error

	allow      string // Allow header of a 405
	retryAfter int    // Retry-After header (seconds) of a 429 or 503, when > 0
	closeConn  bool   // close the connection (the body was not read)
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

// metrics are the HTTP surface's; the control plane counts packs,
// decisions and attestations itself.
type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	panics      prometheus.Counter
	connRefused *prometheus.CounterVec
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
	m.connRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clawea_connections_refused_total", Help: "Connections closed at accept because every slot of the listener was busy (attester.maxConnections).",
	}, []string{"listener"})
	reg.MustRegister(m.requests, m.duration, m.panics, m.connRefused)
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

// Unwrap lets http.ResponseController reach the connection (Hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap adapts h: panic recovery (500), error rendering with only the safe
// message, structured logs and metrics.
func (s *Server) wrap(route string, h handlerFunc) http.Handler {
	// The route's series are looked up once, not per request (a series is
	// created on its first use, so /metrics lists only codes that occurred).
	duration := s.metrics.duration.WithLabelValues(route)
	var counters sync.Map // status code -> prometheus.Counter
	count := func(code int) prometheus.Counter {
		if c, ok := counters.Load(code); ok {
			return c.(prometheus.Counter)
		}
		c := s.metrics.requests.WithLabelValues(route, strconv.Itoa(code))
		counters.Store(code, c)
		return c
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		// Every request's body must arrive within smallBodyTimeout unless
		// its handler extends the deadline (readBody).
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(start.Add(smallBodyTimeout))
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
			he := asHTTPError(err)
			if he == nil {
				he = httpErr(http.StatusInternalServerError, "internal error", err)
			}
			level := slog.LevelWarn
			if he.Code >= 500 {
				level = slog.LevelError
			}
			s.log.Log(r.Context(), level, "request failed", "route", route, "method", r.Method, "code", he.Code, "reason", he.Reason, "err", he.Error())
			if sw.code == 0 {
				if he.Code == http.StatusUnauthorized {
					sw.Header().Set("WWW-Authenticate", `Bearer realm="clawea-run"`)
				}
				if he.Code == http.StatusMethodNotAllowed && he.allow != "" {
					sw.Header().Set("Allow", he.allow)
				}
				if he.retryAfter > 0 {
					sw.Header().Set("Retry-After", strconv.Itoa(he.retryAfter))
				}
				if he.closeConn {
					// The body was not read: close the connection. The
					// server drains at most 256 KiB of it (so a client
					// still reads this answer), for at most a second.
					sw.Header().Set("Connection", "close")
					_ = rc.SetReadDeadline(time.Now().Add(time.Second))
				}
				writeJSON(sw, he.Code, errorBody{Error: he.Msg, Reason: he.Reason})
			}
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		count(code).Inc()
		duration.Observe(time.Since(start).Seconds())
	})
}

type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// The constant header values of a JSON answer, shared by every answer
// instead of allocated for each: net/http only reads them, and an append
// to a slice with no spare capacity (Header.Add) copies it.
var (
	headerJSON    = []string{"application/json"}
	headerNosniff = []string{"nosniff"}
	headerNoStore = []string{"no-store"}
)

// setJSONHeaders sets a JSON answer's Content-Type, X-Content-Type-Options
// and Cache-Control.
func setJSONHeaders(h http.Header) {
	h["Content-Type"] = headerJSON
	h["X-Content-Type-Options"] = headerNosniff
	h["Cache-Control"] = headerNoStore
}

// Body read deadlines: a slow sender is cut off rather than holding a
// connection and its buffers.
const (
	smallBodyTimeout  = 10 * time.Second
	createBodyTimeout = 120 * time.Second
)

// readBody reads at most max bytes of the body within timeout, mapping an
// oversized body to 413 and a slow one to 408.
func readBody(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration, buf ...[]byte) ([]byte, error) {
	if r.ContentLength <= max {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	b, err := bounded.ReadBody(w, r, max, buf...)
	if err != nil {
		if tl, ok := errors.AsType[*bounded.TooLargeError](err); ok {
			return nil, httpErr(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", tl.Limit), err)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return nil, httpErr(http.StatusRequestTimeout, "the request body was not received in time", err)
		}
		return nil, httpErr(http.StatusBadRequest, "cannot read request body", err)
	}
	return b, nil
}

var errContentType = &HTTPError{Code: http.StatusUnsupportedMediaType, Msg: "Content-Type must be application/json"}

// checkContentType requires application/json (charset, if any, utf-8).
func checkContentType(r *http.Request) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errContentType
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return errContentType
		}
	}
	return nil
}

// decodeStrict decodes a JSON object into v (a pointer to a struct whose
// fields carry json tags). The body is first read by schema/jsonobj (RFC
// 8259, valid UTF-8, no duplicate keys, keys case-sensitive, bounded depth,
// nothing after the value); keys that differ only in case are refused at
// every level, and the object's members must be exactly among v's json tags.
// Only then is the same text decoded into v, which cannot read it
// differently: its keys are exact and unique.
func decodeStrict(b []byte, v any) error {
	doc, err := jsonobj.ParseObject(b, pohjson.ParseOptions{MaxBytes: len(b) + 1, MaxDepth: 32, AllowFloats: true})
	if err != nil {
		return httpErr(http.StatusBadRequest, "malformed JSON request: "+safePohError(err), err)
	}
	if err := noCaseVariants(doc, 0); err != nil {
		return err
	}
	// Every tag is optional, so only an unknown member fails the reader:
	// it runs (and builds its map of members) only when there is one.
	if tags := jsonTags(reflect.TypeOf(v).Elem()); !onlyMembers(doc, tags) {
		var r jsonobj.Reader
		r.Object(doc, jsonobj.Root, tags)
		if err := r.Err(); err != nil {
			// The path names the member (clipped by jsonobj), never a value.
			return httpErr(http.StatusBadRequest, "malformed JSON request: "+err.Error(), err)
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return httpErr(http.StatusBadRequest, "malformed JSON request: "+safeJSONError(err), err)
	}
	return nil
}

// noCaseVariants refuses objects with two keys equal under Unicode case
// folding (encoding/json, and many proxies, match keys that way).
func noCaseVariants(v *pohjson.Value, depth int) error {
	switch v.Kind() {
	case pohjson.Object:
		ms := v.Members()
		if len(ms) > 1 && len(ms) <= 16 {
			// Few members (every request body): compare pairwise, without
			// allocating. strings.EqualFold is equality under simple
			// Unicode case folding, the relation foldKey canonicalizes.
			for i := range ms {
				for j := i + 1; j < len(ms); j++ {
					if strings.EqualFold(ms[i].Key, ms[j].Key) {
						return httpErr(http.StatusBadRequest, "malformed JSON request: keys that differ only in case", nil)
					}
				}
			}
		} else if len(ms) > 16 {
			seen := make(map[string]struct{}, len(ms))
			for _, m := range ms {
				k := foldKey(m.Key)
				if _, dup := seen[k]; dup {
					return httpErr(http.StatusBadRequest, "malformed JSON request: keys that differ only in case", nil)
				}
				seen[k] = struct{}{}
			}
		}
		for _, m := range ms {
			if err := noCaseVariants(m.Value, depth+1); err != nil {
				return err
			}
		}
	case pohjson.Array:
		for _, e := range v.Elems() {
			if err := noCaseVariants(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// onlyMembers reports whether every member of the object doc is in tags.
func onlyMembers(doc *pohjson.Value, tags map[string]bool) bool {
	for _, m := range doc.Members() {
		if _, ok := tags[m.Key]; !ok {
			return false
		}
	}
	return true
}

func foldKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		// SimpleFold cycles through a rune's case variants; the smallest
		// is a canonical representative.
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

var tagCache sync.Map // reflect.Type -> map[string]bool

// jsonTags returns the members of a request struct, all optional for
// jsonobj (handlers check what they require).
func jsonTags(t reflect.Type) map[string]bool {
	if m, ok := tagCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = false
		}
	}
	tagCache.Store(t, m)
	return m
}

// safePohError describes a parse error by class and offset, never by value.
func safePohError(err error) string {
	var pe *pohjson.Error
	off := ""
	if errors.As(err, &pe) {
		off = fmt.Sprintf(" at offset %d", pe.Offset)
	}
	switch {
	case errors.Is(err, pohjson.ErrDuplicateKey):
		return "duplicate key" + off
	case errors.Is(err, pohjson.ErrTooDeep):
		return "nested too deeply" + off
	case errors.Is(err, pohjson.ErrTooLarge), errors.Is(err, jsonobj.ErrTooLarge):
		return "too large"
	case errors.Is(err, jsonobj.ErrWrongType):
		return "want an object"
	}
	return "invalid JSON" + off
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
