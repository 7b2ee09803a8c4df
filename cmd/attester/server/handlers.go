package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/answer"
)

// runRequest is an authorized request on a run: the run, the process it
// came from (the run's own), the body (nil for routes without one) and the
// request's hash for its signed answer (answer.RequestHash).
type runRequest struct {
	rn   *control.Run
	proc control.Process
	body []byte
	hash [32]byte
}

// decode reads the request's body strictly into v (decodeStrict): the
// control.Decoder of the request.
func (q *runRequest) decode(v any) error { return decodeStrict(q.body, v) }

// runHandler handles a request on an authorized run.
type runHandler func(w http.ResponseWriter, r *http.Request, q *runRequest) error

// runRoute authorizes a /v1/runs/{id}/... request by its capability and
// its process (the run's creator) before anything else, then checks the
// Content-Type and reads the body (maxBody > 0) within its limits.
func (s *Server) runRoute(route string, maxBody int64, h runHandler) http.Handler {
	return s.wrap(route, func(w http.ResponseWriter, r *http.Request) error {
		// Exactly one Authorization header: with two, neither is taken (a
		// front end and the attester could each read another one), and the
		// request has no well-formed credential (401).
		authz := ""
		if v := r.Header.Values("Authorization"); len(v) == 1 {
			authz = v[0]
		}
		rn, proc, err := s.svc.Authorize(r.Context(), r.PathValue("id"), authz)
		if err != nil {
			return refuse(err)
		}
		q := &runRequest{rn: rn, proc: proc}
		if maxBody > 0 {
			if err := checkContentType(r); err != nil {
				return refuse(err)
			}
			if q.body, err = readBody(w, r, maxBody, smallBodyTimeout); err != nil {
				return err
			}
		}
		q.hash = answer.RequestHash(r.Method, r.RequestURI, q.body)
		return h(w, r, q)
	})
}

// writeSigned writes v as the JSON answer to q (the bytes writeJSON
// writes) with its signature headers (attester-api section 8). Nothing is
// written when the answer cannot be signed: an unsigned success is never
// sent.
func (s *Server) writeSigned(w http.ResponseWriter, q *runRequest, code int, v any) error {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer putAnswerBuf(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	sa, err := s.svc.SignAnswer(q.rn, q.proc, code, q.hash, sha256.Sum256(buf.Bytes()))
	if err != nil {
		return err
	}
	h := w.Header()
	setJSONHeaders(h)
	setAnswerHeaders(h, sa.Statement, sa.Signature)
	w.WriteHeader(code)
	_, err = w.Write(buf.Bytes())
	return err
}

// answerBufs holds the buffers signed answers are encoded in; the
// ResponseWriter copies an answer, so its buffer is reused once written.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putAnswerBuf returns buf to answerBufs, unless it grew past what a
// decision needs (a large answer's buffer is left to the collector).
func putAnswerBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 16<<10 {
		buf.Reset()
		answerBufs.Put(buf)
	}
}

// setAnswerHeaders sets the signed answer's two headers.
func setAnswerHeaders(h http.Header, statement, signature []byte) {
	h.Set(answer.HeaderStatement, b64u.Encode(statement))
	h.Set(answer.HeaderSignature, b64u.Encode(signature))
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
	q := &runRequest{hash: answer.RequestHash(r.Method, r.RequestURI, body)}
	// The body is dropped once decoded: the run's pack is in the request.
	resp, rn, proc, err := s.svc.CreateRun(r.Context(), func(v any) error {
		err := decodeStrict(body, v)
		body = nil
		return err
	})
	if err != nil {
		return err
	}
	q.rn, q.proc = rn, proc
	if err := s.writeSigned(w, q, http.StatusCreated, resp); err != nil {
		// The caller never got the capability: the run is of no use.
		_ = s.svc.CloseRun(rn)
		return err
	}
	return nil
}

// handlePrompt serves the rebuilt prompt (control socket, capability).
// Its answer is signed like the others; the response hash is the run's
// prompt hash, which is SHA-256 of exactly these bytes (the prompt is not
// hashed again outside sealed memory).
func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	return q.rn.WithPrompt(func(prompt *sealed.Buffer, hash string) error {
		h, err := b64u.DecodeHash(hash)
		if err != nil {
			return err
		}
		sa, err := s.svc.SignAnswer(q.rn, q.proc, http.StatusOK, q.hash, h)
		if err != nil {
			return err
		}
		return s.servePrompt(w, prompt, hash, sa.Statement, sa.Signature)
	})
}

// handleCloseRun closes the run; its capability then gets 410.
func (s *Server) handleCloseRun(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	if err := s.svc.CloseRun(q.rn); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	resp, err := s.svc.StartTurn(q.rn, q.decode)
	if err != nil {
		return err
	}
	return s.writeSigned(w, q, http.StatusCreated, resp)
}

func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	resp, err := s.svc.Verify(q.rn, q.decode)
	if err != nil {
		return err
	}
	return s.writeSigned(w, q, http.StatusOK, resp)
}

func (s *Server) handleToolCall(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	resp, err := s.svc.ToolCall(r.Context(), q.rn, q.decode)
	if err != nil {
		return err
	}
	return s.writeSigned(w, q, http.StatusOK, resp)
}

// handleAudit streams the run's durable audit log; the headers give the
// root and count of exactly the records in the body.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	snap, err := s.svc.AuditSnapshot(q.rn)
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
func (s *Server) handleAttest(w http.ResponseWriter, r *http.Request, q *runRequest) error {
	out, err := s.svc.Attest(r.Context(), q.rn, q.decode)
	if err != nil {
		return err
	}
	return s.writeSigned(w, q, http.StatusOK, map[string]any{
		"attestation":            json.RawMessage(out.AttestationJSON),
		"evidence_jws":           string(out.EvidenceJWS),
		"attestation_id":         out.AttestationID,
		"nonce_binding_b64u":     out.NonceBindingB64u,
		"evidence_hash_b64u":     out.EvidenceHashB64u,
		"proof_bundle_hash_b64u": out.ProofBundleHashB64u,
		"platform":               out.Platform,
		"simulated":              out.Simulated,
	})
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
	simulated := s.svc.Status().Simulated
	writeJSON(w, http.StatusOK, map[string]any{
		"ek_cert_b64u":   b64u.Encode(ek),
		"ak_public_b64u": b64u.Encode(ak),
		"simulated":      simulated,
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
	secret, err := s.svc.ActivateCredential(r.Context(), func(v any) error { return decodeStrict(body, v) })
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"secret_b64u": b64u.Encode(secret)})
	return nil
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
	return &HTTPError{Code: ce.Status(), Msg: ce.Msg, Reason: ce.Reason, Err: ce.Err, retryAfter: ce.RetryAfter}
}
