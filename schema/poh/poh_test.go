package poh

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/pohjson"
)

func vectorsDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join("..", "..", "..", "shared", "conformance", "poh", "vectors")
	if _, err := os.Stat(d); err != nil {
		citest.SkipOrFail(t, "shared conformance vectors not present: %v", err)
	}
	return d
}

func readConformanceAllowlist(t *testing.T, dir string) []string {
	raw := testfile.Read(t, filepath.Join(dir, "clawverify.config.conformance.v1.json"))
	var cfg struct {
		Allowlists struct {
			Gateway []string `json:"gateway_receipt_signer_dids"`
		} `json:"allowlists"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Allowlists.Gateway
}

// TestConformanceVectors runs every vector in INDEX.tsv and expects exactly
// the reason code clawverify gives.
func TestConformanceVectors(t *testing.T) {
	dir := vectorsDir(t)
	allow := readConformanceAllowlist(t, dir)
	n := 0
	for _, cols := range testfile.TSV(t, filepath.Join(dir, "INDEX.tsv"), 3) {
		n++
		name, valid, code := cols[0], cols[1] == "true", cols[2]
		t.Run(name, func(t *testing.T) {
			raw := testfile.Read(t, filepath.Join(dir, name))
			b, err := VerifyProofBundle(raw, BundleOptions{ReceiptSignerDIDs: allow})
			if valid {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				if b.RunID != "run_conformance_001" || len(b.Receipts) != 1 || !b.Receipts[0].Allowlisted {
					t.Fatalf("unexpected result: %+v", b)
				}
				return
			}
			if !errors.Is(err, Code(code)) {
				t.Fatalf("want %s, got %v", code, err)
			}
			if b != nil {
				t.Fatal("result returned with an error")
			}
		})
	}
	if n != 6 {
		t.Fatalf("ran %d vectors, want 6", n)
	}
}

// TestPassingVectorHashes recomputes every hash in the passing bundle.
func TestPassingVectorHashes(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(vectorsDir(t), "proof_bundle_pass.v1.json"))
	env, _ := pohjson.Parse(raw)
	if h, _ := pohjson.Hash(env.Get("payload")); h != "HZYtCYB_iGtYBqnwGdf6Dts41qMLYil_AjLKHLJ7Lyk" {
		t.Fatalf("bundle payload hash %s", h)
	}
	r := env.Get("payload").Get("receipts").Elems()[0]
	if h, _ := pohjson.Hash(r.Get("payload")); h != "Q93BAJydvhGEdSO1FOx5FI4Dcw0dT7EKJP2IrZmdXtQ" {
		t.Fatalf("receipt payload hash %s", h)
	}
	prev := (*string)(nil)
	h := EventHeader{"evt_conformance_001", "run_conformance_001", "llm_call", "2026-02-12T00:00:00.000Z", "ibhRTWt5gh47v4X1fAtBRKwEKCHZir1w-de3fNfCEu8", prev}
	if got, _ := h.Hash(); got != "mo72_ab1UHvxY2DERZG2Tn12KNl2e_NSUrVDEQ5-Jds" {
		t.Fatalf("event hash %s", got)
	}
}

// TestNonceBindingVector is the vector in DESIGN.md.
func TestNonceBindingVector(t *testing.T) {
	got, err := NonceBindingB64u("did:key:z6MkneMkZqwqRiU5mJzSG3kDwzt9P8C59N4NGTfBLfSGE7c7", "run_conformance_001", "HZYtCYB_iGtYBqnwGdf6Dts41qMLYil_AjLKHLJ7Lyk")
	if err != nil {
		t.Fatal(err)
	}
	if want := "0LACz9RUOsq-Lno2GehjNC8XHurEhh1UldXdRIKjKy4"; got != want {
		t.Fatalf("nonce binding %s, want %s", got, want)
	}
	if _, err := NonceBinding("\xff", "r", "h"); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}

func testKey(t testing.TB) ed25519.PrivateKey {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	return ed25519.NewKeyFromSeed(seed)
}

func signedBundle(t testing.TB, key ed25519.PrivateKey, mutate func(p *pohjson.Value) *pohjson.Value) []byte {
	t.Helper()
	did := didkey.Format(key.Public().(ed25519.PublicKey))
	h1 := EventHeader{"e1", "run_1", "prompt_committed", "2026-11-22T00:00:00.000Z", b64u.SHA256([]byte("a")), nil}
	e1, _ := h1.EntryValue()
	h1hash, _ := h1.Hash()
	h2 := EventHeader{"e2", "run_1", "llm_call", "2026-11-22T00:00:01.000Z", b64u.SHA256([]byte("b")), &h1hash}
	e2, _ := h2.EntryValue()
	payload := pohjson.NewObject(
		pohjson.M("bundle_version", pohjson.NewString("1")),
		pohjson.M("bundle_id", pohjson.NewString("bundle_1")),
		pohjson.M("agent_did", pohjson.NewString(did)),
		pohjson.M("event_chain", pohjson.NewArray(e1, e2)),
		pohjson.M("metadata", pohjson.NewObject(pohjson.M("note", pohjson.NewString("<&>\u2028")))),
	)
	if mutate != nil {
		payload = mutate(payload)
	}
	raw, err := Sign(TypeProofBundle, payload, key, time.Date(2026, 11, 22, 0, 0, 2, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestSignVerifyRoundTrip(t *testing.T) {
	key := testKey(t)
	raw := signedBundle(t, key, nil)
	b, err := VerifyProofBundle(raw, BundleOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if b.RunID != "run_1" || len(b.Events) != 2 || b.Envelope.SignerDID != b.AgentDID {
		t.Fatalf("result %+v", b)
	}
	// Pretty-printed, re-ordered whitespace still verifies: the hash is over
	// the payload as parsed, not the envelope bytes.
	var buf bytes.Buffer
	json.Indent(&buf, raw, "", "  ")
	if _, err := VerifyProofBundle(buf.Bytes(), BundleOptions{}); err != nil {
		t.Fatalf("indented: %v", err)
	}
}

// replaceField returns the envelope raw with its member field set to v
// (withMember: dropped when v is nil).
func replaceField(t *testing.T, raw []byte, field string, v *pohjson.Value) []byte {
	t.Helper()
	env, err := pohjson.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pohjson.Stringify(withMember(env, field, v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReasonCodes has one failing case per check, in verification order.
func TestReasonCodes(t *testing.T) {
	key := testKey(t)
	good := signedBundle(t, key, nil)
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	s := pohjson.NewString
	tests := []struct {
		name string
		raw  []byte
		want Code
	}{
		{"not json", []byte(`{`), MalformedEnvelope},
		{"array", []byte(`[]`), MalformedEnvelope},
		{"duplicate key", bytes.Replace(good, []byte(`{"envelope_version":"1",`), []byte(`{"envelope_version":"1","envelope_version":"1",`), 1), MalformedEnvelope},
		{"float in payload", bytes.Replace(good, []byte(`"bundle_id"`), []byte(`"x":1.5,"bundle_id"`), 1), MalformedEnvelope},
		{"missing signer_did", replaceField(t, good, "signer_did", nil), MalformedEnvelope},
		{"version 2", replaceField(t, good, "envelope_version", s("2")), UnknownEnvelopeVersion},
		{"version number", replaceField(t, good, "envelope_version", pohjson.NewInt(1)), UnknownEnvelopeVersion},
		{"type", replaceField(t, good, "envelope_type", s("nope")), UnknownEnvelopeType},
		{"wrong type", replaceField(t, good, "envelope_type", s(TypeGatewayReceipt)), UnknownEnvelopeType},
		{"algorithm", replaceField(t, good, "algorithm", s("ES256")), unknownAlgorithm},
		{"hash algorithm", replaceField(t, good, "hash_algorithm", s("BLAKE3")), unknownHashAlgorithm},
		{"did syntax", replaceField(t, good, "signer_did", s("did:example:123")), InvalidDIDFormat},
		{"issued_at", replaceField(t, good, "issued_at", s("yesterday")), MalformedEnvelope},
		{"hash alphabet", replaceField(t, good, "payload_hash_b64u", s("abc=")), MalformedEnvelope},
		{"empty hash", replaceField(t, good, "payload_hash_b64u", s("")), MalformedEnvelope},
		{"signature alphabet", replaceField(t, good, "signature_b64u", s("ab+/cd\u00e9")), MalformedEnvelope},
		{"schema extra field", bytes.Replace(good, []byte(`"bundle_id"`), []byte(`"x":1,"bundle_id"`), 1), SchemaValidationFailed},
		{"signer is not agent", replaceField(t, good, "signer_did", s(didkey.Format(other.Public().(ed25519.PublicKey)))), InvalidDIDFormat},
		{"payload tampered", bytes.Replace(good, []byte(`"bundle_1"`), []byte(`"bundle_2"`), 1), HashMismatch},
		{"signature", replaceField(t, good, "signature_b64u", s(b64u.Encode(ed25519.Sign(other, []byte("x"))))), SignatureInvalid},
		{"short signature", replaceField(t, good, "signature_b64u", s("AAAAAAAAAA")), SignatureInvalid},
		{"chain break", signedBundle(t, key, func(p *pohjson.Value) *pohjson.Value {
			evs := p.Get("event_chain").Elems()
			bad := EventHeader{"e2", "run_1", "llm_call", "2026-11-22T00:00:01.000Z", b64u.SHA256([]byte("b")), ptr(b64u.SHA256([]byte("other")))}
			e2, _ := bad.EntryValue()
			return withMember(p, "event_chain", pohjson.NewArray(evs[0], e2))
		}), HashChainBreak},
		{"event hash", signedBundle(t, key, func(p *pohjson.Value) *pohjson.Value {
			h := EventHeader{"e1", "run_1", "prompt_committed", "2026-11-22T00:00:00.000Z", b64u.SHA256([]byte("a")), nil}
			v := h.value()
			e := pohjson.NewObject(append(v.Members(), pohjson.M("event_hash_b64u", s(b64u.SHA256([]byte("forged")))))...)
			return withMember(p, "event_chain", pohjson.NewArray(e))
		}), HashMismatch},
		{"run id changes", signedBundle(t, key, func(p *pohjson.Value) *pohjson.Value {
			evs := p.Get("event_chain").Elems()
			h1, _ := evs[0].GetString("event_hash_b64u")
			bad := EventHeader{"e2", "run_2", "llm_call", "2026-11-22T00:00:01.000Z", b64u.SHA256([]byte("b")), &h1}
			e2, _ := bad.EntryValue()
			return withMember(p, "event_chain", pohjson.NewArray(evs[0], e2))
		}), MalformedEnvelope},
	}
	for _, tt := range tests {
		_, err := VerifyProofBundle(tt.raw, BundleOptions{})
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %s", tt.name, err, tt.want)
		}
		if _, ok := errors.AsType[*Error](err); !ok {
			t.Errorf("%s: error %T is not *Error", tt.name, err)
		}
	}
}

// TestDIDWebSignerRefused: did:web passes the syntax check but no key can be
// extracted offline, so step 12 refuses it with INVALID_DID_FORMAT.
func TestDIDWebSignerRefused(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(vectorsDir(t), "proof_bundle_pass.v1.json"))
	env, _ := pohjson.Parse(raw)
	receipt, _ := pohjson.Stringify(env.Get("payload").Get("receipts").Elems()[0])
	if _, err := Verify(receipt, VerifyOptions{Type: TypeGatewayReceipt}); err != nil {
		t.Fatalf("receipt: %v", err)
	}
	web := replaceField(t, receipt, "signer_did", pohjson.NewString("did:web:example.com"))
	if _, err := Verify(web, VerifyOptions{Type: TypeGatewayReceipt}); !errors.Is(err, InvalidDIDFormat) {
		t.Fatalf("got %v, want INVALID_DID_FORMAT", err)
	}
}

func ptr(s string) *string { return &s }

// withMember returns a copy of the object p whose member key has the value
// v, or is dropped when v is nil.
func withMember(p *pohjson.Value, key string, v *pohjson.Value) *pohjson.Value {
	var ms []pohjson.Member
	for _, m := range p.Members() {
		if m.Key == key {
			if v == nil {
				continue
			}
			m.Value = v
		}
		ms = append(ms, m)
	}
	return pohjson.NewObject(ms...)
}

// TestNodeVerifiesOurEnvelope: an envelope we sign is verified by an
// independent implementation of the PoH rules in Node.js (JSON.stringify,
// SHA-256, Ed25519 from node:crypto), and Node's nonce binding agrees.
func TestNodeVerifiesOurEnvelope(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		citest.SkipOrFail(t, "node not installed")
	}
	raw := signedBundle(t, testKey(t), nil)
	script := `
const crypto = require('node:crypto');
let d=''; process.stdin.on('data',c=>d+=c).on('end',()=>{
  const env = JSON.parse(d);
  const b64u = b => Buffer.from(b).toString('base64url');
  const hash = b64u(crypto.createHash('sha256').update(JSON.stringify(env.payload),'utf8').digest());
  if (hash !== env.payload_hash_b64u) { console.log('HASH_MISMATCH'); return; }
  const ALPH='123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let n=0n; for (const c of env.signer_did.slice('did:key:z'.length)) n = n*58n + BigInt(ALPH.indexOf(c));
  let hex=n.toString(16); if (hex.length%2) hex='0'+hex;
  const raw = Buffer.from(hex,'hex'); if (raw[0]!==0xed||raw[1]!==0x01) { console.log('INVALID_DID_FORMAT'); return; }
  const key = crypto.createPublicKey({key:{kty:'OKP',crv:'Ed25519',x:b64u(raw.subarray(2))},format:'jwk'});
  const ok = crypto.verify(null, Buffer.from(env.payload_hash_b64u,'utf8'), key, Buffer.from(env.signature_b64u,'base64url'));
  const ev = env.payload.event_chain[0];
  const binding = b64u(crypto.createHash('sha256').update(JSON.stringify({nonce_binding_version:'tee_nonce_binding_v1',agent_did:env.payload.agent_did,run_id:ev.run_id,proof_bundle_hash_b64u:hash}),'utf8').digest());
  console.log(ok ? 'OK '+binding : 'SIGNATURE_INVALID');
});`
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	b, err := VerifyProofBundle(raw, BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding, _ := NonceBindingB64u(b.AgentDID, b.RunID, b.Envelope.PayloadHashB64u)
	if got := strings.TrimSpace(string(out)); got != "OK "+binding {
		t.Fatalf("node says %q, want OK %s", got, binding)
	}
}

// FuzzVerify: arbitrary bytes never panic, a result is never returned
// together with an error, and validateSub answers the same without its
// stringify step for a parsed bundle's members (parsedMembersAgree).
func FuzzVerify(f *testing.F) {
	f.Add(signedBundle(f, testKey(f), nil))
	f.Add([]byte(`{"envelope_version":"1"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := VerifyProofBundle(data, BundleOptions{})
		if (b == nil) == (err == nil) {
			t.Fatalf("result %v with error %v", b, err)
		}
		parsedMembersAgree(t, data)
		if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
		}
	})
}

func TestExecutionAttestationTypeValidates(t *testing.T) {
	key := testKey(t)
	did := didkey.Format(key.Public().(ed25519.PublicKey))
	h := b64u.SHA256([]byte("x"))
	ea := ExecutionAttestation{
		AttestationVersion: "1", AttestationID: "att_1", ExecutionType: "tee_execution",
		AgentDID: did, AttesterDID: did, RunID: "run_1", ProofBundleHashB64u: h,
		RuntimeMetadata: &RuntimeMetadata{TEE: &TEE{
			AttestationType: "sev_snp_report", RootID: "amd-ark-milan", TCBVersion: "0x0",
			EvidenceRef:      EvidenceRef{ResourceType: "clawea_evidence_jws", ResourceHashB64u: h},
			NonceBindingB64u: h,
			Measurements:     Measurements{MeasurementHashB64u: h, ModelWeightsDigestB64u: h},
		}},
		IssuedAt: "2026-11-22T00:00:00.000Z",
	}
	v, err := pohjson.FromGo(ea)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Sign(TypeExecutionAttestation, v, key, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(raw, VerifyOptions{Type: TypeExecutionAttestation})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if keys := got.Payload.Members(); keys[0].Key != "attestation_version" || keys[len(keys)-1].Key != "issued_at" {
		t.Fatalf("field order: %v", keys)
	}
}

func TestPromptRootHash(t *testing.T) {
	a := PromptPackEntry{"b.md", b64u.SHA256([]byte("b"))}
	b := PromptPackEntry{"A.md", b64u.SHA256([]byte("a"))}
	c := PromptPackEntry{"\U0001F600", b64u.SHA256([]byte("c"))} // a surrogate pair: sorts before U+E000..U+FFFF
	d := PromptPackEntry{"\uFF21", b64u.SHA256([]byte("d"))}
	h1, err := PromptRootHash([]PromptPackEntry{a, b, c, d})
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := PromptRootHash([]PromptPackEntry{d, c, b, a})
	if h1 != h2 {
		t.Fatal("root depends on input order")
	}
	// The explicit JSON.stringify form, with UTF-16 order (A < b < U+1F600 < U+FF21).
	want := `{"prompt_pack_version":"1","entries":[{"entry_id":"A.md","content_hash_b64u":"` + b.ContentHashB64u + `"},{"entry_id":"b.md","content_hash_b64u":"` + a.ContentHashB64u + `"},{"entry_id":"` + "\U0001F600" + `","content_hash_b64u":"` + c.ContentHashB64u + `"},{"entry_id":"` + "\uFF21" + `","content_hash_b64u":"` + d.ContentHashB64u + `"}]}`
	if h1 != b64u.SHA256([]byte(want)) {
		t.Fatal("root is not the hash of the JSON.stringify form in UTF-16 order")
	}
	if _, err := PromptRootHash([]PromptPackEntry{a, a}); !errors.Is(err, errDuplicateEntry) {
		t.Fatalf("duplicate: %v", err)
	}
}
