package tpm

// The swtpm quote fixture of wire/tpmquote and the swtpm fuzz seeds are
// generated from a real swtpm; see internal/fixturegen.
//go:generate go run ./internal/fixturegen
