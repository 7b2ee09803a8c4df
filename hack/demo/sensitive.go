package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify"
)

// Sensitive-run artifacts, relative to the output directory.
const (
	sensitiveDir        = "sensitive"
	admissionFile       = "admission.json"
	sensitivePolicyFile = "policy-sensitive.json"
	disclosureFile      = "disclosure.json"
	// discloseSelector is the input the demo reveals to an auditor.
	discloseSelector = "bootstrap:SOUL.md"
	// ownerDisplaySecret is the operator's HMAC key for owner identities
	// (OpenClaw commands.ownerDisplaySecret) in the sensitive variant.
	ownerDisplaySecret = "demo-owner-display-secret"
)

// sensitiveOutcome is what the sensitive run produced.
type sensitiveOutcome struct {
	RunID               string
	AttesterDID         string
	AdmissionPolicyHash string
	ReportHash          string
	// PlainRefusal is why the sensitive verify policy refuses the first
	// (non-sensitive) run's attestation.
	PlainRefusal string
	Disclosed    string
}

// sensitiveParams is the pack author's sensitive variant of the builder
// params: what no sensitive admission policy admits is taken out (plugin
// tool summaries, skills, the extra system prompt) and owner identities are
// rendered as HMAC values (docs/spec/admission-policy-v1.md section 5).
func sensitiveParams(raw []byte) ([]byte, error) {
	var params map[string]any
	if err := json.Unmarshal(raw, &params); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	delete(params, "toolSummaries")
	delete(params, "skillsPrompt")
	delete(params, "extraSystemPrompt")
	if owners, ok := params["ownerNumbers"].([]any); ok {
		out := make([]any, 0, len(owners))
		for _, o := range owners {
			s, _ := o.(string)
			mac := hmac.New(sha256.New, []byte(ownerDisplaySecret))
			mac.Write([]byte(s))
			out = append(out, hex.EncodeToString(mac.Sum(nil))[:12])
		}
		params["ownerNumbers"] = out
	}
	return json.Marshal(params)
}

