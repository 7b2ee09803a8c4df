package answer

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/pohjson"
)

// The vector the plugin's tests share (clients/openclaw/test/answer.test.js):
// key seed SHA-256("clawea answer test key").
const (
	vecStatement = `{"answer_version":"1","attester_did":"did:key:z6MknmNb1n1CG3KALNCTZ9FCtAJrQzjsoEcWmysmdFTqf9eR","peer_pid":4242,"peer_start_time":123456,"request_hash_b64u":"_tm5F2iqwzCwZpbuhNwRxO_BxugjEPA4JunCcyIjtJk","response_hash_b64u":"r4MNvcQjSE-gt_cbWaASumq01AtmALFbhR1oNDqOaFE","run_id":"run_abc","seq":3,"status":200}`
	vecSignature = "6mb_7br03BarptyIH43t7tPtLW_RstLsEbgSnCCcF0sQ8cesuFbk0hz6Ba9aQSmrrqG7ptnxxbbCK_5tL0JlAA"
	vecBody      = "{\"allow\":true}\n"
	vecRequest   = `{"turn_id":"turn_1","tool":"read","params":{"path":"x"}}`
)

func vecKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("clawea answer test key"))
	return ed25519.NewKeyFromSeed(seed[:])
}

func vecExpect() Expect {
	return Expect{
		RunID: "run_abc", Seq: 3, Status: 200,
		RequestHash:  RequestHash("POST", "/v1/runs/run_abc/tool-calls", []byte(vecRequest)),
		ResponseHash: sha256.Sum256([]byte(vecBody)),
		PID:          4242, StartTime: 123456,
	}
}

func TestVector(t *testing.T) {
	k := vecKey()
	pub := k.Public().(ed25519.PublicKey)
	st, err := Verify(pub, b64u.Encode([]byte(vecStatement)), vecSignature)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(vecExpect()); err != nil {
		t.Fatal(err)
	}
	// The statement is JCS, and signing is deterministic.
	if c, err := jcs.Canonicalize([]byte(vecStatement)); err != nil || string(c) != vecStatement {
		t.Fatalf("not JCS: %s %v", c, err)
	}
	if got := b64u.Encode(ed25519.Sign(k, Message([]byte(vecStatement)))); got != vecSignature {
		t.Fatalf("signature %s", got)
	}
	if b, err := st.Marshal(); err != nil || string(b) != vecStatement {
		t.Fatalf("re-marshal: %s %v", b, err)
	}
}

