package snpevidence

import "github.com/clawea/attester/wire/evidence"

// ParseCertTable is parseCertTable for the external tests.
var ParseCertTable = parseCertTable

// Names for the external tests.
var (
	GUIDVLEK              = guidVLEK
	ErrMalformedCertTable = errMalformedCertTable
)

const MaxCertTableEntries = maxCertTableEntries

func (p *Parsed) Evidence() *evidence.Evidence { return p.evidence() }
