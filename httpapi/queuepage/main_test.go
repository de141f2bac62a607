package queuepage

import (
	"testing"

	"github.com/dibsio/dibs/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }
