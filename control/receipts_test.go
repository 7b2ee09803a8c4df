package control

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidencedoc"
)

// gatewayBundle is the agent's proof bundle for a run whose one llm_call
// reported systemText as the system text it sent: the run's
// prompt_committed event, the llm_call, the prompt commitments and the
// receipts given.
func gatewayBundle(t *testing.T, rb *promptpack.Rebuilt, rn *Run, agent ed25519.PrivateKey, now time.Time, systemText string, receipts ...[]byte) ([]byte, poh.EventChainEntry) {
	t.Helper()
	suffix := gwSuffix
	call := pohjson.NewObject(
		pohjson.M("llm_call_version", pohjson.NewString("1")),
		pohjson.M("call_id", pohjson.NewString("call_1")),
		pohjson.M("provider", pohjson.NewString("p")),
		pohjson.M("model", pohjson.NewString("m")),
		pohjson.M("system_prompt_hash_b64u", pohjson.NewString(rn.promptH)),
		pohjson.M("system_prompt_report_hash_b64u", pohjson.NewString(rn.reportH)),
		pohjson.M("system_text_hash_b64u", pohjson.NewString(b64u.SHA256([]byte(systemText)))),
		pohjson.M("attested_prefix", pohjson.NewBool(true)),
		pohjson.M("suffix_utf16_len", pohjson.NewInt(int64(len(suffix)))),
		pohjson.M("suffix_hash_b64u", pohjson.NewString(b64u.SHA256([]byte(suffix)))),
	)
	ph, err := pohjson.Hash(call)
	if err != nil {
		t.Fatal(err)
	}
	e, err := rn.committed.Next("evt_llm_1", poh.EventTypeLLMCall, poh.FormatTime(now), ph)
	if err != nil {
		t.Fatal(err)
	}
	agentDID := didkey.Format(agent.Public().(ed25519.PublicKey))
	report, _, err := rb.SystemPromptReportCommitment(promptpack.ReportCommitmentInput{
		ReportID: "spr_1", RunID: rn.id, AgentDID: agentDID, IssuedAt: now,
		Calls: []promptpack.CallRef{{EventID: e.EventID, EventHashB64u: e.EventHashB64u, Provider: "p", Model: "m"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var rs []*pohjson.Value
	for _, r := range receipts {
		v, err := pohjson.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, v)
	}
	calls, err := pohjson.Stringify(pohjson.NewArray(call))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := pohjson.FromGo(map[string]any{
		"bundle_version": "1", "bundle_id": "bundle_1", "agent_did": agentDID,
		"event_chain": []poh.EventChainEntry{rn.committed, e},
		"metadata": map[string]any{
			"system_prompt_report": report,
			"clawea":               map[string]string{"system_prompt_report_hash_b64u": rn.reportH, "prompt_pack_ciphertext_hash_b64u": rn.packCTH},
			"clawea_llm_calls":     json.RawMessage(calls),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) > 0 {
		payload = pohjson.NewObject(append(payload.Members(), pohjson.M("receipts", pohjson.NewArray(rs...)))...)
	}
	b, err := poh.Sign(poh.TypeProofBundle, payload, agent, now)
	if err != nil {
		t.Fatal(err)
	}
	return b, e
}

// The system text a gwRun's llm_call sends: the attested prompt and the
// suffix.
const (
	gwSuffix = "\nmodel: m"
	gwSent   = "the rebuilt prompt" + gwSuffix
)

// gwRun is a run created on s for a fresh agent, with what its bundles and
// receipts are made of.
type gwRun struct {
	s     *Service
	rb    *promptpack.Rebuilt
	rn    *Run
	agent ed25519.PrivateKey
	now   time.Time
}

func newGWRun(t *testing.T, s *Service, rb *promptpack.Rebuilt, enc, mj []byte) *gwRun {
	t.Helper()
	_, agent, _ := ed25519.GenerateKey(nil)
	_, rn, _, err := s.CreateRun(from(testProc), decoded(&createRunRequest{PackB64u: b64u.Encode(enc), Manifest: mj, ReportHashB64u: rb.ReportHashB64u(), AgentID: "main", SessionKey: "k"}))
	if err != nil {
		t.Fatal(err)
	}
	return &gwRun{s: s, rb: rb, rn: rn, agent: agent, now: time.Now()}
}

// bundle is the run's bundle whose llm_call reports systemText, with
// receipts.
func (g *gwRun) bundle(t *testing.T, systemText string, receipts ...[]byte) []byte {
	b, _ := gatewayBundle(t, g.rb, g.rn, g.agent, g.now, systemText, receipts...)
	return b
}

// call is the gateway's record of the llm_call that sent gwSent.
func (g *gwRun) call(t *testing.T) gateway.Call {
	_, e := gatewayBundle(t, g.rb, g.rn, g.agent, g.now, gwSent)
	return gateway.Call{
		RunID: g.rn.id, ReceiptID: "rcpt_1", Provider: "p", Model: "m", EventHashB64u: e.EventHashB64u,
		RequestSHA256: sha256.Sum256([]byte("request")), ResponseSHA256: sha256.Sum256([]byte("response")),
		TokensInput: 10, TokensOutput: 2, Latency: time.Second, At: g.now,
		SystemTextSHA256: sha256.Sum256([]byte(gwSent)), SuffixSHA256: sha256.Sum256([]byte(gwSuffix)), SuffixUTF16Len: int64(len(gwSuffix)),
	}
}

// signAndRecord receipts c as a model call of rn is: signed, then recorded.
func signAndRecord(s *Service, rn *Run, c *gateway.Call) ([]byte, error) {
	var f gateway.Facts
	s.receiptSigner(rn, &f)
	env, err := f.Receipt(c)
	if err != nil {
		return nil, err
	}
	return env, f.Record(env)
}

func (g *gwRun) attest(b []byte) (*attestation.Output, error) {
	return g.s.Attest(context.Background(), g.rn, decoded(&attestRequest{Bundle: b, AgentDID: didkey.Format(g.agent.Public().(ed25519.PublicKey))}))
}

// TestAttestChecksGatewayRecord (issue 20 item 6): the attestation endpoint
// holds the bundle to the run's gateway record. A bundle whose receipt is
// the record's is attested with v4 commitments; one without it, one whose
// receipt the attester did not record, and one whose llm_call reports other
// system text than the gateway forwarded are refused with 422 and a PoH
// reason code.
func TestAttestChecksGatewayRecord(t *testing.T) {
	p, s, enc, mj := newSealedPack(t)
	g := newGWRun(t, s, p.Rebuilt, enc, mj)
	call := g.call(t)
	recorded, err := signAndRecord(s, g.rn, &call)
	if err != nil {
		t.Fatal(err)
	}
	unrecorded := call
	unrecorded.TokensOutput = 3
	stray, err := gateway.SignReceipt(unrecorded, s.id.Signer)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		text     string
		receipts [][]byte
		code     poh.Code
	}{
		"no receipt":          {gwSent, nil, poh.EvidenceMismatch},
		"an unrecorded one":   {gwSent, [][]byte{stray}, poh.EvidenceMismatch},
		"both":                {gwSent, [][]byte{recorded, stray}, poh.MalformedEnvelope},
		"other reported text": {"another prompt", [][]byte{recorded}, poh.ReceiptBindingMismatch},
	} {
		_, err := g.attest(g.bundle(t, c.text, c.receipts...))
		if ce, ok := errors.AsType[*Error](err); !ok || ce.kind != kindUnprocessable || ce.Reason != string(c.code) {
			t.Errorf("%s: %v, want 422 %s", name, err, c.code)
		}
	}
	out, err := g.attest(g.bundle(t, gwSent, recorded))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := evidencedoc.Parse(out.EvidenceJWS, s.id.Public)
	if err != nil {
		t.Fatal(err)
	}
	n, chain := g.rn.receipts.summary()
	if c := doc.Execution.Clawea; c.Version != evidencedoc.CommitmentsVersionV4 || c.Gateway == nil || c.Gateway.ReceiptCount != n || c.Gateway.ReceiptChainB64u != chain {
		t.Fatalf("commitments %+v", c)
	}
}

// TestAdmissionRequiresGateway (admission-policy-v1.md section 7.1): under
// an admission policy with model_gateway "required", a run whose llm_call
// the gateway did not receipt is not attested (422
// MISSING_REQUIRED_FIELD); with its receipt it is.
func TestAdmissionRequiresGateway(t *testing.T) {
	p, s, enc, mj := newSealedPack(t)
	suggested, err := admission.Suggest(p.Pack, false)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(suggested, '}')
	pol, err := admission.Parse(append(append(bytes.Clone(suggested[:i]), `,"model_gateway":"required"`...), suggested[i:]...))
	if err != nil || !pol.RequiresGateway() {
		t.Fatalf("policy: %v", err)
	}
	s.cfg.AdmissionPolicy = pol
	g := newGWRun(t, s, p.Rebuilt, enc, mj)
	_, err = g.attest(g.bundle(t, gwSent))
	if ce, ok := errors.AsType[*Error](err); !ok || ce.kind != kindUnprocessable || ce.Reason != string(poh.MissingRequiredField) {
		t.Fatalf("an llm_call without a receipt: %v, want 422 %s", err, poh.MissingRequiredField)
	}
	c := g.call(t)
	env, err := signAndRecord(s, g.rn, &c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.attest(g.bundle(t, gwSent, env)); err != nil {
		t.Fatal(err)
	}
}

// TestModelCallFreesBody: ModelCall gives the body's buffer back (free)
// exactly once, for a refused call (the gateway lets the body go when the
// call ends) and for a closed run (nothing is served).
func TestModelCallFreesBody(t *testing.T) {
	p, s, enc, mj := newSealedPack(t)
	g := newGWRun(t, s, p.Rebuilt, enc, mj)
	body := []byte(`{"model":"m","messages":[]}`)
	call := func() int {
		freed := 0
		r := httptest.NewRequest(http.MethodPost, "/v1/runs/"+g.rn.id+"/model/nope/openai-chat-completions", bytes.NewReader(body))
		w := httptest.NewRecorder()
		err := s.ModelCall(w, r, g.rn, testProc, "nope", "openai-chat-completions", body, func() { freed++ })
		if g.rn.closed != errors.Is(err, errRunClosed) {
			t.Fatalf("closed %v: %v", g.rn.closed, err)
		}
		if err == nil && w.Code < 400 {
			t.Fatalf("a call to an unconfigured provider got %d", w.Code)
		}
		return freed
	}
	if n := call(); n != 1 {
		t.Errorf("a refused call freed its body %d times", n)
	}
	g.rn.destroy()
	if n := call(); n != 1 {
		t.Errorf("a call of a closed run freed its body %d times", n)
	}
}
