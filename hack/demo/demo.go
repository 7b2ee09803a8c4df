// Command demo runs the main job end to end on the simulated platform:
// packctl's build and seal (through the same library), the attester
// binary started as a process with its configuration file, an agent run
// with turns and gated tool calls, the agent's PoH proof bundle, and the
// execution attestation with its evidence document. It writes everything
// to an output directory for offline verification.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify"
)

// options configure one demo run.
type options struct {
	// Shared, when set, is the shared folder (../shared): the pack is built
	// from the OpenClaw SIG conformance harness and vector Vector. When
	// empty, the demo uses this project's example harness (hack/demo/example).
	Shared   string
	Vector   string       // openclaw-sig vector whose params the pack uses (with Shared)
	Attester string       // the attester binary the demo starts
	OutDir   string       // where the artifacts go
	WorkDir  string       // the attesters' state dirs and control sockets live here
	Log      *log.Logger  // attesters' JSON logs (their stderr), a line at a time
	Say      func(string) // progress lines
	// Platform, when set, replaces the first attester's "platform" and
	// "tpm" configuration keys (the second, sensitive, attester stays
	// simulated): e.g. azure-snp against a fake paravisor.
	Platform map[string]any
}

// step is one tool call the demo makes, with what it expects.
type step struct {
	Tool       string
	Params     string
	WantAllow  bool
	WantStage  string
	BeforeNote string
}

type outcome struct {
	RunID        string
	PromptHash   string
	ReportHash   string
	AgentDID     string
	AttesterDID  string
	Decisions    []map[string]any
	AuditRoot    string
	AuditCount   string
	Simulated    bool
	SecretProbes [][]byte // plaintext that must never reach disk or logs
	Sensitive    *sensitiveOutcome
}

const webhookSecret = "demo-webhook-hmac-secret-0123456789"

