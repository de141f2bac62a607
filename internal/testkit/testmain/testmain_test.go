package testmain

import (
	"slices"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestCleanupsRunInReverseOnce: cleanups run last registered first, like
// t.Cleanup, and a second run finds none left.
func TestCleanupsRunInReverseOnce(t *testing.T) {
	var got []int
	for i := range 3 {
		RegisterCleanup(func() { got = append(got, i) })
	}
	runCleanups()
	runCleanups()
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("cleanups ran as %v, want %v", got, want)
	}
}
