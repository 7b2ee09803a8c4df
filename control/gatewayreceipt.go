package control

import "github.com/clawea/attester/control/gateway"

// receiptSigner returns the function that receipts rn's model calls: the
// PoH gateway_receipt signed with the attester's DID key, appended to the
// run's gateway record (whose count and chain the attestation commits to).
func (s *Service) receiptSigner(rn *Run) func(c *gateway.Call) ([]byte, error) {
	return func(c *gateway.Call) ([]byte, error) {
		env, err := gateway.SignReceipt(*c, s.id)
		if err != nil {
			return nil, err
		}
		if err := rn.receipts.Append(env); err != nil {
			return nil, err
		}
		return env, nil
	}
}