// runSensitive is the sensitive job: the pack author builds a v2 pack of
// the sensitive variant and suggests a sensitive admission policy for it;
// the operator starts a second attester that enforces that policy and meets
// its run-time obligations (locked memory, no development option, failMode
// deny, the verification gate); the run is attested as sensitive, verifies
// with a verify policy that requires sensitive mode, and the first run's
// attestation is refused by the same policy. Then one input is disclosed to
// an auditor and checked against the report and the attestation.
func runSensitive(ctx context.Context, o options, say func(string), src *harnessSource, toolSchemas []byte, plain *outcome) (*sensitiveOutcome, error) {
	outDir := filepath.Join(o.OutDir, sensitiveDir)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	params, err := sensitiveParams(src.Params)
	if err != nil {
		return nil, err
	}
	pack, err := promptpack.Build(params, src.Dir, "openclaw-sig", promptpack.BuildOptions{ToolSchemas: toolSchemas, ReportVersion: 2})
	if err != nil {
		return nil, fmt.Errorf("sensitive build: %w", err)
	}
	defer pack.Wipe()
	rb, err := pack.Rebuild(src.Trusted)
	if err != nil {
		return nil, fmt.Errorf("sensitive rebuild: %w", err)
	}
	defer rb.Wipe()
	// Fragments of this prompt must never reach disk or logs either (the
	// disclosed SOUL.md is shorter than a fragment).
	plain.SecretProbes = append(plain.SecretProbes, bytes.Clone(rb.Prompt[len(rb.Prompt)/2:len(rb.Prompt)/2+48]))
	// packctl admission --sensitive: the strictest policy admitting the pack.
	polJSON, err := admission.Suggest(pack, true)
	if err != nil {
		return nil, fmt.Errorf("admission suggestion: %w", err)
	}
	pol, err := admission.Parse(polJSON)
	if err != nil {
		return nil, fmt.Errorf("suggested admission policy: %w", err)
	}
	admissionPath, err := filepath.Abs(filepath.Join(o.OutDir, admissionFile))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(admissionPath, polJSON, 0o644); err != nil {
		return nil, err
	}
	say("packctl build --report-version 2 + packctl admission --sensitive: sensitive variant of the pack, admission policy " + pol.Hash())

	// The operator's sensitive attester: no development option, packs in
	// locked memory only (no allowUnlockedMemory), an ephemeral identity (no
	// stateDir), the verification gate on, and an https webhook verifier
	// that fails closed. The attester trusts the webhook's certificate as
	// an operator's would: through the system roots, here the file that
	// SSL_CERT_FILE names.
	hook := httptest.NewTLSServer(http.HandlerFunc(webhook))
	defer hook.Close()
	workDir := filepath.Join(o.WorkDir, "sensitive")
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, err
	}
	hookCA := filepath.Join(workDir, "webhook-ca.pem")
	if err := os.WriteFile(hookCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o644); err != nil {
		return nil, err
	}
	cfg, err := demoConfig(map[string]any{
		"listen": "127.0.0.1:0", "metricsListen": "127.0.0.1:0",
		"controlSocket": filepath.Join(workDir, "control", "attester.sock"), "platform": "simulated",
		"owners":           []string{"telegram:+15550100"},
		"trustedTemplates": src.Trusted, "admissionPolicy": admissionPath,
		"modelProvider": "anthropic", "model": "claude-demo",
	}, nil, hook.URL, filepath.Join(o.OutDir, "attester-sensitive.json"))
	if err != nil {
		return nil, err
	}
	proc, err := startAttester(ctx, o.Attester, "sensitive attester", workDir, cfg, []string{"SSL_CERT_FILE=" + hookCA}, o.Log)
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	ctl := proc.ctl
	say("operator: started the sensitive attester " + proc.String() + ", trusting the https webhook's certificate through SSL_CERT_FILE")
	sp, err := sealToAttester(proc.pub, pack, rb.ReportJCS, outDir)
	if err != nil {
		return nil, fmt.Errorf("sensitive attester: %w", err)
	}
	ident, measurement, enc, mjson := sp.ident, sp.measurement, sp.enc, sp.manifest
	var runResp struct {
		RunID           string              `json:"run_id"`
		Capability      string              `json:"capability"`
		CTHash          string              `json:"prompt_pack_ciphertext_hash_b64u"`
		PromptCommitted poh.EventChainEntry `json:"prompt_committed"`
		AdmissionHash   string              `json:"admission_policy_hash_b64u"`
		Sensitive       bool                `json:"sensitive"`
	}
	if err := ctl.do("POST", "/v1/runs", map[string]any{
		"pack_b64u": b64u.Encode(enc), "manifest": json.RawMessage(mjson), "report_hash_b64u": rb.ReportHashB64u(),
		"agent_id": "main", "session_key": "agent:main:sensitive",
	}, &runResp); err != nil {
		return nil, err
	}
	if !runResp.Sensitive || runResp.AdmissionHash != pol.Hash() {
		return nil, fmt.Errorf("the sensitive attester created run %s as sensitive=%v under %q", runResp.RunID, runResp.Sensitive, runResp.AdmissionHash)
	}
	ctl.capability = runResp.Capability
	say("sensitive attester: pack admitted by " + pol.Hash() + " (locked memory, no development option, failMode deny, verification gate on), run " + runResp.RunID)

	// One owner turn: verify, then a gated call the webhook allows.
	agentKey := ed25519.NewKeyFromSeed(sha256Sum("clawea demo sensitive agent key"))
	agentDID := didkey.Format(agentKey.Public().(ed25519.PublicKey))
	var turn struct {
		TurnID string `json:"turn_id"`
	}
	msgHash := sha256.Sum256([]byte("summarise the notes"))
	if err := ctl.do("POST", "/v1/runs/"+runResp.RunID+"/turns", map[string]any{
		"sender_id": "+15550100", "channel": "telegram", "message_id": "43", "content_sha256_b64u": b64u.Encode(msgHash[:]),
	}, &turn); err != nil {
		return nil, err
	}
	if err := ctl.do("POST", "/v1/runs/"+runResp.RunID+"/verify", map[string]any{"turn_id": turn.TurnID}, nil); err != nil {
		return nil, err
	}
	chain := &eventChain{idFormat: "evt_sens_%03d", events: []poh.EventChainEntry{runResp.PromptCommitted}}
	llm, err := chain.add("llm_call", b64u.SHA256([]byte("demo sensitive llm call")))
	if err != nil {
		return nil, err
	}
	var d map[string]any
	if err := ctl.do("POST", "/v1/runs/"+runResp.RunID+"/tool-calls", map[string]any{
		"turn_id": turn.TurnID, "tool": "exec", "params": json.RawMessage(`{"command":"ls -la"}`), "message_provider": "telegram",
	}, &d); err != nil {
		return nil, err
	}
	if allow, _ := d["allow"].(bool); !allow {
		return nil, fmt.Errorf("sensitive run: exec was not allowed: %v", d["reason"])
	}
	if ph, _ := d["params_hash_b64u"].(string); ph != "" {
		if _, err := chain.add("tool_call", ph); err != nil {
			return nil, err
		}
	}
	bundle, err := signBundle(rb, chain.events, llm, agentKey, runResp.RunID, runResp.CTHash)
	if err != nil {
		return nil, err
	}
	var att struct {
		Attestation json.RawMessage `json:"attestation"`
		EvidenceJWS string          `json:"evidence_jws"`
	}
	if err := ctl.do("POST", "/v1/runs/"+runResp.RunID+"/attestation", map[string]any{"bundle": json.RawMessage(bundle), "agent_did": agentDID}, &att); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"bundle.json": bundle, "attestation.json": att.Attestation, "evidence.jws": []byte(att.EvidenceJWS)} {
		if err := os.WriteFile(filepath.Join(outDir, name), b, 0o644); err != nil {
			return nil, err
		}
	}

	// The relying party's sensitive policy: both demo attesters are
	// trusted, and only a sensitive run admitted under the suggested
	// admission policy is accepted.
	vpol := &verify.Policy{
		AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{measurement}, TrustedAttesterDIDs: []string{plain.AttesterDID, ident.DID},
		TrustedTemplates: src.Trusted, TrustedRecipes: []verify.Recipe{{ID: "openclaw-sig", Version: "1"}},
		ExpectedModel:         &verify.ModelIdentity{Provider: "anthropic", Model: "claude-demo"},
		AdmissionPolicyHashes: []string{pol.Hash()}, RequireSensitive: true,
	}
	vpolJSON, err := vpol.Encode()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, sensitivePolicyFile), vpolJSON, 0o644); err != nil {
		return nil, err
	}
	res, err := verify.Verify(att.Attestation, []byte(att.EvidenceJWS), bundle, vpol, verify.Options{Now: time.Now, Report: rb.ReportJCS})
	if err != nil {
		return nil, fmt.Errorf("the sensitive run does not verify with the sensitive policy: %w", err)
	}
	out := &sensitiveOutcome{RunID: runResp.RunID, AttesterDID: ident.DID, AdmissionPolicyHash: pol.Hash(), ReportHash: rb.ReportHashB64u()}
	say("relying party: the sensitive run verifies with " + sensitivePolicyFile + " (admission policy " + verify.AdmissionPolicyOf(&res.Commitments) + ")")
	plainAtt, err := os.ReadFile(filepath.Join(o.OutDir, "attestation.json"))
	if err != nil {
		return nil, err
	}
	plainEv, err := os.ReadFile(filepath.Join(o.OutDir, "evidence.jws"))
	if err != nil {
		return nil, err
	}
	_, err = verify.Verify(plainAtt, plainEv, nil, vpol, verify.Options{Now: time.Now})
	ve, ok := errors.AsType[*verify.Error](err)
	if !ok || !errors.Is(err, verify.ErrPolicy) || ve.Field != "admission_policy_hashes_b64u" {
		return nil, fmt.Errorf("the first run's attestation is not refused by the sensitive policy's admission check: %v", err)
	}
	out.PlainRefusal = err.Error()
	say("relying party: the first (non-sensitive) run is refused by the same policy: " + ve.Err.Error())

	// packctl disclose: reveal one input to an auditor, bound to the
	// report; packctl verify-disclosure: the disclosure against the report,
	// and the report against the attestation.
	disJSON, err := rb.Disclose([]string{discloseSelector})
	if err != nil {
		return nil, fmt.Errorf("disclose: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, disclosureFile), disJSON, 0o600); err != nil {
		return nil, err
	}
	dres, err := promptpack.VerifyDisclosure(rb.ReportJCS, disJSON)
	if err != nil {
		return nil, fmt.Errorf("verify-disclosure: %w", err)
	}
	if dres.ReportHashB64u != res.Commitments.SystemPromptReportHashB64u {
		return nil, errors.New("the disclosure's report is not the attested one")
	}
	out.Disclosed = discloseSelector
	say("auditor: disclosure of " + discloseSelector + " verified against the sensitive run's report and attestation")
	if err := proc.stop(); err != nil {
		return nil, err
	}
	return out, nil
}

