package cpu

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (a pool worker of an
// engine that was not closed, say) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
