package evidencedoc_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
	"github.com/clawea/attester/wire/nvspdm"
)

// fuzzKey signs the committed fuzz seeds.
var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x11}, ed25519.SeedSize))

var when = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func hash(s string) string { return b64u.SHA256([]byte(s)) }

func execDoc(t testing.TB) *evidencedoc.Document {
	t.Helper()
	agent := didkey.Format(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey))
	bundleHash := hash("bundle")
	nonce, err := poh.NonceBinding(agent, "run_1", bundleHash)
	if err != nil {
		t.Fatal(err)
	}
	model, err := evidencedoc.NewModelIdentity("anthropic", "claude-opus-4-6", "")
	if err != nil {
		t.Fatal(err)
	}
	md, err := model.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return &evidencedoc.Document{
		Kind:     evidencedoc.KindExecution,
		IssuedAt: when,
		Nonce:    nonce,
		Execution: &evidencedoc.ExecutionContext{
			Context:             evidencedoc.ExecutionContextLabel,
			AttestationID:       "clawea_att_test",
			AgentDID:            agent,
			RunID:               "run_1",
			ProofBundleHashB64u: bundleHash,
			Clawea: evidencedoc.Commitments{
				Version:                      evidencedoc.CommitmentsVersionV2,
				SystemPromptHashB64u:         hash("prompt"),
				SystemPromptReportHashB64u:   hash("report"),
				PromptPackCiphertextHashB64u: hash("pack"),
				GatePolicyHashB64u:           hash("policy"),
				GateAuditRootB64u:            hash("audit"),
				GateAuditCount:               3,
				ModelIdentity:                model,
				ModelIdentityDigestB64u:      md,
				Sensitive:                    evidencedoc.SensitiveFalse,
			},
		},
		Items: []evidencedoc.Item{{
			Evidence: &evidence.Evidence{
				Platform: evidence.PlatformSEVSNP, Simulated: true, Format: "sev-snp/attestation-report",
				Blob: []byte("report bytes"), CertChain: [][]byte{[]byte("vcek"), []byte("ask"), []byte("ark")},
				Aux: map[string][]byte{"cert_table": []byte("table")},
			},
			Collateral: map[string][]byte{"crl": []byte("crl der")},
		}},
	}
}

func keyDoc(t testing.TB, challenge []byte) *evidencedoc.Document {
	t.Helper()
	nonce, err := evidencedoc.KeyNonce(challenge)
	if err != nil {
		t.Fatal(err)
	}
	return &evidencedoc.Document{
		Kind:     evidencedoc.KindKey,
		IssuedAt: when,
		Nonce:    nonce,
		Key: &evidencedoc.KeyContext{Context: evidencedoc.KeyContextLabel, ChallengeB64u: b64u.Encode(challenge),
			RecipientX25519B64u: b64u.Encode(bytes.Repeat([]byte{0x42}, 32))},
		Items: []evidencedoc.Item{{Evidence: &evidence.Evidence{
			Platform: evidence.PlatformTPM, Format: "tpm2/quote", Blob: []byte("attest"), Signature: []byte("sig"),
			Aux: map[string][]byte{"ak_public": []byte("ak"), "pcr_values": []byte("pcrs")},
		}}},
	}
}

