package verify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/teeclaims"
)

// testNow is inside the validity of every simulated certificate.
var testNow = testfixture.Now

func fixedNow() time.Time { return testNow }

var (
	key = testfixture.Key
	h   = testfixture.H
)

func reportJSON(t testing.TB) ([]byte, string) {
	t.Helper()
	raw, hash := testfixture.Report(t)
	if err := schemas.Validate(schemas.SystemPromptReportV1, raw); err != nil {
		t.Fatal(err)
	}
	return raw, hash
}

// run is one agent run (testfixture.Run) and the knob to make its audit
// log disagree.
type run struct {
	testfixture.Run
	denySecond bool // the audit log denies the second tool call
}

func newRun(t testing.TB) *run {
	_, rh := reportJSON(t)
	r := testfixture.NewRun("run_verify_001")
	r.PromptHash = h(testfixture.ReportPrompt)
	r.ReportHash = rh
	r.BundleID = "bundle_verify_001"
	return &run{Run: *r}
}

func (r *run) bundle(t testing.TB) []byte { return r.Bundle(t) }

// auditLog writes the gate's log for the run: a denied call, then the
// two tool calls (the second denied when denySecond).
func (r *run) auditLog(t testing.TB) (log []byte, root string, count uint64) {
	t.Helper()
	var buf bytes.Buffer
	w, err := audit.NewWriter(&buf, audit.WriterOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	entries := []audit.Entry{
		{Session: "s1", Turn: "t1", Agent: "main", Tool: "exec", ParamsHash: h(`{"cmd":"rm -rf /"}`), Stage: "tool_policy", Decision: audit.Deny, Reason: "denied"},
		{Session: "s1", Turn: "t1", Agent: "main", Tool: "exec", ParamsHash: r.ToolParams[0], Stage: "tool_policy", Decision: audit.Allow},
		{Session: "s1", Turn: "t2", Agent: "main", Tool: "read", ParamsHash: r.ToolParams[1], Stage: "tool_policy", Decision: audit.Allow},
	}
	if r.denySecond {
		entries[2].Decision, entries[2].Reason = audit.Deny, "denied"
	}
	for _, e := range entries {
		if _, err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	root, count = w.Root()
	return buf.Bytes(), root, count
}

// fixture is an attestation made by the real producer.
type fixture struct {
	att, ev, bundle, audit, report []byte
	run                            *run
	measurement                    []byte
}

type measurer interface {
	enclave.Quoter
	LaunchMeasurement(context.Context) ([]byte, error)
}

func simSEV(t testing.TB, o sim.Options) measurer {
	t.Helper()
	if o.Seed == nil {
		o.Seed = []byte("verify-test")
	}
	s, err := sim.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simTDX(t testing.TB, o fakeqe.Options) measurer {
	t.Helper()
	s, err := tdx.NewSimulated(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func attesterKey() ed25519.PrivateKey { return key(9) }

// attest makes an attestation of r with the producer (attestation.Issuer).
func attest(t testing.TB, q measurer, r *run) *fixture {
	t.Helper()
	return attestWith(t, q, r, nil)
}

// attestWith is attest with the producer's input changed by tweak.
func attestWith(t testing.TB, q measurer, r *run, tweak func(*attestation.AttestInput)) *fixture {
	t.Helper()
	log, root, count := r.auditLog(t)
	bundle := r.bundle(t)
	in := attestfixture.Input(t, &r.Run, root, int64(count))
	in.BundleEnvelope = bundle
	if tweak != nil {
		tweak(&in)
	}
	out, m := attestfixture.Attest(t, attesterKey(), q, fixedNow, in)
	rep, _ := reportJSON(t)
	return &fixture{att: out.AttestationJSON, ev: out.EvidenceJWS, bundle: bundle, audit: log, report: rep, run: r, measurement: m}
}

// simPolicy accepts the fixture's simulated evidence.
func (f *fixture) simPolicy() *Policy {
	return &Policy{
		AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true,
		Measurements: [][]byte{f.measurement},
	}
}

func (f *fixture) opts() Options {
	return Options{Now: fixedNow, AuditLog: f.audit, Report: f.report}
}

// forgeSpec builds an attestation by hand, as the producer would, with
// hooks to make one part wrong. It lets tests sign what the producer
// refuses to sign.
type forgeSpec struct {
	quoter         enclave.Quoter
	docKey         ed25519.PrivateKey // signs the evidence document (default: attester key)
	rdKey          ed25519.PublicKey  // key bound into REPORT_DATA (default: attester key)
	agentDID       string
	runID          string
	bundle         []byte // its payload_hash_b64u is the attested bundle hash
	auditRoot      string
	auditCount     int64
	commitments    func(*evidencedoc.Commitments)
	mutateEvidence func(*evidence.Evidence)
	mutateJWS      func([]byte) []byte
	mutatePayload  func(*poh.ExecutionAttestation)
	extraItems     []evidencedoc.Item // after the quoter's evidence (GPU items)
}

func forge(t testing.TB, s forgeSpec) (att, jws []byte) {
	t.Helper()
	ak := attesterKey()
	if s.docKey == nil {
		s.docKey = ak
	}
	if s.rdKey == nil {
		s.rdKey = ak.Public().(ed25519.PublicKey)
	}
	bv, err := pohjson.Parse(s.bundle)
	if err != nil {
		t.Fatal(err)
	}
	bundleHash, _ := bv.GetString("payload_hash_b64u")
	if s.auditRoot == "" {
		s.auditRoot, s.auditCount = h("audit head"), 3
	}
	model, err := evidencedoc.NewModelIdentity("anthropic", "claude-opus-4-6", "")
	if err != nil {
		t.Fatal(err)
	}
	digest, err := model.Digest()
	if err != nil {
		t.Fatal(err)
	}
	_, rh := reportJSON(t)
	c := evidencedoc.Commitments{
		Version: evidencedoc.CommitmentsVersionV2, SystemPromptHashB64u: h(testfixture.ReportPrompt),
		SystemPromptReportHashB64u: rh, PromptPackCiphertextHashB64u: h("prompt_pack.enc"),
		GatePolicyHashB64u: h("gate policy"), GateAuditRootB64u: s.auditRoot, GateAuditCount: s.auditCount,
		ModelIdentity: model, ModelIdentityDigestB64u: digest, Sensitive: evidencedoc.SensitiveFalse,
	}
	if s.commitments != nil {
		s.commitments(&c)
	}
	nonce, err := poh.NonceBinding(s.agentDID, s.runID, bundleHash)
	if err != nil {
		t.Fatal(err)
	}
	ec := &evidencedoc.ExecutionContext{
		Context: evidencedoc.ExecutionContextLabel, AttestationID: "clawea_att_forged", AgentDID: s.agentDID,
		RunID: s.runID, ProofBundleHashB64u: bundleHash, Clawea: c,
	}
	ctxBytes, err := pohjson.Marshal(ec)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := evidence.NewReportData(nonce, s.rdKey, ctxBytes)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.quoter.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := teeclaims.Derive(ev)
	if err != nil {
		t.Fatal(err)
	}
	if s.mutateEvidence != nil {
		s.mutateEvidence(ev)
	}
	doc, err := evidencedoc.Sign(s.docKey, &evidencedoc.Document{
		Kind: evidencedoc.KindExecution, IssuedAt: testNow, Nonce: nonce, Execution: ec,
		Items: append([]evidencedoc.Item{{Evidence: ev}}, s.extraItems...),
	})
	if err != nil {
		t.Fatal(err)
	}
	jws = doc.JWS
	if s.mutateJWS != nil {
		jws = s.mutateJWS(bytes.Clone(jws))
	}
	rootID := claims.RootID
	if ev.Simulated && !bytes.HasSuffix([]byte(rootID), []byte(teeclaims.SimulatedSuffix)) {
		rootID += teeclaims.SimulatedSuffix
	}
	if !ev.Simulated {
		rootID = string(bytes.TrimSuffix([]byte(rootID), []byte(teeclaims.SimulatedSuffix)))
	}
	p := &poh.ExecutionAttestation{
		AttestationVersion: "1", AttestationID: ec.AttestationID, ExecutionType: "tee_execution",
		AgentDID: s.agentDID, AttesterDID: did(ak), RunID: s.runID, ProofBundleHashB64u: bundleHash,
		RuntimeMetadata: &poh.RuntimeMetadata{TEE: &poh.TEE{
			AttestationType: claims.AttestationType, RootID: rootID, TCBVersion: claims.TCBVersion,
			EvidenceRef:      poh.EvidenceRef{ResourceType: evidencedoc.ResourceType, ResourceHashB64u: b64u.SHA256(jws)},
			NonceBindingB64u: b64u.Encode(nonce[:]),
			Measurements:     poh.Measurements{MeasurementHashB64u: b64u.Encode(claims.Measurement), ModelWeightsDigestB64u: digest},
		}},
		IssuedAt: poh.FormatTime(testNow),
		Metadata: map[string]any{"clawea": evidencedoc.Metadata{Commitments: c, Simulated: doc.Simulated()}},
	}
	if s.mutatePayload != nil {
		s.mutatePayload(p)
	}
	pv, err := pohjson.FromGo(p)
	if err != nil {
		t.Fatal(err)
	}
	att, err = poh.Sign(poh.TypeExecutionAttestation, pv, ak, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return att, jws
}

// forgeRun is forgeSpec defaults for r: its agent, run and bundle.
func forgeRun(t testing.TB, q enclave.Quoter, r *run) forgeSpec {
	return forgeSpec{quoter: q, agentDID: r.AgentDID(), runID: r.RunID, bundle: r.bundle(t)}
}
