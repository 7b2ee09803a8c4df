package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/clawea/attester/control/frames"
	"github.com/clawea/attester/wire/answer"
	"github.com/clawea/attester/wire/ctlframe"
)

// The framed transport of the control socket (attester-api section 9):
// after GET /v1/frames upgrades the connection to ctlframe.Token, each
// request frame is served by the same handler chain as an HTTP request on
// the socket (uid, Origin, clean path, the route's capability, process
// binding, body limits, signed answers), with the connection's peer, and
// answered by a response frame on its stream.

// framesPath is the route that upgrades a control connection to frames.
const framesPath = "/v1/frames"

// The largest body a framed route reads fits in a frame beside the
// request's other fields (ctlframe.MaxLen's 64 KiB allowance).
var _ = [1]struct{}{}[max(maxBundle, maxToolCallBody)+64<<10-ctlframe.MaxLen]

// httpOnlyRoutes are the control routes not served framed: the prompt
// goes from sealed memory straight to the socket (servePrompt), the audit
// is streamed from its file and a model call is streamed with trailers;
// framing would copy each into heap buffers or bound it by a frame.
var httpOnlyRoutes = map[string]bool{
	"GET /v1/runs/{id}/prompt":                  true,
	"GET /v1/runs/{id}/audit":                   true,
	"POST /v1/runs/{id}/model/{provider}/{api}": true,
	"GET " + framesPath:                         true,
}

// requestFields are the header fields a request frame may carry (by their
// names in frames): those the control routes read. Any other is refused
// (400).
var requestFields = map[string]string{"authorization": "Authorization", "content-type": "Content-Type", "origin": "Origin"}

// responseFields are the answer header fields a response frame carries
// when the handler set them, by their names in frames.
var responseFields = map[string]string{
	"content-type": "Content-Type", "clawea-answer-statement": answer.HeaderStatement, "clawea-answer-signature": answer.HeaderSignature,
	"www-authenticate": "Www-Authenticate", "allow": "Allow", "retry-after": "Retry-After",
}

// framedOnly refuses, on a framed connection, the routes served only over
// HTTP (421), before the route's own checks.
func (s *Server) framedOnly(mux *http.ServeMux) http.Handler {
	refused := s.wrap("framed_refused", func(w http.ResponseWriter, r *http.Request) error {
		return httpErr(http.StatusMisdirectedRequest, "this route is served only over HTTP/1.1 on the control socket, not framed", nil)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pat := mux.Handler(r); httpOnlyRoutes[pat] {
			refused.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// handleFrames upgrades a control connection to frames and serves it
// until it ends (control/frames): chain is the control API's handler chain
// for framed requests. The caller passed the uid, Origin and process
// checks.
func (s *Server) handleFrames(chain http.Handler) handlerFunc {
	o := &frames.Options{
		Handler: chain, RequestFields: requestFields, ResponseFields: responseFields,
		FrameTimeout: smallBodyTimeout, ErrorBody: frameErrorBody,
		Busy: s.connBusy, Release: s.releaseConn, Log: s.log,
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkUpgrade(r); err != nil {
			return refuse(err)
		}
		switch err := s.framed.Serve(w, r, o); {
		case errors.Is(err, frames.ErrStopping):
			return refuse(httpErr(http.StatusServiceUnavailable, err.Error(), nil))
		case err != nil:
			return httpErr(http.StatusInternalServerError, "cannot upgrade the connection", err)
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.code = http.StatusSwitchingProtocols
		}
		return nil
	}
}

// frameErrorBody is an error answer's body in a frame: an HTTP error's
// (writeJSON of an errorBody).
func frameErrorBody(msg string) []byte {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorBody{Error: msg})
	return body.Bytes()
}

// checkUpgrade requires GET /v1/frames to ask for exactly this transport:
// Connection: Upgrade, Upgrade: clawea-control/3, no body.
func checkUpgrade(r *http.Request) error {
	up := r.Header.Values("Upgrade")
	if len(up) == 0 || !headerHasToken(r.Header.Values("Connection"), "upgrade") {
		return &HTTPError{Code: http.StatusUpgradeRequired, Msg: "this route upgrades the connection: send Connection: Upgrade and Upgrade: " + ctlframe.Token}
	}
	if len(up) != 1 || up[0] != ctlframe.Token {
		return httpErr(http.StatusBadRequest, "unsupported Upgrade: the control socket upgrades only to "+ctlframe.Token, nil)
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return httpErr(http.StatusBadRequest, "the upgrade request has no body", nil)
	}
	return nil
}

// headerHasToken reports whether a comma-separated header's values hold
// token (case-insensitive).
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
