package simroots

// The pinned digests, for the external tests that check them against the
// embedded certificates.
const (
	SEVSNPARKSHA256ForTest = sevsnpARKSHA256
	SEVSNPASKSHA256ForTest = sevsnpASKSHA256
)
