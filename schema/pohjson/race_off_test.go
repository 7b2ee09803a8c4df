//go:build !race

package pohjson

// raceEnabled: see race_on_test.go.
const raceEnabled = false