// TestVerifyRefusals: every way an answer can be wrong, each with its own
// error; most vectors are negative.
func TestVerifyRefusals(t *testing.T) {
	k := vecKey()
	pub := k.Public().(ed25519.PublicKey)
	stB := b64u.Encode([]byte(vecStatement))
	_, other, _ := ed25519.GenerateKey(nil)
	otherPub := other.Public().(ed25519.PublicKey)
	signAs := func(key ed25519.PrivateKey, stmt string) (string, string) {
		return b64u.Encode([]byte(stmt)), b64u.Encode(ed25519.Sign(key, Message([]byte(stmt))))
	}
	flip := []byte(vecStatement)
	flip[len(flip)-3] = '1' // status 210
	otherDID := strings.Replace(vecStatement, didkey.Format(pub), didkey.Format(otherPub), 1)
	for _, tc := range []struct {
		name    string
		pub     ed25519.PublicKey
		st, sig string
		want    error
	}{
		{"no headers", pub, "", "", errUnsigned},
		{"no signature", pub, stB, "", errUnsigned},
		{"no statement", pub, "", vecSignature, errUnsigned},
		{"flipped statement", pub, b64u.Encode(flip), vecSignature, errSignature},
		{"signature under another key, naming this attester", pub, func() string { s, _ := signAs(other, vecStatement); return s }(), func() string { _, g := signAs(other, vecStatement); return g }(), errSignature},
		{"another attester's answer", pub, func() string { s, _ := signAs(other, otherDID); return s }(), func() string { _, g := signAs(other, otherDID); return g }(), errSigner},
		{"this key naming another attester", pub, func() string { s, _ := signAs(k, otherDID); return s }(), func() string { _, g := signAs(k, otherDID); return g }(), errSigner},
		{"pinned to another key", otherPub, stB, vecSignature, errSigner},
		{"short signature", pub, stB, vecSignature[:40], errSignature},
		{"statement not b64u", pub, "*" + stB, vecSignature, errMalformed},
		{"whitespace", pub, func() string { s, _ := signAs(k, " "+vecStatement); return s }(), func() string { _, g := signAs(k, " "+vecStatement); return g }(), errMalformed},
		{"duplicate member", pub, func() string {
			s, _ := signAs(k, strings.Replace(vecStatement, `"seq":3`, `"seq":3,"seq":4`, 1))
			return s
		}(), func() string {
			_, g := signAs(k, strings.Replace(vecStatement, `"seq":3`, `"seq":3,"seq":4`, 1))
			return g
		}(), errMalformed},
		{"float seq", pub, func() string { s, _ := signAs(k, strings.Replace(vecStatement, `"seq":3`, `"seq":3.0`, 1)); return s }(), func() string { _, g := signAs(k, strings.Replace(vecStatement, `"seq":3`, `"seq":3.0`, 1)); return g }(), errMalformed},
		{"other version", pub, func() string {
			s, _ := signAs(k, strings.Replace(vecStatement, `"answer_version":"1"`, `"answer_version":"2"`, 1))
			return s
		}(), func() string {
			_, g := signAs(k, strings.Replace(vecStatement, `"answer_version":"1"`, `"answer_version":"2"`, 1))
			return g
		}(), errMalformed},
		{"error status", pub, func() string {
			s, _ := signAs(k, strings.Replace(vecStatement, `"status":200`, `"status":403`, 1))
			return s
		}(), func() string {
			_, g := signAs(k, strings.Replace(vecStatement, `"status":200`, `"status":403`, 1))
			return g
		}(), errMalformed},
	} {
		_, err := Verify(tc.pub, tc.st, tc.sig)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	st, err := Verify(pub, stB, vecSignature)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Expect)
		want error
	}{
		{"another request", func(e *Expect) { e.RequestHash = RequestHash("POST", "/v1/runs/run_abc/tool-calls", []byte(`{}`)) }, errRequestMismatch},
		{"another method", func(e *Expect) { e.RequestHash = RequestHash("PUT", "/v1/runs/run_abc/tool-calls", []byte(vecRequest)) }, errRequestMismatch},
		{"a flipped body", func(e *Expect) { e.ResponseHash = sha256.Sum256([]byte(`{"allow":false}` + "\n")) }, errResponseMismatch},
		{"another status", func(e *Expect) { e.Status = 201 }, errStatusMismatch},
		{"another pid", func(e *Expect) { e.PID++ }, errPeerMismatch},
		{"another start time", func(e *Expect) { e.StartTime++ }, errPeerMismatch},
		{"another run", func(e *Expect) { e.RunID = "run_abd" }, errRunMismatch},
		{"a replay (seq already seen)", func(e *Expect) { e.Seq = 4 }, errSequence},
		{"a skipped answer", func(e *Expect) { e.Seq = 2 }, errSequence},
	} {
		e := vecExpect()
		tc.mod(&e)
		if err := st.Check(e); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// The request hash covers method, target and body unambiguously.
	if RequestHash("POST", "/a\nb", nil) == RequestHash("POST", "/a", []byte("b")) {
		t.Fatal("ambiguous request hash")
	}
}

func TestMarshalRefusesBadFields(t *testing.T) {
	good := func() Statement {
		s, _ := parse([]byte(vecStatement))
		return *s
	}
	for name, mod := range map[string]func(*Statement){
		"run id with a quote": func(s *Statement) { s.RunID = `run"x` },
		"empty run id":        func(s *Statement) { s.RunID = "" },
		"seq 0":               func(s *Statement) { s.Seq = 0 },
		"seq beyond 2^53-1":   func(s *Statement) { s.Seq = pohjson.MaxSafeInteger + 1 },
		"pid 0":               func(s *Statement) { s.PeerPID = 0 },
		"bad hash":            func(s *Statement) { s.RequestHashB64u = "x" },
		"bad did":             func(s *Statement) { s.AttesterDID = "did:key:zx" },
		"status 500":          func(s *Statement) { s.Status = 500 },
	} {
		s := good()
		mod(&s)
		if _, err := s.Marshal(); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParse: whatever Parse accepts re-encodes to identical bytes; on an
// error nothing is returned.
func FuzzParse(f *testing.F) {
	f.Add([]byte(vecStatement))
	f.Add([]byte(`{"seq":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := fuzzcheck.RoundTrip(t, b, parse, (*Statement).Marshal)
		if !ok {
			return
		}
		// Marshal writes by hand what encoding/json writes for a valid
		// statement.
		if j, err := json.Marshal(s); err != nil || string(j) != string(b) {
			t.Fatalf("Marshal %q, encoding/json %q (%v)", b, j, err)
		}
	})
}
