package ui

import (
	"testing"

	"github.com/dibsio/dibs/internal/testkit/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }
