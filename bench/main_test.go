package bench

import (
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestMain runs the tests with the shared Redis servers' cleanups and a
// check for leaked goroutines.
func TestMain(m *testing.M) { redistest.Main(m) }
