package control

import (
	"errors"
	"fmt"
	"sync"

	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/poh"
)

// receiptSigner sets what receipts rn's model calls in f: the PoH
// gateway_receipt signed with the attester's DID key (Receipt), appended
// to the run's gateway record (Record), whose count and chain the
// attestation commits to. The record verifies each receipt before it takes
// it: a signature the key did not make (a fault) is never recorded.
func (s *Service) receiptSigner(rn *Run, f *gateway.Facts) {
	f.Receipt = func(c *gateway.Call) ([]byte, error) { return gateway.SignReceipt(*c, s.id.Signer) }
	f.Record = rn.receipts.append
}

// errRecord refuses a receipt the run's record cannot take.
var errRecord = errors.New("control: gateway record")

// receiptRecord is the run's gateway record: the receipts the gateway
// issued for it, in order, as a count and a hash chain
// (poh.NextReceiptChain) that the execution attestation commits to. The
// zero value is an empty record; it is safe for concurrent use.
type receiptRecord struct {
	mu     sync.Mutex
	runID  string
	signer string
	count  int64
	chain  string
	ids    map[string]bool // receipt ids
	events map[string]bool // bound llm_call event hashes
}

// append verifies a gateway_receipt envelope (as gateway.SignReceipt returns it)
// and adds it to the record. It refuses an envelope that does not verify,
// one of another run or signer than the record's first, a second receipt
// with the same receipt id or for the same llm_call event, and more
// receipts than a proof bundle may carry (1,000).
func (r *receiptRecord) append(envelopeJSON []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, chain, err := poh.ChainGatewayReceipt(r.chain, r.count, envelopeJSON)
	if err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	id, _ := v.Payload.GetString("receipt_id")
	run, _ := v.Payload.Get("binding").GetString("run_id")
	event, _ := v.Payload.Get("binding").GetString("event_hash_b64u")
	switch g, _ := v.Payload.GetString("gateway_id"); {
	case run == "" || !b64u.ValidHash(event):
		return fmt.Errorf("%w: the receipt is not bound to a run and an llm_call event", errRecord)
	case g != v.SignerDID:
		return fmt.Errorf("%w: gateway_id is not the signer", errRecord)
	case r.count > 0 && run != r.runID:
		return fmt.Errorf("%w: the receipt is bound to another run", errRecord)
	case r.count > 0 && v.SignerDID != r.signer:
		return fmt.Errorf("%w: the receipt has another signer", errRecord)
	case r.ids[id]:
		return fmt.Errorf("%w: a second receipt with this receipt id", errRecord)
	case r.events[event]:
		return fmt.Errorf("%w: a second receipt for this llm_call event", errRecord)
	}
	if r.count == 0 {
		r.runID, r.signer = run, v.SignerDID
		r.ids, r.events = map[string]bool{}, map[string]bool{}
	}
	r.ids[id], r.events[event] = true, true
	r.count, r.chain = r.count+1, chain
	return nil
}

// summary returns the number of receipts in the record and the head of
// their chain ("" for none).
func (r *receiptRecord) summary() (count int64, chainHash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count, r.chain
}
