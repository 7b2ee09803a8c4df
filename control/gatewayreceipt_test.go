package control

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
)

// receiptIdentity is the DID identity of a new service: the attester's
// real signing key (ephemeral).
func receiptIdentity(t testing.TB) *Identity {
	return newTestService(t, map[string]string{"t.txt": "sha256:" + strings.Repeat("0", 64)}).id
}

// receiptCall is the n-th call of one run, each bound to its own event.
func receiptCall(n int) gateway.Call {
	return gateway.Call{
		RunID: "run_r1", ReceiptID: "rcpt_" + string(rune('a'+n)), Provider: "anthropic", Model: "claude-opus-4-6",
		EventHashB64u: b64u.SHA256([]byte{byte(n)}), RequestSHA256: sha256.Sum256([]byte("request")),
		ResponseSHA256: sha256.Sum256([]byte("response")), TokensInput: 1200, TokensOutput: 80, Latency: time.Second,
		At: time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC), SystemTextSHA256: sha256.Sum256([]byte("prompt\nsuffix")),
		SuffixSHA256: sha256.Sum256([]byte("\nsuffix")), SuffixUTF16Len: 7,
	}
}

func signReceipt(t testing.TB, c gateway.Call, id *Identity) []byte {
	t.Helper()
	env, err := gateway.SignReceipt(c, id.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestRecord: the record counts the receipts and chains their payload
// hashes in order, and refuses what does not belong to the run's record.
func TestRecord(t *testing.T) {
	id := receiptIdentity(t)
	var rec receiptRecord
	if n, h := rec.summary(); n != 0 || h != "" {
		t.Fatalf("empty record: %d %q", n, h)
	}
	var envs [][]byte
	head := ""
	for i := range 3 {
		env, err := gateway.SignReceipt(receiptCall(i), id.Signer)
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.append(env); err != nil {
			t.Fatal(err)
		}
		if _, head, err = poh.ChainGatewayReceipt(head, int64(i), env); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	if n, h := rec.summary(); n != 3 || h != head {
		t.Fatalf("summary %d %q, want 3 %q", n, h, head)
	}

	other := receiptCall(3)
	other.RunID = "run_r2"
	sameEvent := receiptCall(4)
	sameEvent.EventHashB64u = receiptCall(0).EventHashB64u
	sameID := receiptCall(5)
	sameID.ReceiptID = receiptCall(1).ReceiptID
	tampered := []byte(strings.Replace(string(envs[0]), `"tokens_output":80`, `"tokens_output":8`, 1))
	for name, env := range map[string][]byte{
		"another run":      signReceipt(t, other, id),
		"same event":       signReceipt(t, sameEvent, id),
		"same receipt id":  signReceipt(t, sameID, id),
		"another signer":   signReceipt(t, receiptCall(6), receiptIdentity(t)),
		"altered":          tampered,
		"not an envelope":  []byte(`{}`),
		"a second append":  envs[2],
		"truncated":        envs[1][:len(envs[1])-1],
		"an empty payload": nil,
	} {
		if err := rec.append(env); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	if n, h := rec.summary(); n != 3 || h != head {
		t.Fatalf("a refused append changed the record: %d %q", n, h)
	}
	var pe *poh.Error
	if err := rec.append(tampered); !errors.As(err, &pe) || pe.Code != poh.HashMismatch {
		t.Fatalf("altered receipt: %v, want HASH_MISMATCH", err)
	}
}

// TestRecordBounded: a record holds at most the receipts a proof bundle
// may carry.
func TestRecordBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("signs a thousand receipts")
	}
	id := receiptIdentity(t)
	var rec receiptRecord
	for i := range maxReceipts + 1 {
		c := receiptCall(0)
		c.ReceiptID = "rcpt_" + b64u.SHA256([]byte{byte(i), byte(i >> 8)})[:12]
		c.EventHashB64u = b64u.SHA256([]byte{byte(i), byte(i >> 8), 1})
		err := rec.append(signReceipt(t, c, id))
		if (err == nil) != (i < maxReceipts) {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
}

// maxReceipts is the most receipts a proof bundle carries.
const maxReceipts = 1000

// BenchmarkReceipt is the gateway's per-call receipt cost (control.receiptSigner): sign, then
// verify and append to the run's record.
func BenchmarkReceipt(b *testing.B) {
	id := receiptIdentity(b)
	var rec receiptRecord
	i := 0
	for b.Loop() {
		c := receiptCall(0)
		c.ReceiptID = b64u.SHA256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		c.EventHashB64u = b64u.SHA256([]byte{byte(i), byte(i >> 8), byte(i >> 16), 1})
		env, err := gateway.SignReceipt(c, id.Signer)
		if err != nil {
			b.Fatal(err)
		}
		if i < maxReceipts {
			if err := rec.append(env); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}

// FuzzRecordAppend: append never panics; what it refuses leaves the record
// as it was, and what it accepts is a gateway_receipt that advances the
// count by one and the chain as poh.ChainGatewayReceipt does. The seeds in
// testdata/fuzz/FuzzRecordAppend are a receipt signed by gateway.SignReceipt and
// malformed variants.
func FuzzRecordAppend(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, env []byte) {
		var rec receiptRecord
		err := rec.append(env)
		n, chain := rec.summary()
		if err != nil {
			if n != 0 || chain != "" {
				t.Fatalf("a refused receipt changed the record: %d %q", n, chain)
			}
			return
		}
		_, want, err := poh.ChainGatewayReceipt("", 0, env)
		if err != nil || n != 1 || chain != want {
			t.Fatalf("accepted: %d %q, want 1 %q (%v)", n, chain, want, err)
		}
		if rec.append(env) == nil {
			t.Fatal("the same receipt appended twice")
		}
	})
}
