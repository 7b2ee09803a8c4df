package gateway_test

import (
	"crypto/sha256"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/sealed"
)

// identity is the attester's real DID identity (ephemeral).
func identity(t testing.TB) *control.Identity {
	t.Helper()
	id, err := control.LoadIdentity(t.Context(), "", nil, sealed.Options{AllowUnlocked: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	return id
}

func call(n int) gateway.Call {
	return gateway.Call{
		RunID: "run_r1", ReceiptID: "rcpt_" + string(rune('a'+n)), Provider: "anthropic", Model: "claude-opus-4-6",
		EventHashB64u:    b64u.SHA256([]byte{byte(n)}),
		RequestSHA256:    sha256.Sum256([]byte("request")),
		ResponseSHA256:   sha256.Sum256([]byte("response")),
		TokensInput:      1200,
		TokensOutput:     80,
		Latency:          1500*time.Millisecond + 700*time.Microsecond,
		At:               time.Date(2026, 11, 26, 21, 0, 0, 123_456_789, time.UTC),
		SystemTextSHA256: sha256.Sum256([]byte("prompt\nsuffix")),
		SuffixSHA256:     sha256.Sum256([]byte("\nsuffix")),
		SuffixUTF16Len:   7,
	}
}

// TestSignReceipt: the envelope is a gateway_receipt the PoH rules accept,
// signed by the attester's DID, naming it as gateway, hash-only and bound
// to the run and the llm_call event.
func TestSignReceipt(t *testing.T) {
	id := identity(t)
	c := call(0)
	env, err := gateway.SignReceipt(c, id.Signer)
	if err != nil {
		t.Fatal(err)
	}
	v, err := poh.Verify(env, poh.VerifyOptions{Type: poh.TypeGatewayReceipt})
	if err != nil {
		t.Fatal(err)
	}
	if v.SignerDID != id.DID {
		t.Fatalf("signer %s, want the attester %s", v.SignerDID, id.DID)
	}
	p := v.Payload
	for k, want := range map[string]string{
		"receipt_version":    "1",
		"receipt_id":         c.ReceiptID,
		"gateway_id":         id.DID,
		"provider":           c.Provider,
		"model":              c.Model,
		"request_hash_b64u":  b64u.Encode(c.RequestSHA256[:]),
		"response_hash_b64u": b64u.Encode(c.ResponseSHA256[:]),
		"timestamp":          "2026-11-26T21:00:00.123Z",
	} {
		if got, _ := p.GetString(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got, _ := p.Get("latency_ms").Int(); got != 1500 {
		t.Errorf("latency_ms = %d", got)
	}
	if run, _ := p.Get("binding").GetString("run_id"); run != c.RunID {
		t.Errorf("binding.run_id = %q", run)
	}
	if eh, _ := p.Get("binding").GetString("event_hash_b64u"); eh != c.EventHashB64u {
		t.Errorf("binding.event_hash_b64u = %q", eh)
	}
	seen := p.Get("metadata").Get(poh.ReceiptCallMember)
	if s, _ := seen.GetString("suffix_hash_b64u"); s != b64u.Encode(c.SuffixSHA256[:]) {
		t.Errorf("suffix_hash_b64u = %q", s)
	}
	if strings.Contains(string(env), "prompt") || strings.Contains(string(env), "suffix\"") {
		t.Fatal("the receipt carries text, not only hashes")
	}
}

// TestSignReceiptRefuses: a call a receipt cannot carry, or that
// clawverify would refuse, is refused before anything is signed.
func TestSignReceiptRefuses(t *testing.T) {
	id := identity(t)
	for name, mut := range map[string]func(*gateway.Call){
		"no run":          func(c *gateway.Call) { c.RunID = "" },
		"no receipt id":   func(c *gateway.Call) { c.ReceiptID = "" },
		"no provider":     func(c *gateway.Call) { c.Provider = "" },
		"long model":      func(c *gateway.Call) { c.Model = strings.Repeat("m", 257) },
		"bad utf-8":       func(c *gateway.Call) { c.Model = "\xff" },
		"bad event hash":  func(c *gateway.Call) { c.EventHashB64u = "abc" },
		"negative tokens": func(c *gateway.Call) { c.TokensInput = -1 },
		"too many tokens": func(c *gateway.Call) { c.TokensOutput = 10_000_001 },
		"negative time":   func(c *gateway.Call) { c.Latency = -time.Millisecond },
		"over an hour":    func(c *gateway.Call) { c.Latency = time.Hour + time.Millisecond },
		"no time":         func(c *gateway.Call) { c.At = time.Time{} },
		"no system text":  func(c *gateway.Call) { c.SystemTextSHA256 = [32]byte{} },
		"no suffix hash":  func(c *gateway.Call) { c.SuffixSHA256 = [32]byte{} },
		"negative suffix": func(c *gateway.Call) { c.SuffixUTF16Len = -1 },
	} {
		c := call(0)
		mut(&c)
		if env, err := gateway.SignReceipt(c, id.Signer); err == nil {
			t.Errorf("%s: signed %s", name, env)
		}
	}
	if _, err := gateway.SignReceipt(call(0), nil); err == nil {
		t.Error("signed without a signer")
	}
}
