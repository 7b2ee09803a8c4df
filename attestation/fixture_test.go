package attestation_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// fixedNow is inside the validity of every simulated certificate.
var fixedNow = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func h(s string) string { return b64u.SHA256([]byte(s)) }

// run is one agent run as the attester saw it, and the knobs to make its
// proof bundle disagree.
type run struct {
	agentKey   ed25519.PrivateKey
	runID      string
	promptHash string
	reportHash string
	packHash   string
	model      attestation.ModelIdentity

	// bundle knobs
	bundleRunID      string            // "" means runID
	callPromptHashes []string          // per llm_call; nil means promptHash for all
	bundleReport     string            // "" means reportHash
	omitCall         bool              // leave the last llm_call uncovered
	callEventID      string            // overrides the first call's event_id
	reportRunID      string            // system_prompt_report.run_id override
	omitReport       bool              // no system_prompt_report
	omitClawea       bool              // no metadata.clawea
	packRoot         string            // overrides prompt_pack.prompt_root_hash_b64u
	callModel        string            // calls[].model
	extraClawea      map[string]string // extra metadata.clawea members
}

func newRun() *run {
	return &run{
		agentKey:   key(1),
		runID:      "run_test_001",
		promptHash: h("the rebuilt system prompt"),
		reportHash: h("the SystemPromptReport.v1"),
		packHash:   h("prompt_pack.enc"),
		model:      attestation.ModelIdentity{Provider: "anthropic", Model: "claude-opus-4-6"},
	}
}

func (r *run) agentDID() string { return didkey.Format(r.agentKey.Public().(ed25519.PublicKey)) }

type bundlePayload struct {
	BundleVersion string                `json:"bundle_version"`
	BundleID      string                `json:"bundle_id"`
	AgentDID      string                `json:"agent_did"`
	EventChain    []poh.EventChainEntry `json:"event_chain"`
	Metadata      map[string]any        `json:"metadata"`
}

type packEntry struct {
	EntryID         string `json:"entry_id"`
	ContentHashB64u string `json:"content_hash_b64u"`
}

// bundle builds and signs the run's proof bundle envelope.
func (r *run) bundle(t testing.TB) []byte {
	t.Helper()
	runID := r.runID
	if r.bundleRunID != "" {
		runID = r.bundleRunID
	}
	types := []string{"run_start", "llm_call", "tool_call", "llm_call"}
	var chain []poh.EventChainEntry
	var prev *string
	for i, typ := range types {
		hd := poh.EventHeader{
			EventID:         "evt_" + string(rune('a'+i)),
			RunID:           runID,
			EventType:       typ,
			Timestamp:       poh.FormatTime(fixedNow.Add(time.Duration(i) * time.Second)),
			PayloadHashB64u: h(typ + string(rune('a'+i))),
			PrevHashB64u:    prev,
		}
		e, err := hd.Entry()
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, e)
		prev = &chain[len(chain)-1].EventHashB64u
	}
	entries := []packEntry{{"AGENTS.md", h("agents")}, {"SOUL.md", h("soul")}, {"policy:tools", h("tools")}}
	root := packRoot(t, entries)
	var calls []poh.PromptCall
	n := 0
	for _, e := range chain {
		if e.EventType != "llm_call" {
			continue
		}
		ph := r.promptHash
		if r.callPromptHashes != nil {
			ph = r.callPromptHashes[n]
		}
		calls = append(calls, poh.PromptCall{EventID: e.EventID, EventHashB64u: e.EventHashB64u, Provider: r.model.Provider, Model: r.model.Model, RenderedSystemPromptHashB64u: ph})
		n++
	}
	if r.omitCall {
		calls = calls[:len(calls)-1]
	}
	if r.callEventID != "" {
		calls[0].EventID = r.callEventID
		calls[0].EventHashB64u = ""
	}
	if r.callModel != "" {
		calls[0].Model = r.callModel
	}
	reportRun := runID
	if r.reportRunID != "" {
		reportRun = r.reportRunID
	}
	md := map[string]any{
		"harness": map[string]string{"id": "openclaw", "version": "2026.2.1", "runtime": "clawea"},
		"system_prompt_report": poh.SystemPromptReportCommitment{
			SystemPromptReportVersion: "1", ReportID: "spr_001", RunID: reportRun, AgentDID: r.agentDID(),
			IssuedAt: poh.FormatTime(fixedNow), HashAlgorithm: "SHA-256", PromptRootHashB64u: root, Calls: calls,
		},
	}
	pr := root
	if r.packRoot != "" {
		pr = r.packRoot
	}
	md["prompt_pack"] = map[string]any{"prompt_pack_version": "1", "hash_algorithm": "SHA-256", "prompt_root_hash_b64u": pr, "entries": entries}
	rh := r.reportHash
	if r.bundleReport != "" {
		rh = r.bundleReport
	}
	cl := map[string]string{"system_prompt_report_hash_b64u": rh, "prompt_pack_ciphertext_hash_b64u": r.packHash}
	for k, v := range r.extraClawea {
		cl[k] = v
	}
	md["clawea"] = cl
	if r.omitReport {
		delete(md, "system_prompt_report")
	}
	if r.omitClawea {
		delete(md, "clawea")
	}
	p := bundlePayload{BundleVersion: "1", BundleID: "bundle_001", AgentDID: r.agentDID(), EventChain: chain, Metadata: md}
	v, err := pohjson.FromGo(p)
	if err != nil {
		t.Fatal(err)
	}
	env, err := poh.Sign(poh.TypeProofBundle, v, r.agentKey, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// packRoot computes the PoH prompt_pack.v1 root independently of the code
// under test: entries here are given in sorted order.
func packRoot(t testing.TB, sortedEntries []packEntry) string {
	t.Helper()
	b, err := pohjson.Marshal(map[string]any{"entries": sortedEntries, "prompt_pack_version": "1"})
	if err != nil {
		t.Fatal(err)
	}
	// Marshal sorts map keys; the PoH order is prompt_pack_version first.
	v, err := pohjson.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	obj := pohjson.NewObject(pohjson.M("prompt_pack_version", v.Get("prompt_pack_version")), pohjson.M("entries", v.Get("entries")))
	s, err := pohjson.Stringify(obj)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(s)
	return b64u.Encode(sum[:])
}

func (r *run) input(t testing.TB) attestation.AttestInput {
	return attestation.AttestInput{
		BundleEnvelope:         r.bundle(t),
		AgentDID:               r.agentDID(),
		RunID:                  r.runID,
		PromptHashB64u:         r.promptHash,
		ReportHashB64u:         r.reportHash,
		PackCiphertextHashB64u: r.packHash,
		GatePolicyHashB64u:     h("gate policy"),
		AuditRootB64u:          h("audit head"),
		AuditCount:             17,
		Model:                  r.model,
		Harness:                &poh.Harness{ID: "openclaw", Version: "2026.2.1", Runtime: "clawea"},
		EvidenceURI:            "evidence/run_test_001.jws",
	}
}

func simSEV(t testing.TB) *sim.Simulator {
	t.Helper()
	s, err := sim.New(sim.Options{Seed: []byte("attestation-test")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simTDX(t testing.TB) *tdx.Simulated {
	t.Helper()
	s, err := tdx.NewSimulated(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func issuer(q enclave.Quoter) *attestation.Issuer {
	return &attestation.Issuer{
		Key:          key(9),
		Quoter:       q,
		Now:          func() time.Time { return fixedNow },
		RecipientKey: bytes.Repeat([]byte{0x42}, 32),
	}
}
