package poh

import (
	"crypto/sha256"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// nonceBindingVersion is the version label inside the TEE nonce binding.
const nonceBindingVersion = "tee_nonce_binding_v1"

// NonceBinding returns the raw 32-byte TEE nonce binding digest:
// SHA-256(JSON.stringify({"nonce_binding_version":"tee_nonce_binding_v1",
// "agent_did":A,"run_id":R,"proof_bundle_hash_b64u":H})), keys in exactly that
// order. Its b64u form is runtime_metadata.tee.nonce_binding_b64u and it
// fills bytes 0..31 of REPORT_DATA.
func NonceBinding(agentDID, runID, proofBundleHashB64u string) ([32]byte, error) {
	v := pohjson.NewObject(
		pohjson.M("nonce_binding_version", pohjson.NewString(nonceBindingVersion)),
		pohjson.M("agent_did", pohjson.NewString(agentDID)),
		pohjson.M("run_id", pohjson.NewString(runID)),
		pohjson.M("proof_bundle_hash_b64u", pohjson.NewString(proofBundleHashB64u)),
	)
	b, err := pohjson.Stringify(v)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// NonceBindingB64u is NonceBinding in its b64u form.
func NonceBindingB64u(agentDID, runID, proofBundleHashB64u string) (string, error) {
	d, err := NonceBinding(agentDID, runID, proofBundleHashB64u)
	if err != nil {
		return "", err
	}
	return b64u.Encode(d[:]), nil
}
