package attestation

// The sentinels no other package branches on, for the external tests.
var (
	ErrConfig   = errConfig
	ErrQuote    = errQuote
	ErrEvidence = errEvidence
)
