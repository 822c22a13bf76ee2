//go:build race

package nats

// raceEnabled: the race detector is on, and sync.Pool drops some of what
// is put in it, so pooled paths allocate.
const raceEnabled = true
