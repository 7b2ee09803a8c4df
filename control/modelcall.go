package control

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/answer"
)

// newGateway makes the model gateway of cfg (none configured: a gateway
// without upstreams, which refuses every call); its audit logs go to
// <stateDir>/gateway, or to a temporary directory removed at Close.
func newGateway(s *Service, cfg *Config) error {
	gc := gateway.Config{MaxSessions: 1, MaxHistoryMessages: 1, MaxCallsPerRun: 1}
	if cfg.Gateway != nil {
		gc = *cfg.Gateway
	}
	dir := filepath.Join(cfg.StateDir, "gateway")
	if cfg.StateDir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "clawea-gateway-"); err != nil {
			return fmt.Errorf("gateway audit directory: %w", err)
		}
		s.gwTmp = dir
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gateway audit directory: %w", err)
	}
	g, err := gateway.New(gc, dir, s.log)
	if err != nil {
		return err
	}
	s.gw = g
	return nil
}

// ModelBodyLimit is the largest body a model call to provider's api may
// carry: the upstream's maxRequestBytes (0: no such upstream; the call is
// refused after authorization).
func (s *Service) ModelBodyLimit(provider, api string) int64 {
	if s.cfg.Gateway == nil {
		return 0
	}
	u, ok := s.cfg.Gateway.Upstreams[provider]
	if !ok || u.API != api {
		return 0
	}
	return u.MaxRequestBytes
}

// ModelCall serves a model call of rn from caller
// (POST /v1/runs/{id}/model/{provider}/{api}, docs/spec/model-gateway.md):
// the gateway checks body against what the run holds, forwards it and
// writes the whole answer. It returns an error, with nothing written, only
// for a closed run. It calls free once (nil: none), maybe after it
// returned, when no read of body will happen any more: the caller may
// then reuse the buffer (Facts.BodyDone).
func (s *Service) ModelCall(w http.ResponseWriter, r *http.Request, rn *Run, caller Process, provider, api string, body []byte, free func()) error {
	if free == nil {
		free = func() {}
	}
	rn.mu.Lock()
	if rn.closed {
		rn.mu.Unlock()
		free()
		return errRunClosed
	}
	f := &gateway.Facts{
		Want: poh.PromptCommitments{
			RunID: rn.id, SystemPromptHashB64u: rn.promptH, SystemPromptReportHashB64u: rn.reportH,
			Provider: s.cfg.ModelProvider, Model: s.cfg.Model,
		},
		AgentID: rn.agentID, SessionKey: rn.sessionKey, TurnID: rn.turn, TurnContent: rn.turnContent,
		Decisions: slices.Clone(rn.decisions), ToolSchemasHash: rn.toolsH,
	}
	rn.mu.Unlock()
	f.WithPrompt = func(fn func([]byte) error) error {
		return rn.WithPrompt(func(p *sealed.Buffer, _ string) error { return fn(p.Bytes()) })
	}
	// The signed answer's request hash covers the whole body: it is
	// computed once, while a forwarded call's answer is relayed
	// (Forwarded), or by Sign itself when that has not begun.
	reqHash := sync.OnceValue(func() [32]byte { return answer.RequestHash(r.Method, r.RequestURI, body) })
	forwarded := false // Forwarded runs on Serve's goroutine
	f.Forwarded = func() { forwarded = true; go reqHash() }
	f.Sign = func(status int, respHash [32]byte) ([]byte, []byte, error) {
		sa, err := s.SignAnswer(rn, caller, status, reqHash(), respHash)
		if err != nil {
			return nil, nil, err
		}
		return sa.Statement, sa.Signature, nil
	}
	f.BodyDone = func() {
		if !forwarded {
			free()
			return
		}
		// The hash begun in Forwarded reads the body: free waits for
		// it, off the call's goroutine (the answer is being relayed).
		go func() {
			reqHash()
			free()
		}()
	}
	s.receiptSigner(rn, f)
	s.gw.Serve(w, r, provider, api, body, f)
	return nil
}
