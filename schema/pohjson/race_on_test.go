//go:build race

package pohjson

// raceEnabled: the race detector is on, and sync.Pool drops a share of
// what it is given at random, so that allocation counts of pooled code
// mean nothing.
const raceEnabled = true
