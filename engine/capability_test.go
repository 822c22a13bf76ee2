package engine_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
)

// paged is an engine with the KVPager capability.
type paged struct{ *enginetest.Fake }

func (paged) KVBlocksInUse() int { return 7 }

// wrapper wraps an engine without forwarding its capabilities.
type wrapper struct{ engine.Engine }

func (w wrapper) Unwrap() engine.Engine { return w.Engine }

func TestCapabilityLooksThroughWrappers(t *testing.T) {
	e := wrapper{wrapper{paged{enginetest.NewFake(64)}}}
	if _, ok := engine.Engine(e).(engine.KVPager); ok {
		t.Fatal("the wrapper itself has the capability: the test shows nothing")
	}
	p, ok := engine.Capability[engine.KVPager](e)
	if !ok || p.KVBlocksInUse() != 7 {
		t.Fatalf("KVPager through two wrappers: %v %v", p, ok)
	}
	if _, ok := engine.Capability[engine.PrefixCacher](e); ok {
		t.Fatal("a capability no engine in the chain has was found")
	}
}
