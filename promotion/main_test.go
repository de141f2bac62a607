package promotion_test

import (
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
