package server

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

// maxUnknownModelBody bounds the body of a model call to a provider that
// is not configured: it is read only so that the gateway can refuse it
// with its reason code and an audit record.
const maxUnknownModelBody = 64 << 10

// modelBodies holds the buffers model call bodies are read into: a body
// (100 KB and more) lives exactly as long as its call, and was most of
// the heap a call allocates. A buffer over maxPooledModelBody is not
// kept, and a buffer is cleared before it is kept (no request's bytes
// wait in the pool).
var modelBodies = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledModelBody = 1 << 20

// handleModel serves POST /v1/runs/{id}/model/{provider}/{api}
// (docs/spec/model-gateway.md): the run is authorized as every run route
// is, the body is read within the upstream's limit, and the control
// plane's gateway writes the answer.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	if r.URL.RawQuery != "" {
		return refuseModel(httpErr(http.StatusBadRequest, "a model call takes no query string", nil), "GATEWAY_REQUEST_MALFORMED")
	}
	if err := checkContentType(r); err != nil {
		return refuse(err)
	}
	provider, api := r.PathValue("provider"), r.PathValue("api")
	limit := s.svc.ModelBodyLimit(provider, api)
	if limit == 0 {
		limit = maxUnknownModelBody
	}
	bp := modelBodies.Get().(*[]byte)
	body, err := readBody(w, r, limit, smallBodyTimeout, *bp)
	if err != nil {
		modelBodies.Put(bp) // cleared by the failed read, or not used
		if he, ok := errors.AsType[*HTTPError](err); ok && he.Code == http.StatusRequestEntityTooLarge {
			return refuseModel(he, "GATEWAY_BODY_TOO_LARGE")
		}
		return err
	}
	// The answer may stream for minutes: the body is in, so the
	// connection's read deadline no longer applies (when it passed, the
	// server would cancel the request while the answer is relayed).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	// The control plane calls free when no read of body remains (the
	// answer may still be streaming).
	// It lets go of the buffer itself too: the call holds free until
	// it ends, and an open stream must not hold the body.
	free := func() {
		if bp != nil && cap(body) <= maxPooledModelBody {
			clear(body)
			*bp = body[:0]
			modelBodies.Put(bp)
		}
		body, bp = nil, nil
	}
	return s.svc.ModelCall(w, r, q.rn, q.proc, provider, api, body, free)
}

// refuseModel gives a refusal the gateway's reason code.
func refuseModel(he *HTTPError, reason string) error {
	c := *he
	c.Reason = reason
	return &c
}
