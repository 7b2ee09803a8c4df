package verify

import (
	"crypto/ed25519"
	"crypto/subtle"
	"slices"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidencedoc"
)

// checkKeyAttestation names the key-attestation check.
const checkKeyAttestation = "key-attestation"

// KeyResult is a key attestation that passed every check.
type KeyResult struct {
	AttesterDID string
	AttesterKey ed25519.PublicKey
	// RecipientX25519 is the attester's HPKE pack-recipient public key, bound
	// into REPORT_DATA through the key context; nil when it has none.
	RecipientX25519 []byte
	Simulated       bool
	Evidence        []EvidenceResult
	Platform        []*platform.Result
	Checks          []CheckResult
	Warnings        []string
}

// VerifyKeyAttestation checks an attester's key attestation (the evidence
// document GET /v1/identity returns) before a pack author seals to it: the
// JWS signature by the attester DID's key, that it answers challenge (the
// caller's fresh nonce; empty means no freshness and a warning), the
// hardware evidence to the vendor roots with REPORT_DATA recomputed from the
// challenge, the identity key and the key context, and then the platform
// policy (measurements, TCB, debug, simulated) and trusted attester DIDs.
// Commitment expectations of the policy (prompt, report, gate, model) do not
// apply to a key attestation and are ignored.
func VerifyKeyAttestation(jws, challenge []byte, policy *Policy, opts Options) (res *KeyResult, err error) {
	if policy == nil {
		policy = &Policy{}
	}
	st := &state{opts: opts, policy: policy, res: &Result{PolicyID: policy.ID()}}
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, st.fail(rejected(checkInput, "", "internal error while verifying"))
		}
	}()
	if opts.Now == nil {
		return nil, usage("Options.Now is required")
	}
	key, err := evidencedoc.SignerKey(jws)
	if err != nil {
		return nil, st.fail(wrapRejected(checkEvidenceDocument, poh.MalformedEnvelope, err))
	}
	doc, err := evidencedoc.Parse(jws, key)
	if err != nil {
		return nil, st.fail(evidenceDocRejected(err))
	}
	if doc.Kind != evidencedoc.KindKey || doc.Key == nil {
		return nil, st.fail(rejected(checkKeyAttestation, poh.EvidenceMismatch, "the evidence document is a %s, not a key attestation", doc.Kind))
	}
	if doc.AttesterDID != didkey.Format(key) {
		return nil, st.fail(rejected(checkKeyAttestation, poh.EvidenceMismatch, "the signer is not the attester DID"))
	}
	if subtle.ConstantTimeCompare([]byte(doc.Key.ChallengeB64u), []byte(b64u.Encode(challenge))) != 1 {
		return nil, st.fail(rejected(checkKeyAttestation, poh.EvidenceMismatch, "the key attestation answers another challenge (stale or replayed)"))
	}
	nonce, err := evidencedoc.KeyNonce(challenge)
	if err != nil || nonce != doc.Nonce {
		return nil, st.fail(rejected(checkKeyAttestation, poh.EvidenceMismatch, "the key attestation nonce is not derived from the challenge"))
	}
	st.doc = doc
	st.res.AttesterDID = doc.AttesterDID
	st.pass(checkKeyAttestation, "signed by %s for this challenge", doc.AttesterDID)
	if len(challenge) == 0 {
		st.warn("no challenge: the key attestation is not fresh")
	}
	if len(doc.Items) == 0 {
		return nil, st.fail(rejected(checkPlatform, poh.EvidenceMismatch, "the key attestation carries no hardware evidence"))
	}
	if e := st.checkPlatform(); e != nil {
		return nil, st.fail(e)
	}
	pp := policy.Platform()
	for i, pr := range st.res.Platform {
		if err := platform.CheckPolicy(pr, pp); err != nil {
			return nil, st.fail(platformPolicyErr(i, pr, err))
		}
	}
	if len(policy.TrustedAttesterDIDs) > 0 && !slices.Contains(policy.TrustedAttesterDIDs, doc.AttesterDID) {
		return nil, st.fail(policyErr(PolicyAttester, "trusted_attester_dids", "attester %s is not in trusted_attester_dids", doc.AttesterDID))
	}
	st.pass(checkPolicy, "%s", st.res.PolicyID)
	out := &KeyResult{
		AttesterDID: doc.AttesterDID, AttesterKey: key, Simulated: doc.Simulated(),
		Evidence: st.res.Evidence, Platform: st.res.Platform, Checks: st.checks, Warnings: st.res.Warnings,
	}
	if doc.Key.RecipientX25519B64u != "" {
		rk, err := b64u.Decode(doc.Key.RecipientX25519B64u)
		if err != nil || len(rk) != 32 {
			return nil, st.fail(rejected(checkKeyAttestation, poh.MalformedEnvelope, "recipient_x25519_b64u is not a 32-byte key"))
		}
		out.RecipientX25519 = rk
	}
	return out, nil
}
