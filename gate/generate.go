package gate

// The golden audit log in testdata/decisions.golden.jsonl is generated; see
// internal/goldengen.
//go:generate go run ./internal/goldengen/gen -out testdata/decisions.golden.jsonl
