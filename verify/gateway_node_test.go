package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/wire/evidencedoc"
)

// receiptCheckDir is hack/receipt-check, relative to this package.
var receiptCheckDir = filepath.Join("..", "hack", "receipt-check")

// nodeReceiptCheck runs hack/receipt-check/check.mjs, an independent
// checker written from the PoH schemas (node:crypto only), on bundle with
// the attester's DID and the attested gateway record. It skips when node
// is not installed, except under CI, where it fails. It returns the
// checker's refusal line, "" when it accepted.
func nodeReceiptCheck(t *testing.T, bundle []byte, attesterDID string, rec *evidencedoc.GatewayRecord) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		citest.SkipOrFail(t, "node not installed")
	}
	in, err := json.Marshal(map[string]any{"bundle": json.RawMessage(bundle), "attester_did": attesterDID, "gateway": rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Dir = receiptCheckDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		var got evidencedoc.GatewayRecord
		if err := json.Unmarshal(bytes.ReplaceAll(out, []byte(`"receipts"`), []byte(`"receipt_count"`)), &got); err != nil || got != *rec {
			t.Fatalf("checker accepted with %s, want %+v", out, rec)
		}
		return ""
	}
	if _, ok := err.(*exec.ExitError); !ok || !strings.HasPrefix(stderr.String(), "receipt-check: ") {
		t.Fatalf("checker did not run: %v %s", err, stderr.String())
	}
	return strings.TrimSpace(stderr.String())
}

// TestIndependentReceiptCheck: the independent checker accepts the
// receipts of a gateway run as the producer attests them, and refuses a
// moved or altered receipt with the same reason code as Go's verifier.
func TestIndependentReceiptCheck(t *testing.T) {
	good := gatewayRun(t)
	rec := attestfixture.Input(t, &good.Run, "", 0).Gateway
	attester := did(attesterKey())
	if msg := nodeReceiptCheck(t, good.bundle(t), attester, rec); msg != "" {
		t.Fatalf("refused our receipts: %s", msg)
	}
	for name, c := range map[string]struct {
		edit func(r *run)
		code string
	}{
		"reordered": {func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return []json.RawMessage{rs[1], rs[0]} }
		}, "EVIDENCE_MISMATCH"},
		"dropped": {func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage { return rs[:1] }
		}, "MISSING_REQUIRED_FIELD"},
		"moved to the other llm_call": {func(r *run) { r.MoveReceipt = true }, "RECEIPT_BINDING_MISMATCH"},
		"moved to another run": {func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.RunID = "run_other" }
		}, "RECEIPT_BINDING_MISMATCH"},
		"re-signed with other tokens": {func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.TokensOutput = 7 }
		}, "EVIDENCE_MISMATCH"},
		"other system text": {func(r *run) {
			r.EditReceipt = func(i int, c *gateway.Call) { c.SystemTextSHA256[0] ^= 1 }
		}, "EVIDENCE_MISMATCH"},
		"signed by another key": {func(r *run) { r.ReceiptKey = key(8) }, "CLAIM_NOT_FOUND"},
		"altered after signing": {func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage {
				return []json.RawMessage{rs[0], bytes.Replace(rs[1], []byte(`"tokens_output":50`), []byte(`"tokens_output":5`), 1)}
			}
		}, "HASH_MISMATCH"},
		"signature flipped": {func(r *run) {
			r.EditReceipts = func(rs []json.RawMessage) []json.RawMessage {
				var env map[string]any
				if err := json.Unmarshal(rs[0], &env); err != nil {
					t.Fatal(err)
				}
				sig := env["signature_b64u"].(string)
				flipped := "A" + sig[1:]
				if flipped == sig {
					flipped = "B" + sig[1:]
				}
				return []json.RawMessage{bytes.Replace(rs[0], []byte(sig), []byte(flipped), 1), rs[1]}
			}
		}, "SIGNATURE_INVALID"},
	} {
		t.Run(name, func(t *testing.T) {
			r := gatewayRun(t)
			c.edit(r)
			msg := nodeReceiptCheck(t, r.bundle(t), attester, rec)
			if !strings.HasPrefix(msg, "receipt-check: "+c.code+":") {
				t.Fatalf("checker said %q, want %s", msg, c.code)
			}
		})
	}
}
