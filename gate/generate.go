package gate

// The golden audit log in testdata/decisions.golden.jsonl is generated; see
// internal/goldengen.
//go:generate go run ./internal/goldengen/gen -out testdata/decisions.golden.jsonl

// openclawrelease.go lists the keys the supported OpenClaw release declares
// in the config sections the gate reads, from that release's own config
// schema; see internal/ockeys.
//go:generate go run ./internal/ockeys/gen -out openclawrelease.go
