package testfixture

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// receipts returns the run's gateway receipts: with r.ReceiptKey, one per
// llm_call event of chain, in chain order, for the system text the
// fixture's llm_call payloads report (each call moved by r.MoveReceipt and
// edited by r.EditReceipt), then r.EditReceipts applied to the list. Without r.ReceiptKey, none.
func (r *Run) receipts(t testing.TB, chain []poh.EventChainEntry, llmCalls []*pohjson.Value) []json.RawMessage {
	t.Helper()
	if r.ReceiptKey == nil {
		return nil
	}
	var out []json.RawMessage
	var first string
	n := 0
	for _, e := range chain {
		if e.EventType != poh.EventTypeLLMCall {
			continue
		}
		p := llmCalls[n]
		c := gateway.Call{
			RunID: e.RunID, ReceiptID: "rcpt_" + e.EventID, Provider: r.Provider, Model: r.Model,
			EventHashB64u:  e.EventHashB64u,
			RequestSHA256:  sha256.Sum256([]byte("request of " + e.EventID)),
			ResponseSHA256: sha256.Sum256([]byte("response of " + e.EventID)),
			TokensInput:    1000 + int64(n), TokensOutput: 50,
			Latency:          time.Duration(700+n) * time.Millisecond,
			At:               Now.Add(time.Duration(n)*time.Second + 500*time.Millisecond),
			SystemTextSHA256: hashOf(t, p, "system_text_hash_b64u"),
			SuffixSHA256:     hashOf(t, p, "suffix_hash_b64u"),
		}
		c.SuffixUTF16Len, _ = p.Get("suffix_utf16_len").Int()
		if n == 0 {
			first = c.EventHashB64u
		} else if r.MoveReceipt {
			c.EventHashB64u = first
		}
		if r.EditReceipt != nil {
			r.EditReceipt(n, &c)
		}
		env, err := gateway.SignReceipt(c, r.ReceiptKey)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
		n++
	}
	if r.EditReceipts != nil {
		out = r.EditReceipts(out)
	}
	return out
}

// hashOf decodes the b64u SHA-256 hash member k of v.
func hashOf(t testing.TB, v *pohjson.Value, k string) [32]byte {
	t.Helper()
	s, _ := v.GetString(k)
	h, err := b64u.DecodeHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
