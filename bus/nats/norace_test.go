//go:build !race

package nats

// raceEnabled: the race detector is on (see race_test.go).
const raceEnabled = false
