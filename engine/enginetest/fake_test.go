package enginetest

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// TestFakeConforms runs the suite on the fake engine, so the tests that
// drive it drive an engine that keeps the contract.
func TestFakeConforms(t *testing.T) {
	Run(t, Options{
		New:                  func(testing.TB) engine.Engine { return NewFake(MinContext) },
		Simulated:            true,
		RejectsUnknownTokens: true,
		SamplesLogits:        true, // the sampled token is the only non-zero logit
		InUse:                func(e engine.Engine) int { return e.(*Fake).Sequences() },
	})
}
