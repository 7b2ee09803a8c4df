package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

// runHandler handles a request on an authorized run; body is the request
// body (nil for routes without one).
type runHandler func(w http.ResponseWriter, r *http.Request, rn *control.Run, body []byte) error

// runRoute authorizes a /v1/runs/{id}/... request by its capability before
// anything else, then checks the Content-Type and reads the body (maxBody >
// 0) within its limits.
func (s *Server) runRoute(route string, maxBody int64, h runHandler) http.Handler {
	return s.wrap(route, func(w http.ResponseWriter, r *http.Request) error {
		capHash, err := parseBearer(r.Header.Get("Authorization"))
		if err != nil {
			return refuse(err)
		}
		rn, err := s.svc.Authorize(r.PathValue("id"), capHash)
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

// parseBearer extracts the capability's hash from an Authorization header.
// Only the syntax is checked; the error is 401.
func parseBearer(h string) ([32]byte, error) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return [32]byte{}, control.ErrNoCredential
	}
	return control.CapabilityHash(tok)
}

// refuse marks an error returned before the body was read: the connection
// is closed instead of draining a body nobody may send.
func refuse(err error) error {
	he := asHTTPError(err)
	if he == nil {
		return err
	}
	c := *he
	c.closeConn = true
	return &c
}

// handleCreateRun reads the run creation within the upload budget and has
// the control plane open the pack and create the run (control.CreateRun).
func (s *Server) handleCreateRun(w http.ResponseWriter, r *http.Request) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	max := s.cfg.MaxCreateBody()
	release, err := s.uploads.reserve(r.ContentLength, max)
	if err != nil {
		return err
	}
	defer release()
	body, err := readBody(w, r, max, createBodyTimeout)
	if err != nil {
		return err
	}
	var req control.CreateRunRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	body = nil
	resp, err := s.svc.CreateRun(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// handlePrompt serves the rebuilt prompt (control socket, capability).
func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request, rn *control.Run, _ []byte) error {
	return rn.WithPrompt(func(prompt *sealed.Buffer, hash string) error {
		return servePrompt(w, prompt, hash)
	})
}

// handleCloseRun closes the run; its capability then gets 410.
func (s *Server) handleCloseRun(w http.ResponseWriter, r *http.Request, rn *control.Run, _ []byte) error {
	if err := s.svc.CloseRun(rn); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request, rn *control.Run, body []byte) error {
	var req control.TurnRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	resp, err := s.svc.StartTurn(rn, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request, rn *control.Run, body []byte) error {
	var req control.VerifyRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	resp, err := s.svc.Verify(rn, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request, rn *control.Run, body []byte) error {
	var req control.ToolCallRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	resp, err := s.svc.ToolCall(r.Context(), rn, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// handleAudit streams the run's durable audit log; the headers give the
// root and count of exactly the records in the body.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, rn *control.Run, _ []byte) error {
	snap, err := s.svc.AuditSnapshot(rn)
	if err != nil {
		return err
	}
	defer snap.Close()
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Clawea-Audit-Root", snap.Root)
	w.Header().Set("X-Clawea-Audit-Count", fmt.Sprint(snap.Count))
	w.Header().Set("Content-Length", fmt.Sprint(snap.Size))
	_, err = snap.WriteTo(w)
	return err
}

// handleAttest has the control plane check the agent's proof bundle and
// issue the execution attestation.
func (s *Server) handleAttest(w http.ResponseWriter, r *http.Request, rn *control.Run, body []byte) error {
	var req control.AttestRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	out, err := s.svc.Attest(r.Context(), rn, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"attestation":            json.RawMessage(out.AttestationJSON),
		"evidence_jws":           string(out.EvidenceJWS),
		"attestation_id":         out.AttestationID,
		"nonce_binding_b64u":     out.NonceBindingB64u,
		"evidence_hash_b64u":     out.EvidenceHashB64u,
		"proof_bundle_hash_b64u": out.ProofBundleHashB64u,
		"platform":               out.Platform,
		"simulated":              out.Simulated,
	})
	return nil
}

// handleIdentity returns the attester DID, the pack recipient key and a key
// attestation over the optional challenge (?challenge=<b64u, 1-64 bytes>).
// Any other query parameter, a repeated or empty challenge is refused.
func (s *Server) handleIdentity(w http.ResponseWriter, r *http.Request) error {
	var challenge []byte
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return httpErr(http.StatusBadRequest, "malformed query", err)
	}
	for k, v := range q {
		if k != "challenge" || len(v) != 1 {
			return httpErr(http.StatusBadRequest, "the only query parameter is one challenge", nil)
		}
		b, err := b64u.Decode(v[0])
		if err != nil || len(b) == 0 || len(b) > 64 {
			return httpErr(http.StatusBadRequest, "challenge must be b64u, 1 to 64 bytes", err)
		}
		challenge = b
	}
	doc, err := s.svc.IdentityDocument(r.Context(), challenge)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, doc)
	return nil
}

// handleTPMEK serves the EK certificate and the AK public area the
// attester quotes with (docs/spec/platform-tpm.md section 2.4).
func (s *Server) handleTPMEK(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.CheckTPM(); err != nil {
		return err
	}
	if r.URL.RawQuery != "" {
		return httpErr(http.StatusBadRequest, "this route takes no query parameters", nil)
	}
	ek, ak, err := s.svc.TPMKeys()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ek_cert_b64u":   b64u.Encode(ek),
		"ak_public_b64u": b64u.Encode(ak),
		"simulated":      s.svc.Simulated(),
	})
	return nil
}

// handleTPMActivate answers one credential-activation challenge with the
// secret the TPM recovers (control.ActivateCredential).
func (s *Server) handleTPMActivate(w http.ResponseWriter, r *http.Request) error {
	if err := s.svc.CheckTPM(); err != nil {
		return refuse(err)
	}
	if r.URL.RawQuery != "" {
		return refuse(httpErr(http.StatusBadRequest, "this route takes no query parameters", nil))
	}
	if err := checkContentType(r); err != nil {
		return refuse(err)
	}
	body, err := readBody(w, r, maxActivateBody, smallBodyTimeout)
	if err != nil {
		return err
	}
	var req control.ActivateRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	secret, err := s.svc.ActivateCredential(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"secret_b64u": b64u.Encode(secret)})
	return nil
}

// statusOf maps each kind of control refusal to its status.
var statusOf = map[control.Kind]int{
	control.KindInternal:        http.StatusInternalServerError,
	control.KindInvalid:         http.StatusBadRequest,
	control.KindUnauthenticated: http.StatusUnauthorized,
	control.KindForbidden:       http.StatusForbidden,
	control.KindNotFound:        http.StatusNotFound,
	control.KindConflict:        http.StatusConflict,
	control.KindGone:            http.StatusGone,
	control.KindTooLarge:        http.StatusRequestEntityTooLarge,
	control.KindUnprocessable:   http.StatusUnprocessableEntity,
	control.KindTooMany:         http.StatusTooManyRequests,
	control.KindUnavailable:     http.StatusServiceUnavailable,
}

// asHTTPError returns err as an *HTTPError: itself, or a control refusal
// with its status; nil for any other error.
func asHTTPError(err error) *HTTPError {
	if he, ok := errors.AsType[*HTTPError](err); ok {
		return he
	}
	ce, ok := errors.AsType[*control.Error](err)
	if !ok {
		return nil
	}
	code, ok := statusOf[ce.Kind]
	if !ok {
		code = http.StatusInternalServerError
	}
	return &HTTPError{Code: code, Msg: ce.Msg, Reason: ce.Reason, Err: ce.Err, retryAfter: ce.RetryAfter}
}