func runDemo(ctx context.Context, o options) (*outcome, error) {
	say := o.Say
	if say == nil {
		say = func(string) {}
	}
	src, err := loadHarness(o)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	// Both attesters log to o.Log; the Logger serializes their lines.
	if o.Log == nil {
		o.Log = log.New(io.Discard, "", 0)
	}

	// 1. The pack author builds the pack (packctl build).
	say("packctl build: pack from " + src.Name + " and its signed templates")
	toolSchemas := []byte(`{"exec":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]},"read":{"type":"object","properties":{"path":{"type":"string"}}}}`)
	pack, err := promptpack.Build(src.Params, src.Dir, "openclaw-sig", promptpack.BuildOptions{ToolSchemas: toolSchemas})
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	defer pack.Wipe()
	trusted := src.Trusted
	rb, err := pack.Rebuild(trusted)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	defer rb.Wipe()
	out := &outcome{PromptHash: rb.PromptHashB64u(), ReportHash: rb.ReportHashB64u()}
	// Fragments of the secret prompt: they must never reach disk or logs.
	out.SecretProbes = append(out.SecretProbes, bytes.Clone(rb.Prompt[len(rb.Prompt)/2:len(rb.Prompt)/2+48]))

	// 2. A webhook verifier the operator runs (HMAC-signed requests).
	hook := httptest.NewServer(http.HandlerFunc(webhook))
	defer hook.Close()

	// 3. The operator starts the attester binary on the simulated platform.
	// The public API (identity) is on TCP; the harness drives the run on
	// the control socket with the run's capability.
	cfg, err := demoConfig(map[string]any{
		"listen": "127.0.0.1:0", "metricsListen": "127.0.0.1:0",
		"controlSocket": filepath.Join(o.WorkDir, "control", "attester.sock"),
		"platform":      "simulated", "stateDir": filepath.Join(o.WorkDir, "state"),
		"owners":           []string{"telegram:+15550100"},
		"trustedTemplates": trusted, "development": true, "allowUnlockedMemory": true,
		"modelProvider": "anthropic", "model": "claude-demo",
	}, o.Platform, hook.URL, filepath.Join(o.OutDir, "attester.json"))
	if err != nil {
		return nil, err
	}
	proc, err := startAttester(ctx, o.Attester, "attester", filepath.Join(o.WorkDir, "attester"), cfg, nil, o.Log)
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	c, ctl := proc.pub, proc.ctl
	say("operator: started " + proc.String())

	// 4. packctl seal: fetch and check the attester's key attestation, then
	// seal the pack to its HPKE key.
	sp, err := sealToAttester(c, pack, rb.ReportJCS, o.OutDir)
	if err != nil {
		return nil, err
	}
	ident, measurement, enc, mjson := sp.ident, sp.measurement, sp.enc, sp.manifest
	out.AttesterDID, out.Simulated = ident.DID, ident.Simulated
	say("packctl seal: key attestation of " + ident.DID + " verified (simulated platform), sealing to its HPKE key")

	// 5. The harness starts a run with the sealed pack.
	var runResp struct {
		RunID           string              `json:"run_id"`
		Capability      string              `json:"capability"`
		PromptHash      string              `json:"system_prompt_hash_b64u"`
		ReportHash      string              `json:"report_hash_b64u"`
		CTHash          string              `json:"prompt_pack_ciphertext_hash_b64u"`
		PromptCommitted poh.EventChainEntry `json:"prompt_committed"`
		GatePolicyHash  string              `json:"gate_policy_hash_b64u"`
	}
	if err := ctl.do("POST", "/v1/runs", map[string]any{
		"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mjson), "report_hash_b64u": out.ReportHash,
		"agent_id": "main", "session_key": "agent:main:main",
	}, &runResp); err != nil {
		return nil, err
	}
	if runResp.PromptHash != out.PromptHash {
		return nil, fmt.Errorf("attester rebuilt prompt hash %s, pack author expected %s", runResp.PromptHash, out.PromptHash)
	}
	out.RunID = runResp.RunID
	ctl.capability = runResp.Capability
	say("attester: pack opened in sealed memory, prompt rebuilt and matched, run " + out.RunID)

	// 6. The harness fetches the prompt over the control socket.
	prompt, err := ctl.fetchPrompt(ctx, out.RunID)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(prompt, rb.Prompt) {
		return nil, errors.New("prompt served on the control socket differs from the rebuilt prompt")
	}
	say(fmt.Sprintf("harness: fetched the %d-byte prompt over the control socket with the run's capability (never over TCP)", len(prompt)))

	// 7. A turn from the owner, then tool calls through the gate.
	agentKey := ed25519.NewKeyFromSeed(sha256Sum("clawea demo agent key"))
	agentDID := didkey.Format(agentKey.Public().(ed25519.PublicKey))
	out.AgentDID = agentDID
	var turn struct {
		TurnID string `json:"turn_id"`
		Owner  bool   `json:"owner"`
	}
	msgHash := sha256.Sum256([]byte("please list the workspace"))
	if err := ctl.do("POST", "/v1/runs/"+out.RunID+"/turns", map[string]any{
		"sender_id": "+15550100", "channel": "telegram", "message_id": "42",
		"content_sha256_b64u": b64u.Encode(msgHash[:]),
	}, &turn); err != nil {
		return nil, err
	}
	if !turn.Owner {
		return nil, errors.New("the configured owner's message did not start an owner turn")
	}
	chain := &eventChain{idFormat: "evt_demo_%03d", events: []poh.EventChainEntry{runResp.PromptCommitted}}
	llm, err := chain.add("llm_call", b64u.SHA256([]byte("demo llm call 1")))
	if err != nil {
		return nil, err
	}
	steps := []step{
		{Tool: "read", Params: `{"path":"README.md"}`, WantAllow: true},
		{Tool: "browser", Params: `{"url":"https://example.com"}`, WantAllow: false, WantStage: "tool_policy"},
		{Tool: "exec", Params: `{"command":"ls -la"}`, WantAllow: false, WantStage: "verification_gate"},
		{Tool: "verify"},
		{Tool: "exec", Params: `{"command":"ls -la"}`, WantAllow: true},
		{Tool: "exec", Params: `{"command":"rm -rf /"}`, WantAllow: false, WantStage: "external_verifier"},
	}
	for _, st := range steps {
		if st.Tool == "verify" {
			var v map[string]any
			if err := ctl.do("POST", "/v1/runs/"+out.RunID+"/verify", map[string]any{"turn_id": turn.TurnID}, &v); err != nil {
				return nil, err
			}
			say("owner: verify succeeded for this turn (templates verified)")
			continue
		}
		var d map[string]any
		if err := ctl.do("POST", "/v1/runs/"+out.RunID+"/tool-calls", map[string]any{
			"turn_id": turn.TurnID, "tool": st.Tool, "params": json.RawMessage(st.Params), "message_provider": "telegram",
		}, &d); err != nil {
			return nil, err
		}
		allow, _ := d["allow"].(bool)
		stage, _ := d["stage"].(string)
		if allow != st.WantAllow || (st.WantStage != "" && stage != st.WantStage) {
			return nil, fmt.Errorf("tool %s: allow=%v stage=%q reason=%v, want allow=%v at %s", st.Tool, allow, stage, d["reason"], st.WantAllow, st.WantStage)
		}
		out.Decisions = append(out.Decisions, d)
		verdict := "DENIED"
		if allow {
			verdict = "allowed"
			if ph, _ := d["params_hash_b64u"].(string); ph != "" {
				if _, err := chain.add("tool_call", ph); err != nil {
					return nil, err
				}
			}
		}
		say(fmt.Sprintf("gate: %-7s %-8s by %s: %v", st.Tool, verdict, stage, d["reason"]))
	}

	// 8. The agent signs its PoH proof bundle.
	bundle, err := signBundle(rb, chain.events, llm, agentKey, out.RunID, runResp.CTHash)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "bundle.json"), bundle, 0o644); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("agent: signed the proof bundle (%d events) as %s", len(chain.events), agentDID))

	// 9. The attester checks the bundle and attests with fresh evidence.
	var att struct {
		Attestation json.RawMessage `json:"attestation"`
		EvidenceJWS string          `json:"evidence_jws"`
		Platform    string          `json:"platform"`
		Simulated   bool            `json:"simulated"`
	}
	if err := ctl.do("POST", "/v1/runs/"+out.RunID+"/attestation", map[string]any{"bundle": json.RawMessage(bundle), "agent_did": agentDID}, &att); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "attestation.json"), att.Attestation, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "evidence.jws"), []byte(att.EvidenceJWS), 0o644); err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", ctl.base+"/v1/runs/"+out.RunID+"/audit", nil)
	req.Header.Set("Authorization", "Bearer "+ctl.capability)
	resp, err := ctl.hc.Do(req)
	if err != nil {
		return nil, proc.explain(err)
	}
	auditLog, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("audit: %s", resp.Status)
	}
	out.AuditRoot, out.AuditCount = resp.Header.Get("X-Clawea-Audit-Root"), resp.Header.Get("X-Clawea-Audit-Count")
	if err := os.WriteFile(filepath.Join(o.OutDir, "audit.jsonl"), auditLog, 0o644); err != nil {
		return nil, err
	}
	// 10. The relying party's policy for this demo: the reference values the
	// pack author and operator published, with simulated evidence allowed.
	pol := &verify.Policy{
		AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{measurement}, TrustedAttesterDIDs: []string{ident.DID},
		TrustedTemplates: trusted, TrustedRecipes: []verify.Recipe{{ID: "openclaw-sig", Version: "1"}},
		ExpectedPromptHashB64u: out.PromptHash, ExpectedReportHashB64u: out.ReportHash,
		ExpectedGatePolicyHashB64u: runResp.GatePolicyHash,
		ExpectedModel:              &verify.ModelIdentity{Provider: "anthropic", Model: "claude-demo"},
	}
	polJSON, err := pol.Encode()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "policy.json"), polJSON, 0o644); err != nil {
		return nil, err
	}
	// The relying party's own key for signing its EAR verdict (not an
	// attester secret: a demo verifier key).
	_, earKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(earKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "ear-signing.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("attester: execution attestation issued on %s (simulated=%v), audit log %s records", att.Platform, att.Simulated, out.AuditCount))

	// 11. The sensitive job, on a second attester that enforces a
	// sensitive admission policy, and one disclosure to an auditor (on the
	// simulated platform only: it compares both attesters' measurements).
	if o.Platform == nil {
		if out.Sensitive, err = runSensitive(ctx, o, say, src, toolSchemas, out); err != nil {
			return nil, fmt.Errorf("sensitive run: %w", err)
		}
	}
	if err := proc.stop(); err != nil {
		return nil, err
	}
	return out, nil
}

