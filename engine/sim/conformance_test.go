package sim

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// TestConformance runs the engine conformance suite on the simulated
// engine, without latency and with a latency profile.
func TestConformance(t *testing.T) {
	const ctxLen = 64
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"zero", Config{Seed: 5, ContextLength: ctxLen, VocabSize: 300}},
		{"latency", Config{Seed: 6, ContextLength: ctxLen, Agree: 0.5, AgreeSeed: 5,
			Profile: Profile{Curve: steptime.Linear(0.2, 0.01, 0.002)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			slow := c.cfg
			// An extend of ctxLen/2 tokens takes 2·SlowStep; decodes take no time.
			slow.Profile = Profile{Curve: steptime.Linear(0, 0, ms(2*enginetest.SlowStep)/(ctxLen/2-1))}
			enginetest.Run(t, enginetest.Options{
				New:       func(testing.TB) engine.Engine { return New(c.cfg) },
				Slow:      func(testing.TB) engine.Engine { return New(slow) },
				Simulated: true,
				// Tokens and logits are separate synthetic functions of the
				// prefix, and any id hashes: sim neither samples from its
				// logits nor rejects ids outside its vocabulary.
				SamplesLogits:        false,
				RejectsUnknownTokens: false,
				Embedder:             true,
				AllocFree:            true,
				InUse:                func(e engine.Engine) int { return e.(*Engine).Sequences() },
			})
		})
	}
}
