package poh

// The proof-bundle test vectors in testdata/bundles are generated; see
// internal/vectorgen.
//go:generate go run ./internal/vectorgen/gen -out testdata/bundles