// eventChain is a run's PoH event chain, from its prompt_committed event.
type eventChain struct {
	idFormat string // the event ids, numbered from 1 (e.g. "evt_demo_%03d")
	events   []poh.EventChainEntry
}

// add appends the next event: type typ over payloadHash, stamped now.
func (c *eventChain) add(typ, payloadHash string) (poh.EventChainEntry, error) {
	e, err := c.events[len(c.events)-1].Next(fmt.Sprintf(c.idFormat, len(c.events)), typ, poh.FormatTime(time.Now()), payloadHash)
	if err != nil {
		return poh.EventChainEntry{}, err
	}
	c.events = append(c.events, e)
	return e, nil
}

// signBundle is the agent's PoH proof bundle for a run (both demo runs): its event chain and
// the system prompt report naming the run's llm_call.
func signBundle(rb *promptpack.Rebuilt, chain []poh.EventChainEntry, llm poh.EventChainEntry, agentKey ed25519.PrivateKey, runID, ctHash string) ([]byte, error) {
	agentDID := didkey.Format(agentKey.Public().(ed25519.PublicKey))
	reportDoc, _, err := rb.SystemPromptReportCommitment(promptpack.ReportCommitmentInput{
		ReportID: "spr_" + runID, RunID: runID, AgentDID: agentDID, IssuedAt: time.Now(),
		Calls: []promptpack.CallRef{{EventID: llm.EventID, EventHashB64u: llm.EventHashB64u, Provider: "anthropic", Model: "claude-demo"}},
	})
	if err != nil {
		return nil, err
	}
	events := make([]*pohjson.Value, 0, len(chain))
	for _, e := range chain {
		v, err := pohjson.FromGo(e)
		if err != nil {
			return nil, err
		}
		events = append(events, v)
	}
	reportV, err := pohjson.FromGo(reportDoc)
	if err != nil {
		return nil, err
	}
	payload := pohjson.NewObject(
		pohjson.M("bundle_version", pohjson.NewString("1")),
		pohjson.M("bundle_id", pohjson.NewString("bundle_"+runID)),
		pohjson.M("agent_did", pohjson.NewString(agentDID)),
		pohjson.M("event_chain", pohjson.NewArray(events...)),
		pohjson.M("metadata", pohjson.NewObject(
			pohjson.M("system_prompt_report", reportV),
			pohjson.M("clawea", pohjson.NewObject(
				pohjson.M("system_prompt_report_hash_b64u", pohjson.NewString(rb.ReportHashB64u())),
				pohjson.M("prompt_pack_ciphertext_hash_b64u", pohjson.NewString(ctHash)),
			)),
		)),
	)
	return poh.Sign(poh.TypeProofBundle, payload, agentKey, time.Now())
}
