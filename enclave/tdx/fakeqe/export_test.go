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

// UserDataMarker is userDataMarker for the external tests.
const UserDataMarker = userDataMarker

// PinnedHierarchy is pinnedHierarchy for the external tests.
var PinnedHierarchy = pinnedHierarchy

// ChainDER returns the PCK chain, leaf first: PCK leaf, PCK Platform CA,
// root.
func (h *Hierarchy) ChainDER() [][]byte { return h.chainDER }