// webhook is the operator's external verifier: it checks the HMAC over the
// raw body and denies destructive commands.
func webhook(w http.ResponseWriter, r *http.Request) {
	body, err := bounded.ReadBody(w, r, 1<<20)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(r.Header.Get("X-OpenClaw-Signature")), []byte(want)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var req struct {
		Tool struct {
			Name   string         `json:"name"`
			Params map[string]any `json:"params"`
		} `json:"tool"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	decision := map[string]string{"decision": "allow"}
	if cmd, _ := req.Tool.Params["command"].(string); strings.Contains(cmd, "rm -rf") {
		decision = map[string]string{"decision": "deny", "reason": "destructive command refused by the operator's verifier"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(decision)
}

// demoConfig is an attester configuration file with the given attester
// section and the demo operator's gate (the verification gate on, browser
// denied, exec and write sent to the HMAC webhook at hookURL, failing
// closed). It writes the configuration, secrets redacted, to path and
// returns it whole, for the attester.
func demoConfig(attester, override map[string]any, hookURL, path string) ([]byte, error) {
	maps.Copy(attester, override)
	rawCfg, err := json.Marshal(map[string]any{
		"attester": attester,
		"agents":   map[string]any{"defaults": map[string]any{"sig": map[string]any{"enforceVerification": true}}},
		"tools": map[string]any{
			"deny": []string{"browser"},
			"verifier": map[string]any{
				"enabled": true, "failMode": "deny",
				"scope":   map[string]any{"include": []string{"exec", "write"}},
				"webhook": map[string]any{"url": hookURL + "/verify", "timeout": 5, "secret": webhookSecret},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, redactConfig(rawCfg), 0o644); err != nil {
		return nil, err
	}
	return rawCfg, nil
}

// identityDoc is the GET /v1/identity answer the demo reads.
type identityDoc struct {
	DID            string `json:"did"`
	PackPublicKey  string `json:"pack_public_key"`
	KeyAttestation string `json:"key_attestation"`
	Simulated      bool   `json:"simulated"`
}

// sealedToAttester is a pack sealed to an attester whose key attestation
// was checked, with the launch measurement that attestation showed.
type sealedToAttester struct {
	ident         identityDoc
	measurement   []byte
	enc, manifest []byte
}

// sealToAttester does what packctl seal --attester does: it fetches the
// attester's identity with a fresh challenge, checks its key attestation,
// seals the pack to the attested HPKE key, and writes pack.enc,
// manifest.json, report.json and key_attestation.jws to dir.
func sealToAttester(c *client, pack *promptpack.Pack, report []byte, dir string) (*sealedToAttester, error) {
	challenge := make([]byte, 32)
	rand.Read(challenge)
	var sp sealedToAttester
	if err := c.do("GET", "/v1/identity?challenge="+b64u.Encode(challenge), nil, &sp.ident); err != nil {
		return nil, err
	}
	recipient, measurement, err := checkKeyAttestation(sp.ident.DID, sp.ident.PackPublicKey, []byte(sp.ident.KeyAttestation), challenge)
	if err != nil {
		return nil, fmt.Errorf("key attestation: %w", err)
	}
	sp.measurement = measurement
	enc, manifest, err := promptpack.SealPack(pack, recipient)
	if err != nil {
		return nil, err
	}
	mjson, err := manifest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	sp.enc, sp.manifest = enc, mjson
	for name, b := range map[string][]byte{"pack.enc": enc, "manifest.json": mjson, "report.json": report, "key_attestation.jws": []byte(sp.ident.KeyAttestation)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	return &sp, nil
}

// checkKeyAttestation is what packctl seal --attester does before wrapping
// (verify.VerifyKeyAttestation), with simulated evidence allowed because this
// is the demo. The measurement is read from the verified evidence here; a
// real pack author takes it from the operator's published reference values.
func checkKeyAttestation(did, packPub string, jws, challenge []byte) (*envelope.PublicKey, []byte, error) {
	pol := &verify.Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, AllowAnyMeasurement: true, TrustedAttesterDIDs: []string{did}}
	res, err := verify.VerifyKeyAttestation(jws, challenge, pol, verify.Options{Now: time.Now})
	if err != nil {
		return nil, nil, err
	}
	recipient, err := envelope.ParsePublicKey(packPub)
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(res.RecipientX25519, recipient.Bytes()) {
		return nil, nil, errors.New("the key attestation does not bind the pack recipient key")
	}
	return recipient, res.Platform[0].Measurement, nil
}

type client struct {
	base       string
	hc         *http.Client
	capability string        // the run's capability, sent as a bearer token
	proc       *attesterProc // the attester answering, whose exit explains a failed request
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

func (c *client) do(method, path string, body, out any) error {
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rdr)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.capability != "" {
		req.Header.Set("Authorization", "Bearer "+c.capability)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.proc.explain(err)
	}
	defer resp.Body.Close()
	b, err := bounded.Read(resp.Body, 32<<20, "response")
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, strings.SplitN(path, "?", 2)[0], resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *client) fetchPrompt(ctx context.Context, runID string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/v1/runs/"+runID+"/prompt", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.capability)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.proc.explain(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("prompt: %s", resp.Status)
	}
	return bounded.Read(resp.Body, 16<<20, "prompt")
}

func sha256Sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// redactConfig replaces the webhook secret before the config is written.
func redactConfig(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(webhookSecret), []byte("[REDACTED]"))
}
