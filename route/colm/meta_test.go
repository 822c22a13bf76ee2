package colm_test

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/route/colm"
)

// TestNewChecksTheSmallModel checks that New refuses a router whose
// metadata or width does not fit model 0, naming both sides.
func TestNewChecksTheSmallModel(t *testing.T) {
	routetest.CheckRouterFacts(t, "co-llm", "citer", colm.New)
}
