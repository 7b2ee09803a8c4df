package tdxquote

// MaxPCKChainSize is maxPCKChainSize for the external tests.
const MaxPCKChainSize = maxPCKChainSize

// MinSize is minSize for the external tests.
const MinSize = minSize

// Layout sizes for the external tests.
const (
	HeaderSize = headerSize
	SignedSize = signedSize
)

// Wire constants for the external tests.
const (
	Version           = version4
	MaxSize           = maxSize
	TDAttributesDebug = tdAttributesDebug
)
