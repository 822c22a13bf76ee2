package citer_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/route/citer"
)

// TestNewChecksTheSmallModel checks that New refuses a router whose
// metadata or width does not fit model 0, naming both sides.
func TestNewChecksTheSmallModel(t *testing.T) {
	routetest.CheckRouterFacts(t, "citer", "co-llm", citer.New)
}
