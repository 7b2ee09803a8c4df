package tdxquote

// MaxPCKChainSize is maxPCKChainSize for the external tests.
const MaxPCKChainSize = maxPCKChainSize
