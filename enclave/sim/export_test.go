package sim

// Names for the external tests.
const (
	MaxSeedSize  = maxSeedSize
	MaxLabelSize = maxLabelSize
)

var (
	ErrBadOptions = errBadOptions
	ErrBadLabel   = errBadLabel
)
