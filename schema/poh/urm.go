package poh

import "github.com/clawea/attester/schema/pohjson"

// urmMissing is clawverify's code for a bundle that references a Universal
// Resource Manifest (payload.urm) when the URM document itself was not
// supplied.
const urmMissing Code = "URM_MISSING"

// checkURMReference refuses a bundle with a payload.urm reference: the URM
// document is never supplied to this verifier, and a reference that cannot
// be checked must not pass (docs/spec/hashing-and-envelopes.md §5.2).
func checkURMReference(p *pohjson.Value) error {
	if p.Has("urm") {
		return fail(urmMissing, "payload.urm", "the bundle references a URM document that was not supplied")
	}
	return nil
}
