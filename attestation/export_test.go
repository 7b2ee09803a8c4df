package attestation

// The sentinels no other package branches on, for the external tests.
var (
	ErrConfig   = errConfig
	ErrBundle   = errBundle
	ErrQuote    = errQuote
	ErrEvidence = errEvidence
)
