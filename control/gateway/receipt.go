package gateway

import (
	"crypto"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
)

// Bounds of a receipt, as clawverify checks gateway receipts: tokens and
// latency are integers, tokens at most 10,000,000, latency at most an hour.
const (
	maxReceiptTokens  = 10_000_000
	maxReceiptLatency = time.Hour
	// maxReceiptIDBytes bounds the run id, receipt id, provider and model.
	maxReceiptIDBytes = 256
)

// Call is what the gateway knows of one model call when it receipts it
// (docs/spec/model-gateway.md, "Receipts"). Every field is required.
type Call struct {
	// RunID is the run the call belongs to; EventHashB64u the
	// event_hash_b64u of the llm_call event the plugin registered for it.
	RunID, ReceiptID, Provider, Model, EventHashB64u string
	// RequestSHA256 and ResponseSHA256 hash the request body the gateway
	// forwarded upstream and the response body it relayed back.
	RequestSHA256, ResponseSHA256 [32]byte
	TokensInput, TokensOutput     int64
	Latency                       time.Duration
	// At is when the call completed; it is the receipt's timestamp and
	// issued_at.
	At time.Time
	// SystemTextSHA256 hashes the system text the gateway forwarded (UTF-8);
	// SuffixSHA256 and SuffixUTF16Len the part of it after the attested
	// prompt (SHA-256 of the UTF-8 bytes, and the length in UTF-16 code
	// units, as the llm_call payload reports them). The attester checks
	// them against the llm_call event's self-reported hashes.
	SystemTextSHA256, SuffixSHA256 [32]byte
	SuffixUTF16Len                 int64
}

// errCall refuses a Call that cannot be receipted.
var errCall = errors.New("gateway: receipt")

// SignReceipt returns the call's PoH gateway_receipt envelope (compact
// JSON), hash-only, bound to the run and the llm_call event, signed by s,
// the attester's DID key (control.Identity.Signer), and naming it as
// gateway_id. s must be an Ed25519 signer.
func SignReceipt(c Call, s crypto.Signer) (envelopeJSON []byte, err error) {
	if err := checkCall(&c); err != nil {
		return nil, err
	}
	pub, err := poh.SignerKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCall, err)
	}
	return poh.Sign(poh.TypeGatewayReceipt, receiptPayload(&c, didkey.Format(pub)), s, c.At)
}

// checkCall refuses a Call whose fields a receipt cannot carry or
// clawverify would refuse.
func checkCall(c *Call) error {
	for _, f := range []struct{ name, v string }{
		{"run id", c.RunID}, {"receipt id", c.ReceiptID}, {"provider", c.Provider}, {"model", c.Model},
	} {
		if f.v == "" || len(f.v) > maxReceiptIDBytes || !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s must be 1..%d bytes of UTF-8", errCall, f.name, maxReceiptIDBytes)
		}
	}
	if !b64u.ValidHash(c.EventHashB64u) {
		return fmt.Errorf("%w: the llm_call event hash is not a b64u SHA-256 hash", errCall)
	}
	if c.TokensInput < 0 || c.TokensInput > maxReceiptTokens || c.TokensOutput < 0 || c.TokensOutput > maxReceiptTokens {
		return fmt.Errorf("%w: token counts must be 0..%d", errCall, maxReceiptTokens)
	}
	if c.Latency < 0 || c.Latency > maxReceiptLatency {
		return fmt.Errorf("%w: latency must be 0..%s", errCall, maxReceiptLatency)
	}
	if c.At.IsZero() || c.At.Year() < 2000 || c.At.Year() > 9999 {
		return fmt.Errorf("%w: completion time out of range", errCall)
	}
	if c.SuffixUTF16Len < 0 || c.SuffixUTF16Len > pohjson.MaxSafeInteger {
		return fmt.Errorf("%w: suffix length out of range", errCall)
	}
	var zero [32]byte
	if c.SystemTextSHA256 == zero || c.SuffixSHA256 == zero {
		return fmt.Errorf("%w: the system text and suffix hashes are required", errCall)
	}
	return nil
}

// receiptPayload is the gateway_receipt v1 payload of c, members in the
// schema's order.
func receiptPayload(c *Call, gatewayDID string) *pohjson.Value {
	str, hash := pohjson.NewString, func(h [32]byte) *pohjson.Value { return pohjson.NewString(b64u.Encode(h[:])) }
	return pohjson.NewObject(
		pohjson.M("receipt_version", str("1")),
		pohjson.M("receipt_id", str(c.ReceiptID)),
		pohjson.M("gateway_id", str(gatewayDID)),
		pohjson.M("provider", str(c.Provider)),
		pohjson.M("model", str(c.Model)),
		pohjson.M("request_hash_b64u", hash(c.RequestSHA256)),
		pohjson.M("response_hash_b64u", hash(c.ResponseSHA256)),
		pohjson.M("tokens_input", pohjson.NewInt(c.TokensInput)),
		pohjson.M("tokens_output", pohjson.NewInt(c.TokensOutput)),
		pohjson.M("latency_ms", pohjson.NewInt(c.Latency.Milliseconds())),
		pohjson.M("timestamp", str(poh.FormatTime(c.At))),
		pohjson.M("binding", pohjson.NewObject(
			pohjson.M("run_id", str(c.RunID)),
			pohjson.M("event_hash_b64u", str(c.EventHashB64u)),
		)),
		pohjson.M("metadata", pohjson.NewObject(
			pohjson.M(poh.ReceiptCallMember, pohjson.NewObject(
				pohjson.M("system_text_hash_b64u", hash(c.SystemTextSHA256)),
				pohjson.M("suffix_utf16_len", pohjson.NewInt(c.SuffixUTF16Len)),
				pohjson.M("suffix_hash_b64u", hash(c.SuffixSHA256)),
			)),
		)),
	)
}