func sign(t testing.TB, d *evidencedoc.Document) *evidencedoc.Document {
	t.Helper()
	s, err := evidencedoc.Sign(fuzzKey, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pub() ed25519.PublicKey { return fuzzKey.Public().(ed25519.PublicKey) }

func TestSignParseRoundTrip(t *testing.T) {
	for name, d := range map[string]*evidencedoc.Document{"execution": execDoc(t), "key": keyDoc(t, []byte("challenge"))} {
		t.Run(name, func(t *testing.T) {
			s := sign(t, d)
			p, err := evidencedoc.Parse(s.JWS, pub())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.JWS, s.JWS) || p.AttesterDID != didkey.Format(pub()) || !p.IssuedAt.Equal(when) || p.Nonce != d.Nonce {
				t.Fatal("parsed document differs")
			}
			// Ed25519 is deterministic: signing the parsed document again
			// reproduces the exact bytes.
			again := sign(t, p)
			if !bytes.Equal(again.JWS, s.JWS) {
				t.Fatal("re-signing does not reproduce the JWS")
			}
			if !bytes.Equal(p.EvidenceContext(), again.EvidenceContext()) || len(p.EvidenceContext()) == 0 {
				t.Fatal("evidence context unstable")
			}
			rd, err := p.ReportData()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := evidence.NewReportData(d.Nonce, pub(), p.EvidenceContext())
			if rd != want {
				t.Fatal("ReportData differs")
			}
		})
	}
}

func segments(jws []byte) (header, payload []byte) {
	parts := strings.Split(string(jws), ".")
	h, _ := b64u.Decode(parts[0])
	p, _ := b64u.Decode(parts[1])
	return h, p
}

// refusesEdit checks that Parse refuses, with want, the document of
// header and payload with from replaced by to, signed again.
func refusesEdit(t *testing.T, header, payload []byte, from, to string, want error) {
	t.Helper()
	if !bytes.Contains(payload, []byte(from)) {
		t.Fatalf("payload has no %q", from)
	}
	p := bytes.Replace(payload, []byte(from), []byte(to), 1)
	d, err := evidencedoc.Parse(signRaw(header, p), pub())
	if !errors.Is(err, want) || d != nil {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// signRaw builds a compact JWS over arbitrary header and payload bytes with
// a real Ed25519 signature, so that rejections come from the rule tested,
// not from the signature.
func signRaw(header, payload []byte) []byte {
	in := b64u.Encode(header) + "." + b64u.Encode(payload)
	return []byte(in + "." + b64u.Encode(ed25519.Sign(fuzzKey, []byte(in))))
}

func TestParseRejects(t *testing.T) {
	good := sign(t, execDoc(t)).JWS
	hdr, payload := segments(good)
	kid := didkey.Format(pub())
	replace := func(old, new string) []byte {
		if !bytes.Contains(payload, []byte(old)) {
			t.Fatalf("payload has no %q", old)
		}
		return signRaw(hdr, bytes.Replace(payload, []byte(old), []byte(new), 1))
	}
	hs256 := func() []byte {
		h := []byte(`{"alg":"HS256","kid":"` + kid + `","typ":"clawea-evidence+jws"}`)
		in := b64u.Encode(h) + "." + b64u.Encode(payload)
		m := hmac.New(sha256.New, pub()) // the classic key-confusion attack
		m.Write([]byte(in))
		return []byte(in + "." + b64u.Encode(m.Sum(nil)))
	}
	otherKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x22}, 32))
	parts := strings.Split(string(good), ".")

	cases := []struct {
		name string
		jws  []byte
		key  ed25519.PublicKey
		want error
	}{
		{"alg none", []byte(b64u.Encode([]byte(`{"alg":"none","kid":"`+kid+`","typ":"clawea-evidence+jws"}`)) + "." + parts[1] + "."), nil, evidencedoc.ErrUnsupported},
		{"alg HS256", hs256(), nil, evidencedoc.ErrUnsupported},
		{"alg ES256", signRaw([]byte(`{"alg":"ES256","kid":"`+kid+`","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrUnsupported},
		{"critical header", signRaw([]byte(`{"alg":"EdDSA","crit":["exp"],"exp":1,"kid":"`+kid+`","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrUnsupported},
		{"b64 false", signRaw([]byte(`{"alg":"EdDSA","b64":false,"kid":"`+kid+`","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrUnsupported},
		{"embedded jwk", signRaw([]byte(`{"alg":"EdDSA","jwk":{},"kid":"`+kid+`","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrUnsupported},
		{"wrong typ", signRaw([]byte(`{"alg":"EdDSA","kid":"`+kid+`","typ":"JWT"}`), payload), nil, evidencedoc.ErrUnsupported},
		{"header not canonical", signRaw([]byte(`{"kid":"`+kid+`","alg":"EdDSA","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrMalformed},
		{"header duplicate alg", signRaw([]byte(`{"alg":"EdDSA","alg":"EdDSA","kid":"`+kid+`","typ":"clawea-evidence+jws"}`), payload), nil, evidencedoc.ErrMalformed},
		{"tampered payload", []byte(parts[0] + "." + b64u.Encode(bytes.Replace(payload, []byte(`"gate_audit_count":3`), []byte(`"gate_audit_count":0`), 1)) + "." + parts[2]), nil, evidencedoc.ErrSignature},
		{"tampered signature", []byte(parts[0] + "." + parts[1] + "." + b64u.Encode(bytes.Repeat([]byte{1}, 64))), nil, evidencedoc.ErrSignature},
		{"wrong key", good, otherKey.Public().(ed25519.PublicKey), evidencedoc.ErrSignature},
		{"signed by another key under our kid", func() []byte {
			in := parts[0] + "." + parts[1]
			return []byte(in + "." + b64u.Encode(ed25519.Sign(otherKey, []byte(in))))
		}(), nil, evidencedoc.ErrSignature},
		{"short key", good, ed25519.PublicKey{1, 2, 3}, evidencedoc.ErrSignature},
		{"payload with whitespace", signRaw(hdr, append([]byte(" "), payload...)), nil, evidencedoc.ErrMalformed},
		{"unknown payload member", replace(`"kind":`, `"extra":1,"kind":`), nil, evidencedoc.ErrMalformed},
		{"case variant member", replace(`"kind":`, `"KIND":`), nil, evidencedoc.ErrMalformed},
		{"duplicate member", replace(`"kind":"execution_attestation"`, `"kind":"key_attestation","kind":"execution_attestation"`), nil, evidencedoc.ErrMalformed},
		{"members out of order", replace(`"kind":"execution_attestation","attester_did":"`+kid+`"`, `"attester_did":"`+kid+`","kind":"execution_attestation"`), nil, evidencedoc.ErrMalformed},
		{"required member missing", replace(`"simulated":true,`, ``), nil, evidencedoc.ErrMalformed},
		{"empty optional member", replace(`"simulated":true,`, `"simulated":true,"signature_b64u":"",`), nil, evidencedoc.ErrMalformed},
		{"null optional member", replace(`"kind":"execution_attestation"`, `"kind":"execution_attestation","key":null`), nil, evidencedoc.ErrMalformed},
		{"unknown nested member", replace(`"run_id":`, `"extra":"x","run_id":`), nil, evidencedoc.ErrMalformed},
		{"escaped member name", replace(`"kind":`, `"\u006bind":`), nil, evidencedoc.ErrMalformed},
		{"non-canonical string escape", replace(`"run_id":"run_1"`, `"run_id":"run\u005f1"`), nil, evidencedoc.ErrMalformed},
		{"unknown version", replace(`"clawea.dev/evidence/v1"`, `"clawea.dev/evidence/v2"`), nil, evidencedoc.ErrUnsupported},
		{"version not first", signRaw(hdr, []byte(`{"kind":"key_attestation","evidence_version":"clawea.dev/evidence/v1"}`)), nil, evidencedoc.ErrMalformed},
		{"unknown kind", replace(`"kind":"execution_attestation"`, `"kind":"mystery"`), nil, evidencedoc.ErrUnsupported},
		{"kind and context disagree", replace(`"kind":"execution_attestation"`, `"kind":"key_attestation"`), nil, evidencedoc.ErrMalformed},
		{"nonce does not match context", replace(`"run_id":"run_1"`, `"run_id":"run_2"`), nil, evidencedoc.ErrInconsistent},
		{"model digest does not match", replace(`"model":"claude-opus-4-6"`, `"model":"claude-haiku"`), nil, evidencedoc.ErrInconsistent},
		{"unknown context label", replace(evidencedoc.ExecutionContextLabel, "clawea.dev/evidence/v1/context/other"), nil, evidencedoc.ErrUnsupported},
		{"unknown platform", replace(`"platform":"sev-snp"`, `"platform":"sgx"`), nil, evidencedoc.ErrUnsupported},
		{"wrong format", replace(`"format":"sev-snp/attestation-report"`, `"format":"tdx/quote-v4"`), nil, evidencedoc.ErrUnsupported},
		{"unknown aux", replace(`"cert_table"`, `"event_log"`), nil, evidencedoc.ErrMalformed},
		{"unknown collateral", replace(`"crl"`, `"tcb_info"`), nil, evidencedoc.ErrMalformed},
		{"bad issued_at", replace(`"2026-06-01T12:00:00.000Z"`, `"2026-06-01T12:00:00Z"`), nil, evidencedoc.ErrMalformed},
		{"padded b64u", replace(`"blob_b64u":"`, `"blob_b64u":"=`), nil, evidencedoc.ErrMalformed},
		{"attester_did not kid", replace(kid, didkey.Format(otherKey.Public().(ed25519.PublicKey))), nil, evidencedoc.ErrSignature},
		{"four segments", append(append([]byte{}, good...), []byte(".AA")...), nil, evidencedoc.ErrMalformed},
		{"json serialization", []byte(`{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`), nil, evidencedoc.ErrMalformed},
		{"padding in segment", []byte(parts[0] + "=." + parts[1] + "." + parts[2]), nil, evidencedoc.ErrMalformed},
		{"too large", bytes.Repeat([]byte("A"), evidencedoc.MaxJWSBytes+1), nil, evidencedoc.ErrTooLarge},
		{"empty", nil, nil, evidencedoc.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.key
			if k == nil {
				k = pub()
			}
			d, err := evidencedoc.Parse(tc.jws, k)
			if d != nil {
				t.Fatal("document returned with an error")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	// Control: the untouched document parses, and a re-signed identical
	// payload too (so the cases above fail for their own reason).
	if err := joseAgrees(good); err != nil {
		t.Fatal(err)
	}
	if _, err := evidencedoc.Parse(signRaw(hdr, payload), pub()); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestSignRefusesInvalidDocuments(t *testing.T) {
	cases := map[string]func(d *evidencedoc.Document){
		"no items": func(d *evidencedoc.Document) { d.Items = nil },
		"five items": func(d *evidencedoc.Document) {
			d.Items = append(d.Items, d.Items[0], d.Items[0], d.Items[0], d.Items[0])
		},
		"wrong nonce":   func(d *evidencedoc.Document) { d.Nonce[0] ^= 1 },
		"both contexts": func(d *evidencedoc.Document) { d.Key = &evidencedoc.KeyContext{Context: evidencedoc.KeyContextLabel} },
		"tdx with signature": func(d *evidencedoc.Document) {
			d.Items[0].Evidence = &evidence.Evidence{Platform: "tdx", Format: "tdx/quote-v4", Blob: []byte{1}, Signature: []byte{1}}
		},
		"tpm without signature": func(d *evidencedoc.Document) {
			d.Items[0].Evidence = &evidence.Evidence{Platform: "tpm", Format: "tpm2/quote", Blob: []byte{1}}
		},
		"empty blob":     func(d *evidencedoc.Document) { d.Items[0].Evidence.Blob = nil },
		"huge blob":      func(d *evidencedoc.Document) { d.Items[0].Evidence.Blob = make([]byte, evidencedoc.MaxBlobBytes+1) },
		"five certs":     func(d *evidencedoc.Document) { d.Items[0].Evidence.CertChain = make([][]byte, 5) },
		"bad hash":       func(d *evidencedoc.Document) { d.Execution.Clawea.GatePolicyHashB64u = "short" },
		"negative count": func(d *evidencedoc.Document) { d.Execution.Clawea.GateAuditCount = -1 },
		"no item evidence": func(d *evidencedoc.Document) {
			d.Items[0].Evidence = nil
		},
	}
	for name, tweak := range cases {
		t.Run(name, func(t *testing.T) {
			d := execDoc(t)
			tweak(d)
			if s, err := evidencedoc.Sign(fuzzKey, d); err == nil || s != nil {
				t.Fatal("signed an invalid document")
			}
		})
	}
	if _, err := evidencedoc.Sign(ed25519.PrivateKey{1}, execDoc(t)); !errors.Is(err, evidencedoc.ErrSignature) {
		t.Fatalf("short key: %v", err)
	}
}

func TestSignerKey(t *testing.T) {
	s := sign(t, keyDoc(t, nil))
	k, err := evidencedoc.SignerKey(s.JWS)
	if err != nil || !k.Equal(pub()) {
		t.Fatalf("SignerKey: %v", err)
	}
	if _, err := evidencedoc.SignerKey([]byte("a.b")); !errors.Is(err, evidencedoc.ErrMalformed) {
		t.Fatalf("malformed: %v", err)
	}
}

func TestModelIdentity(t *testing.T) {
	for _, c := range []struct{ p, m, r string }{
		{"", "m", ""}, {"p", "", ""}, {strings.Repeat("p", 65), "m", ""}, {"p", strings.Repeat("m", 129), ""},
		{"p", "m", strings.Repeat("r", 129)}, {"p\x00", "m", ""}, {"p", "m\u007f", ""}, {"p", "\xff", ""},
	} {
		if _, err := evidencedoc.NewModelIdentity(c.p, c.m, c.r); !errors.Is(err, evidencedoc.ErrMalformed) {
			t.Errorf("%q/%q/%q: %v", c.p, c.m, c.r, err)
		}
	}
	// The digest separates identities that differ in any member.
	seen := map[string]bool{}
	for _, id := range [][3]string{{"openai", "gpt-5", ""}, {"openai", "gpt-5", "x"}, {"openai2", "gpt-5", ""}} {
		m, err := evidencedoc.NewModelIdentity(id[0], id[1], id[2])
		if err != nil {
			t.Fatal(err)
		}
		d, err := m.Digest()
		if err != nil || len(d) != 43 || seen[d] {
			t.Fatalf("%q: digest %q, %v (seen: %v)", id, d, err, seen[d])
		}
		seen[d] = true
	}
}

// TestParseRefusesEveryByteChange: Parse checks the Ed25519 signature over
// the received signing input itself; changing any one byte of a valid
// document (header, payload or signature segment) is refused, and a
// document Parse accepts is one go-jose verifies too.
func TestParseRefusesEveryByteChange(t *testing.T) {
	good := sign(t, execDoc(t)).JWS
	if _, err := evidencedoc.Parse(good, pub()); err != nil {
		t.Fatal(err)
	}
	if err := joseAgrees(good); err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for _, x := range []byte{0x01, 0x20} {
			bad := bytes.Clone(good)
			bad[i] ^= x
			if d, err := evidencedoc.Parse(bad, pub()); err == nil || d != nil {
				t.Fatalf("byte %d ^ %#x: accepted", i, x)
			}
		}
	}
}

// TestCommitmentVersions: a v1 commitment (no admission members) still
// parses; v2 requires sensitive and ties sensitive to an admission policy
// hash; any other version is refused.
func TestCommitmentVersions(t *testing.T) {
	admission := hash("admission policy")
	good := map[string]func(c *evidencedoc.Commitments){
		"v2 not sensitive, no policy": func(c *evidencedoc.Commitments) {},
		"v2 not sensitive, policy":    func(c *evidencedoc.Commitments) { c.AdmissionPolicyHashB64u = admission },
		"v2 sensitive": func(c *evidencedoc.Commitments) {
			c.AdmissionPolicyHashB64u, c.Sensitive = admission, evidencedoc.SensitiveTrue
		},
		"v1": func(c *evidencedoc.Commitments) {
			c.Version, c.Sensitive = evidencedoc.CommitmentsVersionV1, evidencedoc.SensitiveAbsent
		},
	}
	for name, tweak := range good {
		t.Run(name, func(t *testing.T) {
			d := execDoc(t)
			tweak(&d.Execution.Clawea)
			p, err := evidencedoc.Parse(sign(t, d).JWS, pub())
			if err != nil {
				t.Fatal(err)
			}
			got := p.Execution.Clawea
			if got.Version != d.Execution.Clawea.Version || got.AdmissionPolicyHashB64u != d.Execution.Clawea.AdmissionPolicyHashB64u || got != d.Execution.Clawea {
				t.Fatalf("commitments did not round-trip: %+v", got)
			}
		})
	}
	// Signed payloads edited by hand: what Sign refuses to write, Parse
	// refuses to read.
	base := execDoc(t)
	base.Execution.Clawea.AdmissionPolicyHashB64u = admission
	hdr, payload := segments(sign(t, base).JWS)
	tail := `"admission_policy_hash_b64u":"` + admission + `","sensitive":false}`
	bad := map[string]struct {
		old, new string
		want     error
	}{
		"v1 with admission members": {`"clawea_version":"clawea.dev/attestation/v2"`, `"clawea_version":"clawea.dev/attestation/v1"`, evidencedoc.ErrMalformed},
		"v2 without sensitive":      {tail, `"admission_policy_hash_b64u":"` + admission + `"}`, evidencedoc.ErrMalformed},
		"sensitive null":            {tail, `"admission_policy_hash_b64u":"` + admission + `","sensitive":null}`, evidencedoc.ErrMalformed},
		"sensitive without policy":  {tail, `"sensitive":true}`, evidencedoc.ErrInconsistent},
		"empty policy hash":         {tail, `"admission_policy_hash_b64u":"","sensitive":false}`, evidencedoc.ErrMalformed},
		"short policy hash":         {tail, `"admission_policy_hash_b64u":"abc","sensitive":false}`, evidencedoc.ErrMalformed},
		"unknown version":           {`"clawea_version":"clawea.dev/attestation/v2"`, `"clawea_version":"clawea.dev/attestation/v5"`, evidencedoc.ErrUnsupported},
		"sensitive before policy":   {tail, `"sensitive":false,"admission_policy_hash_b64u":"` + admission + `"}`, evidencedoc.ErrMalformed},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) { refusesEdit(t, hdr, payload, c.old, c.new, c.want) })
	}
	for name, tweak := range map[string]func(c *evidencedoc.Commitments){
		"sign v2 without sensitive":     func(c *evidencedoc.Commitments) { c.Sensitive = evidencedoc.SensitiveAbsent },
		"sign sensitive without policy": func(c *evidencedoc.Commitments) { c.Sensitive = evidencedoc.SensitiveTrue },
		"sign v1 sensitive": func(c *evidencedoc.Commitments) {
			c.Version, c.AdmissionPolicyHashB64u, c.Sensitive = evidencedoc.CommitmentsVersionV1, admission, evidencedoc.SensitiveTrue
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := execDoc(t)
			tweak(&d.Execution.Clawea)
			if s, err := evidencedoc.Sign(fuzzKey, d); err == nil || s != nil {
				t.Fatal("signed an invalid commitment")
			}
		})
	}
}

// gpuItem is a GPU evidence item (its blob is not checked here: the
// verifier parses it).
func gpuItem(certs int) evidencedoc.Item {
	return evidencedoc.Item{Evidence: &evidence.Evidence{
		Platform: evidence.PlatformNVIDIAGPU, Format: nvspdm.Format, Blob: []byte{1}, CertChain: slices.Repeat([][]byte{{0x30}}, certs),
	}}
}

// TestGPUItems: GPU evidence follows the CPU evidence, at most eight GPUs
// with at most eight certificates each, and round-trips; anything else is
// refused.
func TestGPUItems(t *testing.T) {
	d := execDoc(t)
	d.Items = append(d.Items, gpuItem(5), gpuItem(8))
	s, err := evidencedoc.Sign(fuzzKey, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := evidencedoc.Parse(s.JWS, pub())
	if err != nil || len(got.Items) != 3 || got.Items[2].Evidence.Platform != evidence.PlatformNVIDIAGPU || len(got.Items[2].Evidence.CertChain) != 8 {
		t.Fatalf("parse: %v", err)
	}
	for name, tweak := range map[string]func(d *evidencedoc.Document){
		"gpu first": func(d *evidencedoc.Document) { d.Items = append([]evidencedoc.Item{gpuItem(1)}, d.Items...) },
		"gpu only":  func(d *evidencedoc.Document) { d.Items = []evidencedoc.Item{gpuItem(1)} },
		"nine gpus": func(d *evidencedoc.Document) {
			d.Items = append(d.Items, slices.Repeat([]evidencedoc.Item{gpuItem(1)}, 9)...)
		},
		"nine gpu certs": func(d *evidencedoc.Document) { d.Items = append(d.Items, gpuItem(9)) },
		"gpu aux": func(d *evidencedoc.Document) {
			it := gpuItem(1)
			it.Evidence.Aux = map[string][]byte{"cert_table": {1}}
			d.Items = append(d.Items, it)
		},
		"gpu signature": func(d *evidencedoc.Document) {
			it := gpuItem(1)
			it.Evidence.Signature = []byte{1}
			d.Items = append(d.Items, it)
		},
		"gpu other format": func(d *evidencedoc.Document) {
			it := gpuItem(1)
			it.Evidence.Format = "nvidia/other"
			d.Items = append(d.Items, it)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := execDoc(t)
			tweak(d)
			if s, err := evidencedoc.Sign(fuzzKey, d); err == nil || s != nil {
				t.Fatal("signed an invalid document")
			}
		})
	}
}
