// Package testfixture holds the test fixtures several packages share: a
// fixed clock and keys, an agent run with its signed PoH proof bundle (and
// knobs to make the bundle disagree with the run), and the committed swtpm
// quote. Only tests import it (internal/layers enforces that).
package testfixture

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/testing/data"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/snpevidence"
)

// Now is inside the validity of every simulated certificate.
var Now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

// Key returns the Ed25519 key whose seed is 32 bytes of seed.
func Key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// did returns the did:key of k.
func did(k ed25519.PrivateKey) string { return didkey.Format(k.Public().(ed25519.PublicKey)) }

// H returns b64u(SHA-256(s)).
func H(s string) string { return b64u.SHA256([]byte(s)) }

// ReportPrompt is the system prompt that Report's final hash commits to:
// its final.system_prompt_hash_b64u is H(ReportPrompt).
const ReportPrompt = "the rebuilt system prompt"

// Report returns the SystemPromptReport.v1 that fixture runs commit to, in
// JCS form, and its report hash b64u(SHA-256(doc)): one template,
// AGENTS.md, whose hash is "sha256:" + hex(SHA-256("agents template")). The
// document is written out as the verifier reads it, not built with the
// producer's types.
func Report(t testing.TB) (doc []byte, hash string) {
	t.Helper()
	tmpl := sha256.Sum256([]byte("agents template"))
	doc, err := jcs.Marshal(map[string]any{
		"report_version": "1",
		"harness":        map[string]any{"id": "openclaw", "version": "2026.2.1", "commit": "abc123"},
		"prompt_mode":    "full",
		"builder":        map[string]any{"name": "clawea", "builder_version": "1"},
		"recipe":         map[string]any{"id": "openclaw-sig", "version": "1"},
		"final":          map[string]any{"system_prompt_hash_b64u": H(ReportPrompt), "system_prompt_chars": len(ReportPrompt)},
		"inputs": map[string]any{
			"params_hash_b64u":              H("params"),
			"templates":                     []any{map[string]any{"name": "AGENTS.md", "hash": "sha256:" + hex.EncodeToString(tmpl[:])}},
			"resolved_tool_names_hash_b64u": H("tool names"),
			"tool_schemas_hash_b64u":        H("tool schemas"),
			"tool_summaries_hash_b64u":      H("tool summaries"),
			"bootstrap":                     []any{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc, b64u.SHA256(doc)
}

// SimSEVCRL returns an AMD-format CRL, numbered thisUpdate.Unix(), signed
// with the simulated ARK's (public test) key, so the real verifier accepts
// or refuses it on its merits. revoked are the serial numbers it revokes
// (at thisUpdate).
func SimSEVCRL(t testing.TB, thisUpdate, nextUpdate time.Time, revoked ...*big.Int) []byte {
	t.Helper()
	return SignCRL(t, simroots.SEVSNPRoots()[0].ARK, data.ARKPrivateKey, thisUpdate, nextUpdate, revoked...)
}

// SignCRL returns a CRL, numbered thisUpdate.Unix(), signed by issuer with
// key.
func SignCRL(t testing.TB, issuer *x509.Certificate, key crypto.Signer, thisUpdate, nextUpdate time.Time, revoked ...*big.Int) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(thisUpdate.Unix()), ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	for _, s := range revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: thisUpdate})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, issuer, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// Run is one agent run as the attester saw it, and the knobs that make its
// proof bundle disagree with it. Zero knobs give a bundle that commits to
// exactly the run's values. Copy a Run by value to vary one knob in a
// subtest (assign slices anew rather than writing into them).
type Run struct {
	AgentKey   ed25519.PrivateKey
	RunID      string
	PromptHash string // b64u SHA-256 of the rebuilt system prompt
	ReportHash string // SystemPromptReport.v1 hash
	PackHash   string // prompt pack ciphertext hash
	Provider   string // model identity
	Model      string
	// Events are the event types of the chain, in order. The first, when it
	// is prompt_committed, is the run's prompt_committed event as the
	// attester issues it (promptCommitted).
	Events []string
	// ToolParams are the payload hashes of the tool_call events, in order
	// (the params hashes the gate records); events without one get
	// H(type + letter).
	ToolParams []string
	// Entries are the prompt_pack entries, sorted by entry_id.
	Entries  []poh.PromptPackEntry
	BundleID string

	// Bundle knobs.
	BundleRunID      string            // "" means RunID
	BundleReport     string            // metadata.clawea report hash; "" means ReportHash
	CallPromptHashes []string          // per llm_call; nil means PromptHash for all
	OmitCall         bool              // leave the last llm_call uncovered
	CallEventID      string            // overrides the first call's event_id
	CallModel        string            // overrides the first call's model
	ReportRunID      string            // system_prompt_report.run_id; "" means the bundle's run
	OmitReport       bool              // no metadata.system_prompt_report
	OmitClawea       bool              // no metadata.clawea
	PackRoot         string            // overrides prompt_pack.prompt_root_hash_b64u
	ExtraClawea      map[string]string // extra metadata.clawea members
	FirstEvent       string            // replaces the first event's type
	FirstPayload     string            // replaces the first event's payload hash
	OmitLLMCalls     bool              // no metadata.clawea_llm_calls
	NotPrefix        bool              // llm_call payloads say attested_prefix false
	OmitHarness      bool              // no metadata.harness

	// Gateway receipts. ReceiptKey, when set, signs one gateway_receipt
	// per llm_call event (gateway.SignReceipt), in chain order, into the
	// bundle's receipts; EditReceipt changes the i-th call before it is
	// signed, EditReceipts the list of signed receipts (reorder, drop, add);
	// MoveReceipt binds the second receipt to the first llm_call event.
	ReceiptKey   ed25519.PrivateKey
	EditReceipt  func(i int, c *gateway.Call)
	EditReceipts func(receipts []json.RawMessage) []json.RawMessage
	MoveReceipt  bool
}

// NewRun returns a run of agent Key(1) with two llm_calls and two
// tool_calls.
func NewRun(runID string) *Run {
	return &Run{
		AgentKey:   Key(1),
		RunID:      runID,
		PromptHash: H("the rebuilt system prompt"),
		ReportHash: H("the SystemPromptReport.v1"),
		PackHash:   H("prompt_pack.enc"),
		Provider:   "anthropic",
		Model:      "claude-opus-4-6",
		Events:     []string{poh.PromptCommittedEventType, "llm_call", "tool_call", "llm_call", "tool_call"},
		ToolParams: []string{H(`{"cmd":"ls"}`), H(`{"path":"/tmp/x"}`)},
		Entries: []poh.PromptPackEntry{
			{EntryID: "AGENTS.md", ContentHashB64u: H("agents")},
			{EntryID: "SOUL.md", ContentHashB64u: H("soul")},
			{EntryID: "policy:tools", ContentHashB64u: H("tools")},
		},
		BundleID: "bundle_001",
	}
}

// promptCommitted is the run's first event, prompt_committed, as the
// attester issues it when it opens the run with ID runID: its payload hash
// commits to the run's report, prompt and pack hashes.
func (r *Run) promptCommitted(t testing.TB, runID string) poh.EventHeader {
	t.Helper()
	ph, err := poh.PromptCommittedPayloadHash(r.ReportHash, r.PromptHash, r.PackHash)
	if err != nil {
		t.Fatal(err)
	}
	return poh.EventHeader{EventID: "evt_a", RunID: runID, EventType: poh.PromptCommittedEventType, Timestamp: poh.FormatTime(Now), PayloadHashB64u: ph}
}

// PromptCommittedEventHash is the event_hash_b64u of the run's
// prompt_committed event, the value the attester passes as
// AttestInput.PromptCommittedEventHashB64u.
func (r *Run) PromptCommittedEventHash(t testing.TB) string {
	t.Helper()
	hd := r.promptCommitted(t, r.RunID)
	eh, err := hd.Hash()
	if err != nil {
		t.Fatal(err)
	}
	return eh
}

// AgentDID returns the agent's did:key.
func (r *Run) AgentDID() string { return did(r.AgentKey) }

// Harness is the harness the fixtures' bundles and attestations name.
func Harness() *poh.Harness {
	return &poh.Harness{ID: "openclaw", Version: "2026.2.1", Runtime: "clawea"}
}

type bundlePayload struct {
	BundleVersion string                `json:"bundle_version"`
	BundleID      string                `json:"bundle_id"`
	AgentDID      string                `json:"agent_did"`
	EventChain    []poh.EventChainEntry `json:"event_chain"`
	Receipts      []json.RawMessage     `json:"receipts,omitempty"`
	Metadata      map[string]any        `json:"metadata"`
}

type packEntry struct {
	EntryID         string `json:"entry_id"`
	ContentHashB64u string `json:"content_hash_b64u"`
}

// Bundle builds and signs the run's proof bundle envelope at Now.
func (r *Run) Bundle(t testing.TB) []byte {
	t.Helper()
	runID := r.RunID
	if r.BundleRunID != "" {
		runID = r.BundleRunID
	}
	chain, llmCalls := r.eventChain(t, runID)
	md := r.bundleMetadata(t, runID, chain, llmCalls)
	v, err := pohjson.FromGo(bundlePayload{BundleVersion: "1", BundleID: r.BundleID, AgentDID: r.AgentDID(), EventChain: chain, Receipts: r.receipts(t, chain, llmCalls), Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	env, err := poh.Sign(poh.TypeProofBundle, v, r.AgentKey, Now)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// eventChain returns the run's event chain, one event per r.Events, and
// the payloads of its llm calls.
func (r *Run) eventChain(t testing.TB, runID string) ([]poh.EventChainEntry, []*pohjson.Value) {
	t.Helper()
	var chain []poh.EventChainEntry
	var prev *string
	var llmCalls []*pohjson.Value
	tool := 0
	for i, typ := range r.Events {
		ph := H(typ + string(rune('a'+i)))
		if typ == "tool_call" && tool < len(r.ToolParams) {
			ph = r.ToolParams[tool]
			tool++
		}
		if typ == "llm_call" {
			p := r.llmCallPayload("call_" + string(rune('a'+i)))
			llmCalls = append(llmCalls, p)
			var err error
			if ph, err = pohjson.Hash(p); err != nil {
				t.Fatal(err)
			}
		}
		hd := poh.EventHeader{
			EventID: "evt_" + string(rune('a'+i)), RunID: runID, EventType: typ,
			Timestamp:       poh.FormatTime(Now.Add(time.Duration(i) * time.Second)),
			PayloadHashB64u: ph, PrevHashB64u: prev,
		}
		if i == 0 {
			if typ == poh.PromptCommittedEventType {
				hd = r.promptCommitted(t, runID)
			}
			if r.FirstEvent != "" {
				hd.EventType = r.FirstEvent
			}
			if r.FirstPayload != "" {
				hd.PayloadHashB64u = r.FirstPayload
			}
		}
		e, err := hd.Entry()
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, e)
		prev = &chain[len(chain)-1].EventHashB64u
	}
	return chain, llmCalls
}

// reportCalls returns the SystemPromptReport commitments of the chain's
// llm calls, with the changes r asks for.
func (r *Run) reportCalls(chain []poh.EventChainEntry) []poh.PromptCall {
	var calls []poh.PromptCall
	n := 0
	for _, e := range chain {
		if e.EventType != "llm_call" {
			continue
		}
		ph := r.PromptHash
		if r.CallPromptHashes != nil {
			ph = r.CallPromptHashes[n]
		}
		calls = append(calls, poh.PromptCall{EventID: e.EventID, EventHashB64u: e.EventHashB64u, Provider: r.Provider, Model: r.Model, RenderedSystemPromptHashB64u: ph})
		n++
	}
	if r.OmitCall {
		calls = calls[:len(calls)-1]
	}
	if r.CallEventID != "" {
		calls[0].EventID = r.CallEventID
		calls[0].EventHashB64u = ""
	}
	if r.CallModel != "" {
		calls[0].Model = r.CallModel
	}
	return calls
}

// bundleMetadata returns the bundle's metadata: the report, harness,
// prompt pack, clawea commitments and llm calls, less what r omits.
func (r *Run) bundleMetadata(t testing.TB, runID string, chain []poh.EventChainEntry, llmCalls []*pohjson.Value) map[string]any {
	t.Helper()
	entries := make([]packEntry, len(r.Entries))
	for i, e := range r.Entries {
		entries[i] = packEntry(e)
	}
	root := packRoot(t, entries)
	calls := r.reportCalls(chain)
	reportRun := runID
	if r.ReportRunID != "" {
		reportRun = r.ReportRunID
	}
	hs := Harness()
	md := map[string]any{
		"system_prompt_report": poh.SystemPromptReportCommitment{
			SystemPromptReportVersion: "1", ReportID: "spr_001", RunID: reportRun, AgentDID: r.AgentDID(),
			IssuedAt: poh.FormatTime(Now), HashAlgorithm: "SHA-256", PromptRootHashB64u: root, Calls: calls,
		},
	}
	if !r.OmitHarness {
		md["harness"] = map[string]string{"id": hs.ID, "version": hs.Version, "runtime": hs.Runtime}
	}
	pr := root
	if r.PackRoot != "" {
		pr = r.PackRoot
	}
	md["prompt_pack"] = map[string]any{"prompt_pack_version": "1", "hash_algorithm": "SHA-256", "prompt_root_hash_b64u": pr, "entries": entries}
	rh := r.ReportHash
	if r.BundleReport != "" {
		rh = r.BundleReport
	}
	cl := map[string]string{"system_prompt_report_hash_b64u": rh, "prompt_pack_ciphertext_hash_b64u": r.PackHash}
	for k, v := range r.ExtraClawea {
		cl[k] = v
	}
	md["clawea"] = cl
	lc, err := pohjson.Stringify(pohjson.NewArray(llmCalls...))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OmitLLMCalls {
		md["clawea_llm_calls"] = json.RawMessage(lc)
	}
	if r.OmitReport {
		delete(md, "system_prompt_report")
	}
	if r.OmitClawea {
		delete(md, "clawea")
	}
	return md
}

// suffix is the text the fixtures' harness appends after the attested
// prompt, as OpenClaw does (docs/spec/openclaw-plugin.md section 3).
const suffix = "\nCurrent model identity: fixture."

// llmCallPayload is the clawea_llm_calls payload of an llm_call event
// (docs/spec/openclaw-plugin.md section 3.1): the system text sent is the
// rebuilt prompt followed by suffix.
func (r *Run) llmCallPayload(callID string) *pohjson.Value {
	s := pohjson.NewString
	return pohjson.NewObject(
		pohjson.M("llm_call_version", s("1")),
		pohjson.M("call_id", s(callID)),
		pohjson.M("provider", s(r.Provider)),
		pohjson.M("model", s(r.Model)),
		pohjson.M("system_prompt_hash_b64u", s(r.PromptHash)),
		pohjson.M("system_prompt_report_hash_b64u", s(r.ReportHash)),
		pohjson.M("system_text_hash_b64u", s(H("the rebuilt system prompt"+suffix))),
		pohjson.M("attested_prefix", pohjson.NewBool(!r.NotPrefix)),
		pohjson.M("suffix_utf16_len", pohjson.NewInt(int64(len(suffix)))),
		pohjson.M("suffix_hash_b64u", s(H(suffix))),
	)
}

// packRoot computes the PoH prompt_pack.v1 root independently of the code
// under test: entries are given in sorted order.
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

// repoDir returns the repository root (the module directory).
func repoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// tpmQuotePath is the swtpm quote fixture that enclave/tpm's
// internal/fixturegen writes (go generate ./enclave/tpm).
func tpmQuotePath() string {
	return filepath.Join(repoDir(), "wire", "tpmquote", "testdata", "swtpm_quote.json")
}

// TPMQuote is a real swtpm quote and what it commits to.
type TPMQuote struct {
	Evidence   *evidence.Evidence
	ReportData evidence.ReportData
	AKName     []byte
}

// TPMQuoteFile is the layout of the swtpm quote fixture: the quote and the
// NewReportData inputs it commits to, so the pure verifier is tested on
// TPM-made bytes without a TPM.
type TPMQuoteFile struct {
	Comment         string          `json:"comment"`
	NonceBinding    string          `json:"nonce_binding_hex"`
	Identity        string          `json:"identity_hex"`
	EvidenceContext string          `json:"evidence_context"`
	AKName          string          `json:"ak_name_hex"`
	Evidence        json.RawMessage `json:"evidence"`
}

// LoadTPMQuote reads the swtpm quote fixture.
func LoadTPMQuote(t testing.TB) TPMQuote {
	t.Helper()
	raw := testfile.Read(t, tpmQuotePath())
	var fx TPMQuoteFile
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	var ev evidence.Evidence
	if err := json.Unmarshal(fx.Evidence, &ev); err != nil {
		t.Fatal(err)
	}
	var nonce [32]byte
	n, err := hex.DecodeString(fx.NonceBinding)
	if err != nil || len(n) != len(nonce) {
		t.Fatalf("fixture nonce binding: %v", err)
	}
	copy(nonce[:], n)
	id := testfile.Hex(t, fx.Identity)
	rd, err := evidence.NewReportData(nonce, ed25519.PublicKey(id), []byte(fx.EvidenceContext))
	if err != nil {
		t.Fatal(err)
	}
	name := testfile.Hex(t, fx.AKName)
	return TPMQuote{Evidence: &ev, ReportData: rd, AKName: name}
}

// SEVAttestation parses SEV-SNP evidence ev into go-sev-guest's
// attestation (report and certificates); a failure fails tb.
func SEVAttestation(tb testing.TB, ev *evidence.Evidence) *spb.Attestation {
	tb.Helper()
	p, err := snpevidence.Parse(ev)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := p.Attestation()
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
