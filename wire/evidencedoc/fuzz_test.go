package evidencedoc_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/wire/evidencedoc"
)

// FuzzParse: Parse never panics, returns nothing with an error, and
// whatever it accepts is canonical: the document re-signs (Ed25519 is
// deterministic) to exactly the input bytes. Whatever it accepts, go-jose
// (an independent JWS implementation) verifies too, to the same payload:
// Parse checks the signature over the signing input directly. The committed seeds in
// testdata/fuzz/FuzzParse are documents signed with fuzzKey plus malformed
// variants.
func FuzzParse(f *testing.F) {
	f.Add(sign(f, execDoc(f)).JWS)
	sensitive := execDoc(f)
	sensitive.Execution.Clawea.AdmissionPolicyHashB64u, sensitive.Execution.Clawea.Sensitive = hash("admission policy"), evidencedoc.SensitiveTrue
	f.Add(sign(f, sensitive).JWS)
	f.Add(sign(f, isolatedDoc(f)).JWS)
	gw := isolatedDoc(f)
	gw.Execution.Clawea.Version, gw.Execution.Clawea.Gateway = evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptCount: 3, ReceiptChainB64u: hash("chain")}
	f.Add(sign(f, gw).JWS)
	f.Add(sign(f, keyDoc(f, []byte("challenge"))).JWS)
	f.Add([]byte("e30.e30."))
	f.Fuzz(func(t *testing.T, jws []byte) {
		d, err := evidencedoc.Parse(jws, pub())
		if err != nil {
			if d != nil {
				t.Fatal("document returned with an error")
			}
			return
		}
		if !bytes.Equal(d.JWS, jws) {
			t.Fatal("Document.JWS differs from the input")
		}
		if err := joseAgrees(jws); err != nil {
			t.Fatalf("accepted document: %v", err)
		}
		again, err := evidencedoc.Sign(fuzzKey, d)
		if err != nil {
			t.Fatalf("accepted document does not re-sign: %v", err)
		}
		if !bytes.Equal(again.JWS, jws) {
			t.Fatalf("accepted document is not canonical:\n%s\n%s", jws, again.JWS)
		}
		if _, err := d.ReportData(); err != nil {
			t.Fatalf("ReportData: %v", err)
		}
	})
}

// joseAgrees reports an error unless go-jose parses jws as a compact EdDSA
// JWS whose signature verifies under pub() and whose payload is the one
// Parse read.
func joseAgrees(jws []byte) error {
	obj, err := jose.ParseSignedCompact(string(jws), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return fmt.Errorf("go-jose refuses the serialization: %w", err)
	}
	payload, err := obj.Verify(pub())
	if err != nil {
		return fmt.Errorf("go-jose refuses the signature: %w", err)
	}
	if _, want := segments(jws); !bytes.Equal(payload, want) {
		return errors.New("go-jose read another payload")
	}
	return nil
}

// FuzzDecodePayloadAgrees: the payload decoder accepts exactly the payloads
// its predecessor (decode with encoding/json, re-encode, compare bytes)
// accepted, with the same document; the seeds are the payloads of signed
// documents and TestParseRejects-style edits of them.
func FuzzDecodePayloadAgrees(f *testing.F) {
	sensitive := execDoc(f)
	sensitive.Execution.Clawea.AdmissionPolicyHashB64u, sensitive.Execution.Clawea.Sensitive = hash("admission policy"), evidencedoc.SensitiveTrue
	for _, d := range []*evidencedoc.Document{execDoc(f), sensitive, isolatedDoc(f), keyDoc(f, []byte("challenge"))} {
		_, payload := segments(sign(f, d).JWS)
		if _, _, err, refErr := evidencedoc.DecodePayloadBoth(payload, pub(), didkey.Format(pub())); err != nil || refErr != nil {
			f.Fatalf("a signed document's payload: %v, reference %v", err, refErr)
		}
		f.Add(payload)
		for _, r := range [][2]string{
			{`"kind":`, `"extra":1,"kind":`}, {`"kind":`, `"KIND":`}, {`"simulated":true,`, ``},
			{`"simulated":true,`, `"simulated":true,"signature_b64u":"",`}, {`"evidence":[`, `"key":null,"evidence":[`},
			{`"run_id":`, `"extra":"x","run_id":`}, {`"run_id":"run_1"`, `"run_id":"run\u005f1"`},
			{`"aux_b64u":{`, `"aux_b64u":{"a":"AA",`}, {`"aux_b64u":{`, `"aux_b64u":{"9":"AA","10":"AA",`},
			{`"aux_b64u":{`, `"aux_b64u":{"10":"AA","9":"AA",`}, {`"cert_chain_b64u":[`, `"cert_chain_b64u":[null,`},
			{`"evidence":[`, `"evidence":null,"x":[`}, {`"simulated":true`, `"simulated":"true"`}, {`{"platform"`, `{ "platform"`},
			// the evidence contexts
			{`"sensitive":true`, `"sensitive":"true"`}, {`"sensitive":true`, `"sensitive":null`}, {`,"sensitive":true`, ``},
			{`"gate_audit_count":3`, `"gate_audit_count":-3`}, {`"gate_audit_count":3`, `"gate_audit_count":"3"`},
			{`"gate_audit_count":3`, `"gate_audit_count":null`}, {`"model":"claude-opus-4-6"}`, `"model":"claude-opus-4-6","revision":""}`},
			{`"model":"claude-opus-4-6"}`, `"model":"claude-opus-4-6","revision":"r1"}`}, {`"model_identity":{`, `"model_identity":{"x":1,`},
			{`"admission_policy_hash_b64u":`, `"admission_policy_hash_b64u":"","x":`}, {`"recipient_x25519_b64u":"`, `"recipient_x25519_b64u":"","y":"`},
			{`,"recipient_x25519_b64u":"QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI"`, ``}, {`"challenge_b64u":"Yw"`, `"challenge_b64u":null`},
			{`"clawea":{`, `"clawea":null,"z":{`}, {`"run_id":"run_1"`, `"run_id":"run_1","clawea":{}`},
		} {
			f.Add(bytes.Replace(payload, []byte(r[0]), []byte(r[1]), 1))
		}
	}
	f.Add([]byte(`{"evidence_version":"clawea.dev/evidence/v1","kind":"key_attestation","attester_did":"","issued_at":"","nonce_b64u":"","evidence":null}`))
	did := didkey.Format(pub())
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, ref, gotErr, refErr := evidencedoc.DecodePayloadBoth(payload, pub(), did)
		if (gotErr == nil) != (refErr == nil) {
			t.Fatalf("decoder: %v; reference decoder: %v", gotErr, refErr)
		}
		if gotErr != nil {
			if got != nil {
				t.Fatal("document returned with an error")
			}
			return
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("documents differ:\n%+v\n%+v", got, ref)
		}
	})
}

// isolatedDoc is execDoc with v3 commitments: isolation claims and no gate
// decisions (the empty log's root).
func isolatedDoc(t testing.TB) *evidencedoc.Document {
	t.Helper()
	d := execDoc(t)
	iso, err := evidencedoc.NewIsolation(evidencedoc.IsolationObservation{
		AttesterUID: 998, ControlUIDs: []int64{999, 1000}, SocketProtected: true, YamaPtraceScope: evidencedoc.YamaAbsent,
		PeerUID: -1, PeerPIDNamespace: evidencedoc.PIDNamespaceUnknown,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &d.Execution.Clawea
	c.Version, c.Isolation, c.GateAuditRootB64u, c.GateAuditCount = evidencedoc.CommitmentsVersionV3, iso, "", 0
	return d
}
