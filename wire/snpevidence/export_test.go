package snpevidence

// ParseCertTable is parseCertTable for the external tests.
var ParseCertTable = parseCertTable
