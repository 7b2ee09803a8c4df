package teeclaims

// Claim types for the external tests.
const (
	TypeSEVSNP  = typeSEVSNP
	TypeTDX     = typeTDX
	TypeGeneric = typeGeneric
)
