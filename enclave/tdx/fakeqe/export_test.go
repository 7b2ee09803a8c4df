package fakeqe

import "crypto/x509"

// Names for the external tests.
const PinnedSeed = pinnedSeed

var (
	FMSPC           = fmspc
	PCEID           = pceID
	IntelQEVendorID = intelQEVendorID
	SeedKey         = seedKey
)

// Root returns the hierarchy's root certificate.
func (h *Hierarchy) Root() *x509.Certificate { return h.root }
