package poh

// Names the external tests (package poh_test) use but no other package
// needs.
const (
	RateLimitWindowInvalid     = rateLimitWindowInvalid
	RateLimitClaimInconsistent = rateLimitClaimInconsistent
	CoSignatureInvalid         = coSignatureInvalid
	DisclosureTypeMismatch     = disclosureTypeMismatch
	DisclosureRootMismatch     = disclosureRootMismatch
	ExpiredTTL                 = expiredTTL
	ToolReceiptEnvelopeV2      = toolReceiptEnvelopeV2
)
